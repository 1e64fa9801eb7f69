"""Lessons 05-07: the PyTorch mirror of `diffattn.pure`, plus the pieces only the multi-head modules need.

Two layouts, on purpose:

* The mirrors of `diffattn.pure` (same names: `softmax`, `attention_weights`, `scaled_dot_product_attention`,
  `diff_weights_v1`, `diff_attention_v1`, `diff_weights_v2`, `diff_attention_v2`, `logit_difference_weights`,
  `sigmoid`, `lambda_init`) take one head as (N, d), batched over any leading dims: (..., N, d), the layout of
  `torch.nn.functional.scaled_dot_product_attention`. On 2-D tensors they return exactly what the stdlib versions
  return (tests/test_06_kernels.py compares them in fp64).
* The module pieces (`reparameterized_lambda`, `rms_norm`, `headwise_norm`, `query_head_groups`) use the module
  layout (batch, seq, heads, head_dim) of flash-attn and the official code; the kernel that runs all of V2's heads in
  one call, `diff_v2_gqa_attention`, is built on them in `diffattn.nn.kernels`, which builds its math path on this
  module (so this module imports nothing from it).

Causal masking is bottom-right aligned everywhere: query i of N_q sees keys j ≤ i + N_k − N_q, which is what a
decoder with a KV cache needs (the last query is the newest token and sees every key).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from diffattn.core.errors import require
from diffattn.pure.attention import lambda_init  # one schedule for both tracks: λ_init is plain arithmetic

__all__ = [
    "attention_weights",
    "causal_mask",
    "check_pairs_share_kv",
    "diff_attention_v1",
    "diff_attention_v2",
    "diff_weights_v1",
    "diff_weights_v2",
    "headwise_norm",
    "lambda_init",
    "logit_difference_weights",
    "query_head_groups",
    "reparameterized_lambda",
    "rms_norm",
    "scaled_dot_product_attention",
    "sigmoid",
    "softmax",
]


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp16/bf16 are upcast to fp32 for reductions (softmax, RMS, λ); fp32 and fp64 stay as they are."""
    return torch.promote_types(dtype, torch.float32)


def softmax(logits: Tensor, dim: int = -1) -> Tensor:
    """Stable softmax along `dim`, accumulated in at least fp32 and cast back (the official naive path does this).

    torch.softmax subtracts the row max internally (lesson 01's trick); `-inf` entries get weight exactly 0.
    """
    return torch.softmax(logits, dim=dim, dtype=_compute_dtype(logits.dtype)).to(logits.dtype)


def sigmoid(x: Tensor) -> Tensor:
    """σ(x) = 1 / (1 + e^−x), elementwise."""
    return torch.sigmoid(x)


def causal_mask(n_q: int, n_k: int, device: torch.device | None = None) -> Tensor:
    """(N_q, N_k) bool, True where query i may see key j: j ≤ i + (N_k − N_q) (bottom-right aligned)."""
    require(n_q <= n_k, f"causal attention needs N_q <= N_k (got {n_q} > {n_k})")
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(diagonal=n_k - n_q)


def attention_weights(q: Tensor, k: Tensor, causal: bool = False) -> Tensor:
    """A = softmax(q kᵀ / √d): (..., N_q, d) × (..., N_k, d) -> (..., N_q, N_k)."""
    return _masked_softmax(_logits(q, k), causal)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False) -> Tensor:
    """softmax(q kᵀ / √d) v: (..., N_q, d), (..., N_k, d), (..., N_k, d_v) -> (..., N_q, d_v). The math path."""
    _check_values(k, v)
    return attention_weights(q, k, causal) @ v


def diff_weights_v1(q1: Tensor, k1: Tensor, q2: Tensor, k2: Tensor, lam: float | Tensor, causal: bool = False) -> Tensor:
    """DIFF V1 effective map A1 − λ·A2, (..., N_q, N_k): entries can be negative, each row sums to 1 − λ."""
    lam = torch.as_tensor(lam, dtype=q1.dtype, device=q1.device)
    require(bool(torch.isfinite(lam).all()), f"λ must be finite (got {lam})")
    return attention_weights(q1, k1, causal) - lam * attention_weights(q2, k2, causal)


