"""Maps query head i to KV head i % h_kv (what `k.repeat(1, 1, n_rep, 1)` gives) instead of i // (2h / h_kv).

`repeat` tiles the KV heads [0 1 … 7 0 1 … 7 …] where GQA needs `repeat_interleave` [0 0 … 0 1 1 …]. Every pair
(2i, 2i+1) then reads two different KV heads, and no query head reads the group the model was trained with.
"""

import torch

from diffattn.nn.kernels import attention


def round_robin_groups(num_q_heads, num_kv_heads):
    if num_q_heads <= 0 or num_kv_heads <= 0 or num_q_heads % num_kv_heads:
        raise ValueError(f"{num_q_heads} query heads cannot share {num_kv_heads} KV heads")
    return [i % num_kv_heads for i in range(num_q_heads)]


def diff_v2_round_robin(q, k, v, lambda_logits, causal=True):
    n_rep = q.shape[2] // k.shape[2]
    out = attention(q, k.repeat(1, 1, n_rep, 1), v.repeat(1, 1, n_rep, 1), causal=causal)  # (b, N, 2h, d)
    return out[:, :, 0::2] - torch.sigmoid(lambda_logits).unsqueeze(-1) * out[:, :, 1::2]


OVERRIDES = {"query_head_groups": round_robin_groups, "diff_v2_gqa_attention": diff_v2_round_robin}
LOSES = ("07.1",)
