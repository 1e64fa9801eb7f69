"""DIFF V1 and V2 head outputs whose `causal` flag defaults to True instead of the signature's False.

Right whenever the caller says which mask it wants, but a plain call `diff_attention_v1(q1, k1, q2, k2, v, λ)` on an
encoder-style input silently hides every later key.
"""

from diffattn.pure.attention import diff_attention_v1, diff_attention_v2


def diff_attention_v1_causal_default(q1, k1, q2, k2, v, lam, causal=True):
    return diff_attention_v1(q1, k1, q2, k2, v, lam, causal)


def diff_attention_v2_causal_default(q1, q2, k, v, lambda_logits, causal=True):
    return diff_attention_v2(q1, q2, k, v, lambda_logits, causal)


OVERRIDES = {"diff_attention_v1": diff_attention_v1_causal_default, "diff_attention_v2": diff_attention_v2_causal_default}
LOSES = ("02.2",)