def diff_attention_v1(
    q1: Tensor, k1: Tensor, q2: Tensor, k2: Tensor, v: Tensor, lam: float | Tensor, causal: bool = False
) -> Tensor:
    """DIFF V1 head output (A1 − λ·A2) v with v of width 2d: -> (..., N_q, 2d)."""
    d = q1.shape[-1]
    require(v.shape[-1] == 2 * d, f"DIFF V1 values are 2d wide, d = query width {d}: expected {2 * d}, got {v.shape[-1]}")
    _check_values(k1, v)
    return diff_weights_v1(q1, k1, q2, k2, lam, causal) @ v


def diff_weights_v2(q1: Tensor, q2: Tensor, k: Tensor, lambda_logits: float | Tensor, causal: bool = False) -> Tensor:
    """DIFF V2 effective map A1 − σ(λ_t)·A2 for a pair of query heads sharing one key head.

    `lambda_logits` is the raw λ_t = W_λ x_t: one per query row, shape (..., N_q), or a float for all rows. Each row
    of the result sums to 1 − σ(λ_t) ∈ (0, 1).
    """
    logits = torch.as_tensor(lambda_logits, dtype=q1.dtype, device=q1.device)
    require(bool(torch.isfinite(logits).all()), "λ logits must be finite")  # σ(±inf) is finite: check before it
    gate = sigmoid(logits)
    gate = gate.unsqueeze(-1) if gate.dim() > 0 else gate  # (..., N_q) -> (..., N_q, 1): one gate per row
    return attention_weights(q1, k, causal) - gate * attention_weights(q2, k, causal)


def diff_attention_v2(
    q1: Tensor, q2: Tensor, k: Tensor, v: Tensor, lambda_logits: float | Tensor, causal: bool = False
) -> Tensor:
    """DIFF V2 head output (A1 − σ(λ_t)·A2) v with v of width d (same as the baseline): -> (..., N_q, d)."""
    _check_values(k, v)
    return diff_weights_v2(q1, q2, k, lambda_logits, causal) @ v


def logit_difference_weights(
    q1: Tensor, k1: Tensor, q2: Tensor, k2: Tensor, lam: float | Tensor, causal: bool = False
) -> Tensor:
    """softmax((q1 k1ᵀ − λ·q2 k2ᵀ)/√d): a common misreading, **not** differential attention (rows sum to 1)."""
    return _masked_softmax(_logits(q1, k1) - lam * _logits(q2, k2), causal)


def reparameterized_lambda(
    lambda_q1: Tensor, lambda_k1: Tensor, lambda_q2: Tensor, lambda_k2: Tensor, lambda_init: float
) -> Tensor:
    """V1's λ = exp(λ_q1 · λ_k1) − exp(λ_q2 · λ_k2) + λ_init (paper eq. 2): one 0-dim fp32 scalar per layer.

    The four vectors are (d,) each. Everything is computed in fp32 (fp64 if given fp64) whatever the parameter dtype:
    exp amplifies rounding error, and this single number scales every head of the layer. Dot products are at most 88
    (exp(88.73) overflows fp32; inf − inf would be NaN): trained vectors give dot products near 0.
    """
    dtype = _compute_dtype(lambda_q1.dtype)
    dot1 = torch.sum(lambda_q1.to(dtype) * lambda_k1.to(dtype))  # λ_q1 · λ_k1, a 0-dim scalar
    dot2 = torch.sum(lambda_q2.to(dtype) * lambda_k2.to(dtype))  # λ_q2 · λ_k2
    return torch.exp(dot1) - torch.exp(dot2) + lambda_init  # unconstrained: only λ_init lies in (0, 1)


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """x / √(mean(x²) + eps) over the last dim, computed in fp32 and cast back, then × weight. No mean-centring.

    Entries up to ~1e18, as the official RMSNorm: x² is not rescaled, so fp32/bf16 entries above ~1.8e19 square to inf."""
    x32 = x.to(_compute_dtype(x.dtype))
    normed = (x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)).to(x.dtype)
    # × weight in the order of the official RMSNorm; the final cast keeps x's dtype when the weight is kept in fp32
    # inside a bf16 model (otherwise type promotion hands fp32 to the next bf16 Linear, which refuses it)
    return (normed * weight).to(x.dtype) if weight is not None else normed


