"""DIFF V2 with GQA whose `causal` flag defaults to False.

Right whenever the caller passes causal=True, but a decoder layer that relies on the default lets every token
attend to the future.
"""

import torch

from diffattn.nn.functional import check_pairs_share_kv
from diffattn.nn.kernels import attention


def diff_v2_not_causal_by_default(q, k, v, lambda_logits, causal=False):
    check_pairs_share_kv(q.shape[2], k.shape[2])
    if tuple(lambda_logits.shape) != (q.shape[0], q.shape[1], q.shape[2] // 2):
        raise ValueError("lambda_logits must be (batch, seq, heads)")
    out = attention(q, k, v, causal=causal)  # (b, N, 2h, d)
    return out[:, :, 0::2] - torch.sigmoid(lambda_logits).unsqueeze(-1) * out[:, :, 1::2]


OVERRIDES = {"diff_v2_gqa_attention": diff_v2_not_causal_by_default}
LOSES = ("07.1",)
