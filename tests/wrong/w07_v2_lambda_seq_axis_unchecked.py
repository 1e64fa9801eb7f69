"""07.1 mistake (class B, lazy validation): the λ logits' shape is checked on the batch and head axes only, not on
the token axis, and torch broadcasting does the rest.

A (b, 1, h) tensor — one λ per sequence and head, e.g. the last token's — is accepted for N > 1 queries and
silently applied to every token, where the docstring wants one logit per token and head ((b, N, h), else a
ConfigError). (b, N, 1), (b, N), (1, N, h) and (b, N, 2h) are all refused.
"""

import torch

from diffattn.nn.functional import check_pairs_share_kv
from diffattn.nn.kernels import attention


def diff_v2_gqa_attention(q, k, v, lambda_logits, causal=True):
    check_pairs_share_kv(q.shape[2], k.shape[2])
    if v.shape[-1] != k.shape[-1]:
        raise ValueError("values must have the keys' head_dim")
    if lambda_logits.dim() != 3 or lambda_logits.shape[0] != q.shape[0] or lambda_logits.shape[2] != q.shape[2] // 2:
        raise ValueError("lambda_logits must be (batch, seq, heads)")
    out = attention(q, k, v, causal=causal)  # (b, N, 2h, d)
    return out[:, :, 0::2] - torch.sigmoid(lambda_logits).unsqueeze(-1).to(out.dtype) * out[:, :, 1::2]


OVERRIDES = {"diff_v2_gqa_attention": diff_v2_gqa_attention}
LOSES = ("07.1",)
