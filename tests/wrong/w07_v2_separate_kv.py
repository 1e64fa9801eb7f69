"""Gives each map of a pair its own key/value head, V1-style: map 1 reads even KV heads, map 2 odd ones.

That design needs 2·h_kv KV heads to keep the baseline's grouping, i.e. it doubles the KV cache. Handed the
baseline's cache of h_kv heads it instead pairs two different heads, and each map sees only half the KV heads.
"""

import torch

from diffattn.nn.kernels import attention


def diff_v2_separate_kv(q, k, v, lambda_logits, causal=True):
    attn1 = attention(q[:, :, 0::2], k[:, :, 0::2], v[:, :, 0::2], causal=causal)  # (b, N, h, d)
    attn2 = attention(q[:, :, 1::2], k[:, :, 1::2], v[:, :, 1::2], causal=causal)
    return attn1 - torch.sigmoid(lambda_logits).unsqueeze(-1) * attn2


OVERRIDES = {"diff_v2_gqa_attention": diff_v2_separate_kv}
LOSES = ("07.1",)
