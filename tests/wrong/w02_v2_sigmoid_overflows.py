"""02.2 mistake (class A, extreme but valid input): σ(λ_t) written as the textbook 1 / (1 + exp(−λ_t)).

Any finite λ logit is allowed, but math.exp(−λ_t) raises OverflowError for λ_t < −709.78 (σ(−1000) is simply ≈ 0,
so the row should be A1·v). Logits of ordinary size give the right output.
"""

import math

from diffattn.pure.attention import attention_weights  # the one-map part is not the mistake
from diffattn.pure.matrix import matmul, width


def diff_attention_v2(q1, q2, k, v, lambda_logits, causal=False):
    if len(q1) != len(q2) or width(q1) != width(q2):
        raise ValueError("q1 and q2 must have the same shape")
    if len(k) != len(v):
        raise ValueError("k and v must have the same length")
    logits = [float(lambda_logits)] * len(q1) if isinstance(lambda_logits, (int, float)) else list(lambda_logits)
    if len(logits) != len(q1) or not all(math.isfinite(x) for x in logits):
        raise ValueError("need one finite λ logit per query")
    gates = [1.0 / (1.0 + math.exp(-x)) for x in logits]  # overflows for x < -709.78
    a1, a2 = attention_weights(q1, k, causal), attention_weights(q2, k, causal)
    return matmul([[x - g * y for x, y in zip(r1, r2)] for r1, r2, g in zip(a1, a2, gates)], v)


OVERRIDES = {"diff_attention_v2": diff_attention_v2}
LOSES = ("02.2",)
