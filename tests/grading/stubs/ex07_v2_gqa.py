"""Exercise 07.1 · DIFF V2 with GQA (8 KV heads, 32 heads).  Lesson: lessons/07-small-gpt.md

Grade it with `make grade EX=ex07` (`make grade` grades every exercise).

You may use torch, `diffattn.nn.kernels.attention` and `diffattn.core.errors.require`; do not import the reference
`diffattn.nn.kernels.diff_v2_gqa_attention` or `diffattn.nn.functional.query_head_groups` (that grades the reference, not you).
"""

from __future__ import annotations

from torch import Tensor


def query_head_groups(num_q_heads: int, num_kv_heads: int) -> list[int]:
    """The GQA group (= the KV head) each query head reads.

    Grouped-query attention splits the query heads into num_kv_heads consecutive blocks of
    g = num_q_heads / num_kv_heads heads; every head of block j uses KV head j.

    Args:
        num_q_heads: number of query heads (> 0).
        num_kv_heads: number of key/value heads (> 0).
    Returns:
        A list of num_q_heads ints; entry i is i // g.
    Raises:
        diffattn.core.errors.ConfigError (a ValueError) if a count is <= 0 or num_q_heads is not a multiple of
        num_kv_heads, with a one-line message naming the constraint.

    Example:
        >>> query_head_groups(8, 2)
        [0, 0, 0, 0, 1, 1, 1, 1]
    """
    raise NotImplementedError("exercise 07.1: query_head_groups")


def diff_v2_gqa_attention(q: Tensor, k: Tensor, v: Tensor, lambda_logits: Tensor, causal: bool = True) -> Tensor:
    """DIFF V2 attention over a GQA KV cache: one attention call over 2h query heads, then pairwise subtraction.

    Shapes (layout (batch, seq, heads, head_dim), as in flash-attn):
        q              (b, N, 2h, d)      2h query heads; heads 2i and 2i+1 form differential pair i
        k, v           (b, N_k, h_kv, d)  the KV cache: exactly the baseline GQA model's, nothing extra
        lambda_logits  (b, N, h)          λ_{t,i} = (W_λ x_t)_i, one raw logit per token and output head
    Returns:
        (b, N, h, d) with, for output head i and its GQA group g(i) = query_head_groups(2h, h_kv)[2i]:

            A_m    = softmax(q_m k_{g(i)}ᵀ / √d)  for m = 2i, 2i+1       (scale 1/√d: no √2, no 1/√(2d))
            out_i  = A_2i v_{g(i)} − σ(λ_i) · A_{2i+1} v_{g(i)}           σ = sigmoid, so σ(λ) ∈ (0, 1)

        Both maps of a pair share one K and one V: pairs are adjacent heads (2i, 2i+1), never first half / second
        half. With `causal`, query t of N sees keys j <= t + (N_k − N) (bottom-right aligned), so a single decoding
        query (N = 1) sees the whole cache; note that `torch.nn.functional.scaled_dot_product_attention(is_causal=True)`
        aligns top-left when N != N_k.
    Raises:
        ConfigError if 2h is not a multiple of h_kv, if a pair (2i, 2i+1) would fall into two GQA groups (an odd group
        size), or if the shapes disagree (batch, head_dim, N_k, number of λ logits).
    Tolerance: the grader compares against a float64 reference at atol 1e-5 (float32 inputs).

    Example (one query, one key, so each softmax is exactly 1 and out = (1 − σ(λ))·v):
        q = torch.zeros(1, 1, 4, 2); k = torch.zeros(1, 1, 2, 2); v = torch.tensor([[[[1., 2.], [3., 4.]]]])
        lambda_logits = torch.zeros(1, 1, 2)           # σ(0) = 0.5
        diff_v2_gqa_attention(q, k, v, lambda_logits)  # → [[[[0.5, 1.0], [1.5, 2.0]]]]: pair 0 uses KV head 0,
                                                       #   pair 1 uses KV head 1 (2h = 4, h_kv = 2, groups [0,0,1,1])
    """
    raise NotImplementedError("exercise 07.1: diff_v2_gqa_attention")
