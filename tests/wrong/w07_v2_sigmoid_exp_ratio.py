"""07.1 mistake (class A, extreme but valid input): σ(λ) computed as exp(λ) / (1 + exp(λ)).

Equal to torch.sigmoid for ordinary logits, but in float32 exp(λ) is inf for λ > 88.7, inf / inf is NaN, and the
output heads of those tokens are NaN where σ(λ) ≈ 1 (out ≈ A_2i v − A_2i+1 v).
"""

import torch

from diffattn.nn.functional import check_pairs_share_kv
from diffattn.nn.kernels import attention


def diff_v2_gqa_attention(q, k, v, lambda_logits, causal=True):
    check_pairs_share_kv(q.shape[2], k.shape[2])
    if v.shape[-1] != k.shape[-1]:
        raise ValueError("values must have the keys' head_dim")
    if tuple(lambda_logits.shape) != (q.shape[0], q.shape[1], q.shape[2] // 2):
        raise ValueError("lambda_logits must be (batch, seq, heads)")
    out = attention(q, k, v, causal=causal)  # (b, N, 2h, d)
    e = torch.exp(lambda_logits)
    gate = (e / (1 + e)).unsqueeze(-1).to(out.dtype)
    return out[:, :, 0::2] - gate * out[:, :, 1::2]


OVERRIDES = {"diff_v2_gqa_attention": diff_v2_gqa_attention}
LOSES = ("07.1",)
