"""DIFF V2 with GQA that never checks the shape of `lambda_logits` and lets torch broadcast it.

A (b, N, 1) or (b, N) tensor, or λ for one sequence of the batch, is then silently applied to every head (or every
sequence): one coefficient where the model has one per token and head.
"""

import torch

from diffattn.nn.functional import check_pairs_share_kv
from diffattn.nn.kernels import attention


def diff_v2_lambda_shape_unchecked(q, k, v, lambda_logits, causal=True):
    check_pairs_share_kv(q.shape[2], k.shape[2])
    out = attention(q, k, v, causal=causal)  # (b, N, 2h, d)
    return out[:, :, 0::2] - torch.sigmoid(lambda_logits).unsqueeze(-1) * out[:, :, 1::2]


OVERRIDES = {"diff_v2_gqa_attention": diff_v2_lambda_shape_unchecked}
LOSES = ("07.1",)
