"""Calls PyTorch SDPA with `is_causal=True` for every shape, whose mask is aligned top-left.

Fine while N_q == N_k, but a decoding query (N_q = 1 over N_k cached keys) then sees only key 0, and a chunk of new
queries sees the oldest keys instead of the newest: cached decoding stops matching the full pass.
"""

import torch
from torch.nn.functional import scaled_dot_product_attention

from diffattn.nn.functional import check_pairs_share_kv


def diff_v2_top_left(q, k, v, lambda_logits, causal=True):
    check_pairs_share_kv(q.shape[2], k.shape[2])
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))  # (b, heads, N, d): SDPA's layout
    out = scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=True).transpose(1, 2)
    return out[:, :, 0::2] - torch.sigmoid(lambda_logits).unsqueeze(-1) * out[:, :, 1::2]


OVERRIDES = {"diff_v2_gqa_attention": diff_v2_top_left}
LOSES = ("07.1",)
