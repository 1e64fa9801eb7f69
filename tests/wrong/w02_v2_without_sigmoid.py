"""DIFF V2 that uses the projected λ_t directly as the coefficient instead of σ(λ_t).

The V2 blog's ablation 3 ("projected λ without sigmoid"): the coefficient is then unbounded, rows sum to 1 − λ_t
(anything from −∞ to +∞) instead of 1 − σ(λ_t) ∈ (0, 1), and the context RMS loses its upper bound.
"""

from diffattn.pure.attention import attention_weights
from diffattn.pure.matrix import matmul


def diff_attention_v2_raw_lambda(q1, q2, k, v, lambda_logits, causal=False):
    rows = len(q1)
    coefficients = [float(lambda_logits)] * rows if isinstance(lambda_logits, (int, float)) else list(lambda_logits)
    a1, a2 = attention_weights(q1, k, causal), attention_weights(q2, k, causal)
    weights = [[x1 - c * x2 for x1, x2 in zip(r1, r2)] for r1, r2, c in zip(a1, a2, coefficients)]
    return matmul(weights, v)


OVERRIDES = {"diff_attention_v2": diff_attention_v2_raw_lambda}
LOSES = ("02.2",)
