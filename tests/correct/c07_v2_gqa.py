"""07.1, correct: the GQA group map and DIFF V2 over a GQA KV cache.

How it differs from the reference (diffattn.nn.functional.query_head_groups, diffattn.nn.kernels.diff_v2_gqa_attention):
  query_head_groups      builds the list block by block (KV head j repeated g times), not as i // g.
  diff_v2_gqa_attention  never calls an attention kernel: the query heads are viewed as (h_kv groups, g heads) and
                         each group's scores are one einsum against its own KV head, softmaxed (in at least
                         float32) under an explicit bottom-right mask, then the pairs are the last axis of a
                         (g/2, 2) view. Every shape is validated up front, including v's head_dim and KV-head count
                         against k's (the reference's kernel lets a v of another width through).
"""

from __future__ import annotations

import math

import torch

from diffattn.core.errors import ConfigError


def _count(x):
    return isinstance(x, int) and not isinstance(x, bool)


def query_head_groups(num_q_heads, num_kv_heads):
    if not (_count(num_q_heads) and _count(num_kv_heads)) or num_q_heads <= 0 or num_kv_heads <= 0:
        raise ConfigError(f"head counts must be integers > 0 (got {num_q_heads!r} and {num_kv_heads!r})")
    if num_q_heads % num_kv_heads:
        raise ConfigError(f"num_q_heads ({num_q_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    size = num_q_heads // num_kv_heads
    groups = []
    for kv_head in range(num_kv_heads):
        groups.extend([kv_head] * size)
    return groups


def diff_v2_gqa_attention(q, k, v, lambda_logits, causal=True):
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or lambda_logits.dim() != 3:
        raise ConfigError("q, k, v must be (batch, seq, heads, head_dim) and lambda_logits (batch, seq, heads)")
    batch, n, q_heads, d = q.shape
    if k.shape[0] != batch or k.shape[3] != d:
        raise ConfigError(f"k {tuple(k.shape)} does not match q {tuple(q.shape)} in batch or head_dim")
    if tuple(v.shape) != tuple(k.shape):
        raise ConfigError(f"v {tuple(v.shape)} must have k's shape {tuple(k.shape)} (batch, N_k, h_kv, d)")
    n_k, kv_heads = k.shape[1], k.shape[2]
    if q_heads == 0 or kv_heads == 0 or q_heads % kv_heads:
        raise ConfigError(f"2h = {q_heads} query heads must be a positive multiple of h_kv = {kv_heads}")
    size = q_heads // kv_heads
    if size % 2:
        raise ConfigError(f"GQA groups of {size} query heads: pair (2i, 2i+1) would straddle two KV heads")
    if tuple(lambda_logits.shape) != (batch, n, q_heads // 2):
        raise ConfigError(f"lambda_logits must be (batch, seq, heads) = {(batch, n, q_heads // 2)}, "
                          f"got {tuple(lambda_logits.shape)}")
    if n_k == 0 or (causal and n > n_k):
        raise ConfigError(f"{n} queries over {n_k} keys: some query would see no key")
    work = torch.promote_types(q.dtype, torch.float32)
    grouped = q.to(work).reshape(batch, n, kv_heads, size, d)
    scores = torch.einsum("bnhgd,bmhd->bhgnm", grouped, k.to(work)) / math.sqrt(d)  # (b, h_kv, g, N, N_k)
    if causal:
        visible = torch.ones(n, n_k, dtype=torch.bool, device=q.device).tril(diagonal=n_k - n)
        scores = scores.masked_fill(~visible, -math.inf)
    maps = torch.softmax(scores, dim=-1)  # (b, h_kv, g, N, N_k)
    heads = torch.einsum("bhgnm,bmhd->bnhgd", maps, v.to(work))  # (b, N, h_kv, g, d)
    pairs = heads.reshape(batch, n, kv_heads, size // 2, 2, d)
    gate = torch.sigmoid(lambda_logits.to(work)).reshape(batch, n, kv_heads, size // 2, 1)
    out = pairs[..., 0, :] - gate * pairs[..., 1, :]
    return out.reshape(batch, n, q_heads // 2, d).to(q.dtype)


OVERRIDES = {"query_head_groups": query_head_groups, "diff_v2_gqa_attention": diff_v2_gqa_attention}
