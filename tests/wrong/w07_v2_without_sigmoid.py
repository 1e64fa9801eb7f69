"""Subtracts λ·A2V with the raw projection λ = W_λ x instead of σ(λ): the V2 blog's ablation 3.

The coefficient is then unbounded (negative, or above 1), so the context RMS has no upper bound.
"""

from diffattn.nn.functional import check_pairs_share_kv
from diffattn.nn.kernels import attention


def diff_v2_raw_lambda(q, k, v, lambda_logits, causal=True):
    check_pairs_share_kv(q.shape[2], k.shape[2])
    out = attention(q, k, v, causal=causal)  # (b, N, 2h, d)
    return out[:, :, 0::2] - lambda_logits.unsqueeze(-1) * out[:, :, 1::2]


OVERRIDES = {"diff_v2_gqa_attention": diff_v2_raw_lambda}
LOSES = ("07.1",)