def headwise_norm(attn: Tensor, weight: Tensor | None, lambda_init: float, eps: float = 1e-5) -> Tensor:
    """V1's per-head normalisation (paper eq. 3, "GroupNorm" in Fig. 2): (1 − λ_init) · RMSNorm(head_i).

    attn is (b, N, h, 2d): the RMS is taken over each head's own 2d channels (the last dim), never across heads;
    `weight` is one (2d,) vector shared by all heads (or None). The norm makes every head unit-RMS; the constant
    (1 − λ_init) then sets that scale to (1 − λ_init), the factor by which (A1 − λ_init·A2)V ≈ (1 − λ_init)·AV shrinks
    when A1 ≈ A2 at initialisation, which keeps gradient magnitudes Transformer-like (paper App. G).
    """
    return rms_norm(attn, weight, eps) * (1.0 - lambda_init)


def query_head_groups(num_q_heads: int, num_kv_heads: int) -> list[int]:
    """GQA: query head i reads KV head i // (num_q_heads / num_kv_heads). Returns that KV head for every i."""
    require(num_q_heads > 0 and num_kv_heads > 0, f"head counts must be > 0 (got {num_q_heads}, {num_kv_heads})")
    require(
        num_q_heads % num_kv_heads == 0,
        f"query heads ({num_q_heads}) must be a multiple of KV heads ({num_kv_heads})",
    )
    per_group = num_q_heads // num_kv_heads
    return [i // per_group for i in range(num_q_heads)]


def check_pairs_share_kv(num_q_heads: int, num_kv_heads: int) -> None:
    """DIFF V2 subtracts query heads (2i, 2i+1): both must read the same KV head, or the pair mixes two values."""
    require(num_q_heads % 2 == 0, f"DIFF V2 needs an even number of query heads (got {num_q_heads})")
    groups = query_head_groups(num_q_heads, num_kv_heads)
    for i in range(0, num_q_heads, 2):
        require(
            groups[i] == groups[i + 1],
            f"DIFF V2 pair ({i}, {i + 1}) would straddle KV groups {groups[i]} and {groups[i + 1]}: "
            f"{num_q_heads} query heads over {num_kv_heads} KV heads needs an even group size",
        )


def _logits(q: Tensor, k: Tensor) -> Tensor:
    """z = q kᵀ / √d, (..., N_q, d) × (..., N_k, d) -> (..., N_q, N_k); d is the query/key width (no √2, no 2d)."""
    d = q.shape[-1]
    require(k.shape[-1] == d, f"queries and keys must have the same width (got {d} and {k.shape[-1]})")
    return q @ k.transpose(-2, -1) / math.sqrt(d)


def _masked_softmax(logits: Tensor, causal: bool) -> Tensor:
    """Row softmax of (..., N_q, N_k) logits; causal: query i sees keys j ≤ i + N_k − N_q, the rest get −inf."""
    if causal:
        logits = logits.masked_fill(~causal_mask(logits.shape[-2], logits.shape[-1], logits.device), -math.inf)
    return softmax(logits)


def _check_values(k: Tensor, v: Tensor) -> None:
    require(k.shape[-2] == v.shape[-2], f"keys and values must have the same length (got {k.shape[-2]} and {v.shape[-2]})")
