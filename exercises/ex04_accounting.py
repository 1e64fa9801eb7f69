"""Lesson 04 exercises: count what DIFF V1 and DIFF V2 cost. Grade with `make grade EX=ex04`.

Both functions describe every variant by its *baseline* Transformer: hidden D (d_model), h = `heads` query heads of
width d = `head_dim` (h·d = D) and h_kv = `kv_heads` KV heads (None means MHA: h_kv = h). Count integers exactly.
Raise ValueError (e.g. `diffattn.core.errors.ConfigError`) with a one-line message for a layout that cannot be built:
a size ≤ 0, h·d ≠ D, h_kv not dividing h, an unknown variant, or DIFF V1 with an odd h or odd h_kv.

The four variants (lesson 04, "The math"):
  "baseline"     a Transformer attention module with h query heads and h_kv KV heads
  "baseline_2h"  the same Transformer with 2h query heads (same h_kv): what DIFF V2's "≈25% saving" is measured against
  "diff_v1"      the official `MultiheadDiffAttn(embed_dim=D, depth, num_heads=h/2, num_kv_heads=h_kv/2)`
                 (microsoft/unilm Diff-Transformer/multihead_flashdiff_1.py): h/2 differential heads
  "diff_v2"      the official `MultiheadFlashDiffV2(d_model=D, num_heads=h, num_kv_heads=h_kv, head_dim=d)`
                 (Diff-Transformer/Diff-Transformer-V2/multihead_flashdiffv2.py)
"""

from __future__ import annotations


def attention_params(variant: str, hidden: int, heads: int, head_dim: int, kv_heads: int | None = None) -> int:
    """Exercise 04.1: the number of parameters in one attention module of `variant`.

    Count every learnable tensor the official module owns: its Linear weights (no biases: all modules use
    bias=False) and, for DIFF V1, the λ re-parameterisation vectors and the learnable weight of its per-head
    RMSNorm `subln` (one shared weight vector, elementwise_affine=True since unilm PR #1644). Read the shapes off
    the module constructors (lesson 04 lists them): which projections keep the baseline's size, which double,
    and which are new?

    Inputs: variant in {"baseline", "baseline_2h", "diff_v1", "diff_v2"}; positive ints with heads·head_dim ==
    hidden; kv_heads None or a divisor of heads. Output: an int, exact.

    Worked example (the official example.py sizes, MHA): hidden 1024, heads 16, head_dim 64
        attention_params("baseline", 1024, 16, 64) == 4_194_304
        attention_params("diff_v1", 1024, 16, 64)  == 4_194_688      # 8 differential heads
    """
    raise NotImplementedError("exercise 04.1: count the weights of each official attention module")


def kv_cache_bytes_per_token(variant: str, layers: int, heads: int, head_dim: int, kv_heads: int | None = None,
                             bytes_per_value: int = 2) -> int:
    """Exercise 04.2: bytes of key and value cache one token occupies across all `layers` of `variant`.

    Count what a decoder must keep per token and layer to attend later: the cached keys and values of every KV
    head, at the widths the official module computes them (a DIFF V1 KV head caches two d-wide keys k1, k2 and
    one value of width 2d; think about how many KV heads each variant has). Multiply by `bytes_per_value`
    (2 = bf16).

    Inputs: as in 04.1 (no hidden), layers ≥ 1, bytes_per_value ≥ 1. Output: an int, exact.

    Worked example (a common exercise: GQA with 8 KV heads and 32 query heads, d 128, 32 layers, bf16):
        kv_cache_bytes_per_token("baseline", 32, 32, 128, 8) == 131_072        # 128 KiB per token
        kv_cache_bytes_per_token("diff_v2", 32, 32, 128, 8)  == ?               # your job: compare it with the line above
    """
    raise NotImplementedError("exercise 04.2: count the cached K and V widths per KV head")
