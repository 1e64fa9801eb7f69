"""DIFF V2 with V1's habit of one λ per head: the first token's σ(λ_0) is used for every row.

In V2 the coefficient is σ(λ_t) with λ_t = W_λ x_t, a different value for every token (and head); a head-wide
constant gives row sums 1 − σ(λ_0) everywhere instead of 1 − σ(λ_t).
"""

from diffattn.pure.attention import diff_attention_v2


def diff_attention_v2_first_lambda(q1, q2, k, v, lambda_logits, causal=False):
    first = lambda_logits if isinstance(lambda_logits, (int, float)) else lambda_logits[0]
    return diff_attention_v2(q1, q2, k, v, first, causal)


OVERRIDES = {"diff_attention_v2": diff_attention_v2_first_lambda}
LOSES = ("02.2",)
