"""Lesson 02: scaled dot-product attention and differential attention (V1 and V2 forms), one head, stdlib only.

Shapes (one head, batch omitted): q, k are (N_q, d) and (N_k, d); v is (N_k, d_v). Causal masking aligns the last
query with the last key (query i sees keys j ≤ i + N_k − N_q), which is what a decoder with a KV cache needs.

    A      = softmax(q kᵀ / √d)                                     ordinary attention map, rows sum to 1
    V1:  W = softmax(q1 k1ᵀ/√d) − λ · softmax(q2 k2ᵀ/√d)           two maps, separate q/k; v is 2d wide; rows sum to 1 − λ
    V2:  W = softmax(q1 kᵀ/√d)  − σ(λ_t) · softmax(q2 kᵀ/√d)        a pair of query heads sharing k and v; λ_t per query
    out  = W v = A1 v − λ · A2 v                                    (linearity: the kernels compute it this way)

The scale is 1/√d with d the query/key width in both versions: no √2, no 1/√(2d).
"""

from __future__ import annotations

import math
from typing import Sequence

from diffattn.core.errors import require
from diffattn.pure.matrix import Matrix, dot, matmul, width
from diffattn.pure.softmax import softmax

Rows = Sequence[Sequence[float]]


def sigmoid(x: float) -> float:
    """σ(x) = 1 / (1 + e^−x), written so that neither branch overflows."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def lambda_init(depth: int) -> float:
    """V1's λ_init = 0.8 − 0.6·exp(−0.3·depth) with **0-based** depth (first layer → 0.2), as in the official code.

    The paper writes the same schedule with a 1-based layer index l: exp(−0.3·(l − 1)).
    """
    require(depth >= 0, f"depth is 0-based and must be >= 0 (got {depth})")
    try:
        decay = math.exp(-0.3 * depth)
    except OverflowError:  # an int beyond float range (~1.8e308): exp(−0.3·depth) underflowed to 0 long before
        decay = 0.0
    return 0.8 - 0.6 * decay


def attention_weights(q: Rows, k: Rows, causal: bool = False) -> Matrix:
    """A = softmax(q kᵀ / √d) row by row, (N_q, d) × (N_k, d) -> (N_q, N_k)."""
    return _masked_softmax(_logits(q, k), causal)


def scaled_dot_product_attention(q: Rows, k: Rows, v: Rows, causal: bool = False) -> Matrix:
    """softmax(q kᵀ / √d) v: (N_q, d), (N_k, d), (N_k, d_v) -> (N_q, d_v)."""
    _check_values(k, v)
    return matmul(attention_weights(q, k, causal), v)


def diff_weights_v1(q1: Rows, k1: Rows, q2: Rows, k2: Rows, lam: float, causal: bool = False) -> Matrix:
    """DIFF V1 effective map A1 − λ·A2, (N_q, N_k). Entries can be negative; each row sums to 1 − λ."""
    require(math.isfinite(lam), f"λ must be a finite number (got {lam})")
    _check_pair(q1, k1, q2, k2)
    a1 = attention_weights(q1, k1, causal)
    a2 = attention_weights(q2, k2, causal)
    return [[x1 - lam * x2 for x1, x2 in zip(r1, r2)] for r1, r2 in zip(a1, a2)]


def diff_attention_v1(q1: Rows, k1: Rows, q2: Rows, k2: Rows, v: Rows, lam: float, causal: bool = False) -> Matrix:
    """DIFF V1 head output (A1 − λ·A2) v with v of width 2d, -> (N_q, 2d)."""
    d = width(q1)
    require(width(v) == 2 * d, f"DIFF V1 values are 2d wide, d = query width {d}: expected {2 * d}, got {width(v)}")
    _check_values(k1, v)
    return matmul(diff_weights_v1(q1, k1, q2, k2, lam, causal), v)


def diff_weights_v2(q1: Rows, q2: Rows, k: Rows, lambda_logits: float | Sequence[float], causal: bool = False) -> Matrix:
    """DIFF V2 effective map A1 − σ(λ_t)·A2 for a pair of query heads sharing one key head.

    `lambda_logits` is the raw projection λ_t = W_λ x_t, one per query row (or one float for all rows); the
    coefficient σ(λ_t) lies in (0, 1), so each row sums to 1 − σ(λ_t) ∈ (0, 1).
    """
    _check_pair(q1, k, q2, k)
    gates = _per_row(lambda_logits, len(q1))
    a1 = attention_weights(q1, k, causal)
    a2 = attention_weights(q2, k, causal)
    return [[x1 - g * x2 for x1, x2 in zip(r1, r2)] for r1, r2, g in zip(a1, a2, gates)]


def diff_attention_v2(q1: Rows, q2: Rows, k: Rows, v: Rows, lambda_logits: float | Sequence[float], causal: bool = False) -> Matrix:
    """DIFF V2 head output (A1 − σ(λ_t)·A2) v with v of width d (same as the baseline), -> (N_q, d)."""
    _check_values(k, v)
    return matmul(diff_weights_v2(q1, q2, k, lambda_logits, causal), v)


def logit_difference_weights(q1: Rows, k1: Rows, q2: Rows, k2: Rows, lam: float, causal: bool = False) -> Matrix:
    """softmax((q1 k1ᵀ − λ·q2 k2ᵀ)/√d): a common misreading of DIFF. **Not** differential attention.

    It subtracts logits before one softmax, so its rows are a probability distribution (non-negative, sum 1): it
    can never cancel the noise floor that lesson 01 measures. Kept only so lesson 02 can put it beside the real thing.
    """
    _check_pair(q1, k1, q2, k2)
    z1, z2 = _logits(q1, k1), _logits(q2, k2)
    return _masked_softmax([[x1 - lam * x2 for x1, x2 in zip(r1, r2)] for r1, r2 in zip(z1, z2)], causal)


def _logits(q: Rows, k: Rows) -> Matrix:
    """z = q kᵀ / √d, (N_q, d) × (N_k, d) -> (N_q, N_k); d is the query/key width (no √2, no 2d)."""
    d = width(q)
    require(width(k) == d, f"queries and keys must have the same width (got {d} and {width(k)})")
    scale = 1.0 / math.sqrt(d)
    return [[dot(q_row, k_row) * scale for k_row in k] for q_row in q]


def _masked_softmax(logits: Matrix, causal: bool) -> Matrix:
    """softmax of each row of (N_q, N_k) logits; causal: query i sees keys j ≤ i + N_k − N_q, the rest get −inf."""
    n_q, n_k = len(logits), len(logits[0])
    require(not causal or n_q <= n_k, f"causal attention needs N_q <= N_k (got {n_q} > {n_k})")
    offset = n_k - n_q  # query i is token i + offset of the key sequence: the last query meets the last key
    return [
        softmax([z if not causal or j <= i + offset else -math.inf for j, z in enumerate(row)])
        for i, row in enumerate(logits)
    ]


def _check_pair(q1: Rows, k1: Rows, q2: Rows, k2: Rows) -> None:
    """The two maps of a differential head must have the same shapes, or zip would silently drop rows."""
    require(len(q1) == len(q2), f"both maps need the same number of queries (got {len(q1)} and {len(q2)})")
    require(len(k1) == len(k2), f"both maps need the same number of keys (got {len(k1)} and {len(k2)})")
    require(width(q1) == width(q2), f"both maps use the same head width d (got {width(q1)} and {width(q2)})")


def _check_values(k: Rows, v: Rows) -> None:
    require(len(k) == len(v), f"keys and values must have the same length (got {len(k)} and {len(v)})")


def _per_row(values: float | Sequence[float], n: int) -> list[float]:
    """Broadcast a scalar λ logit to n rows, or check a per-row list, then apply σ."""
    if isinstance(values, (int, float)):
        values = [float(values)] * n
    require(len(values) == n, f"need one λ logit per query row: {n} rows, {len(values)} logits")
    require(all(math.isfinite(x) for x in values), "λ logits must be finite")
    return [sigmoid(x) for x in values]
