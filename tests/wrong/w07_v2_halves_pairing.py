"""Pairs the first half of the query heads with the second half (`out.chunk(2, dim=2)`) instead of neighbours.

Query heads 0 … h−1 are subtracted from heads h … 2h−1, so with GQA a pair reads two different KV heads (head i and
head h + i sit in different groups). The V2 blog's ablation 1: unstable and worse; HF DiffLlama pairs V1 this way.
"""

import torch

from diffattn.nn.kernels import attention


def diff_v2_halves(q, k, v, lambda_logits, causal=True):
    first, second = attention(q, k, v, causal=causal).chunk(2, dim=2)  # (b, N, h, d) each
    return first - torch.sigmoid(lambda_logits).unsqueeze(-1) * second


OVERRIDES = {"diff_v2_gqa_attention": diff_v2_halves}
LOSES = ("07.1",)
