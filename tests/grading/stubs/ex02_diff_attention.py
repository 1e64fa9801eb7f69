"""Exercises 02.1 and 02.2 · differential attention, V1 and V2 (lesson 02: lessons/02-differential-attention.md).

Grade them with `make grade EX=ex02` (`make grade` grades every exercise).

Allowed helpers (import them; they are lesson 01's reference and plain list-of-rows algebra):
    from diffattn.pure.softmax import softmax           # stable softmax of one row, −inf → 0.0
    from diffattn.pure.matrix import dot, matmul, transpose, width
and the standard library (`math`). Do not call diffattn.pure.attention: that is the reference you are rebuilding.

Conventions (one head, no batch): a matrix is a list of rows. q*, k* are (N_q, d) and (N_k, d); v is (N_k, d_v).
Every map uses the scale 1/√d with d the query/key width (no √2, no 1/√(2d)). With `causal=True`, query i may
see keys j ≤ i + N_k − N_q (the last query lines up with the last key, as in decoding with a KV cache); the other
logits are −inf before the softmax, so their weights are exactly 0.0. causal=True with N_q > N_k is a ValueError.
"""

from __future__ import annotations

from typing import Sequence

Rows = Sequence[Sequence[float]]


def diff_weights_v1(q1: Rows, k1: Rows, q2: Rows, k2: Rows, lam: float, causal: bool = False) -> list[list[float]]:
    """Exercise 02.1: DIFF V1 effective attention map W = softmax(q1 k1ᵀ/√d) − λ·softmax(q2 k2ᵀ/√d).

    Inputs: q1, q2 of shape (N_q, d); k1, k2 of shape (N_k, d); a finite float λ (any sign: the learned λ is not
            constrained to (0, 1)); `causal` as in the module docstring, applied to both maps.
    Output: W of shape (N_q, N_k). Softmax each map first, then subtract: W_ij = A1_ij − λ·A2_ij. Each row sums to
            1 − λ and entries can be negative. softmax(z1 − λ·z2) (subtracting logits) is NOT this.
    Errors: ValueError when λ is not finite, q1/q2 or k1/k2 differ in shape, or queries and keys differ in width.
    Tolerance: the grader compares to an independent computation with absolute tolerance 1e-12.

    Example (N_q = 1, N_k = 2, d = 1, λ = 0.5):
        q1 = [[1.0]], k1 = [[1.0], [0.0]], q2 = [[0.0]], k2 = [[1.0], [0.0]]
        A1 = softmax([1, 0]) = [0.7311, 0.2689],  A2 = softmax([0, 0]) = [0.5, 0.5]
        W  = [[0.4811, 0.0189]]   (row sum 0.5 = 1 − λ)
    """
    raise NotImplementedError("exercise 02.1: softmax both maps, then subtract λ times the second")


def diff_attention_v1(
    q1: Rows, k1: Rows, q2: Rows, k2: Rows, v: Rows, lam: float, causal: bool = False
) -> list[list[float]]:
    """Exercise 02.2 (part 1): DIFF V1 head output (A1 − λ·A2) v.

    Inputs: as diff_weights_v1, plus v of shape (N_k, 2d): V1 has ONE value projection per head, twice as wide as
            the query/key width d (not two value projections V1, V2).
    Output: (N_q, 2d) = W v with W from diff_weights_v1; equal to A1 v − λ·A2 v by linearity. No extra scale
            factor (no √2): V1's (1 − λ_init) scale comes after a per-head RMSNorm, outside this function.
    Errors: ValueError when v is not 2d wide or v and k1 have different lengths (and everything diff_weights_v1
            rejects).
    Tolerance: absolute 1e-12 against an independent computation.

    Example: with the inputs of diff_weights_v1's example and v = [[1.0, 0.0], [0.0, 1.0]] (2d = 2),
        the output is W itself: [[0.4811, 0.0189]].
    """
    raise NotImplementedError("exercise 02.2: multiply the V1 map by the 2d-wide values")


def diff_attention_v2(
    q1: Rows, q2: Rows, k: Rows, v: Rows, lambda_logits: float | Sequence[float], causal: bool = False
) -> list[list[float]]:
    """Exercise 02.2 (part 2): DIFF V2 head output (softmax(q1 kᵀ/√d) − σ(λ_t)·softmax(q2 kᵀ/√d)) v.

    Inputs: q1, q2 of shape (N_q, d): the two query heads 2i and 2i+1 of a pair; k of shape (N_k, d) and v of shape
            (N_k, d): the ONE key head and ONE value head both queries share (same GQA group); `lambda_logits`:
            the raw λ_t = W_λ x_t, either one float per query row (length N_q) or a single float used for every
            row; `causal` as in the module docstring.
    Output: (N_q, d). Row t uses the coefficient σ(λ_t) = 1/(1 + e^−λ_t) ∈ (0, 1), so the effective weights of
            row t sum to 1 − σ(λ_t). There is no λ_init, no exp re-parameterisation and no norm in V2.
    Errors: ValueError when the number of λ logits is not N_q, a λ logit is not finite, q1 and q2 differ in shape,
            or k and v have different lengths.
    Tolerance: absolute 1e-12 against an independent computation.

    Example (N = 2, d = 1, no mask): q1 = [[1.0], [1.0]], q2 = [[0.0], [0.0]], k = [[1.0], [0.0]],
        v = [[1.0], [1.0]] (so each output is its row's weight sum), lambda_logits = [0.0, 2.0]
        → [[0.5], [0.1192]]   (1 − σ(0) = 0.5; 1 − σ(2) = 0.1192)
    """
    raise NotImplementedError("exercise 02.2: per-row σ(λ_t), shared k and v")
