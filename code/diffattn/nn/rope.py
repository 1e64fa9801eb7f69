"""Rotary position embedding (RoPE), interleaved pairing: the official DIFF code's rotary.

Head dims (2i, 2i+1) form one 2-D point that rotates by the angle p·θ_i at position p, θ_i = base^(−2i/d):

    out[2i]   = x[2i]·cos(p·θ_i) − x[2i+1]·sin(p·θ_i)
    out[2i+1] = x[2i+1]·cos(p·θ_i) + x[2i]·sin(p·θ_i)

This is the GPT-J pairing that Tri Dao's `apply_rotary_emb(x, cos, sin, interleaved=True)` computes in the official
`multihead_flashdiff_*.py`. The "rotate-half" pairing (dims i and i + d/2, Llama / HF) is the same idea with the
channels permuted, so weights trained with one do not load into the other. q·k after rotation depends only on the
offset between the two positions, which is why a decoder can rotate each key once and cache it.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from diffattn.core.errors import ConfigError


def rope_cos_sin(
    positions: Tensor | Sequence[int] | tuple[int, int],
    head_dim: int,
    base: float = 10000.0,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """cos and sin of p·θ_i for every position p and pair i, each (N, head_dim / 2).

    `positions` is a 1-D tensor, list or range of token positions, or a tuple `(start, length)` meaning
    start, start + 1, ..., start + length − 1 (a decoder passes `(len(cache), n_new)`). Angles are computed in fp64
    and rounded once to `dtype`, so late positions lose no precision to the product p·θ_i.
    """
    # once per forward pass: plain comparisons, a message only on failure
    if head_dim <= 0 or head_dim % 2:
        raise ConfigError(f"RoPE needs an even head_dim (got {head_dim})")
    if isinstance(positions, tuple):
        if len(positions) != 2:
            raise ConfigError(f"a tuple of positions means (start, length), got {len(positions)} numbers")
        start, length = positions
        if start < 0 or length < 0:
            raise ConfigError(f"(start, length) must be >= 0 (got {positions})")
        positions = range(start, start + length)
    pos = torch.as_tensor(positions, dtype=torch.float64, device=device)
    if pos.dim() != 1:
        raise ConfigError(f"positions must be 1-D (got shape {tuple(pos.shape)})")
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim)  # θ_i, (d/2,)
    angles = pos[:, None] * inv_freq[None, :]  # (N, d/2)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate x (b, N, heads, d) by position, interleaved pairs; cos/sin (N, d/2) from `rope_cos_sin`."""
    n, d = x.shape[1], x.shape[-1]
    if d % 2:  # every forward, twice per layer: a message is built only on failure
        raise ConfigError(f"RoPE needs an even head_dim (got {d})")
    if not tuple(cos.shape) == tuple(sin.shape) == (n, d // 2):
        raise ConfigError(f"cos/sin must be (seq, head_dim/2) = {(n, d // 2)}, got {tuple(cos.shape)} and "
                          f"{tuple(sin.shape)}")
    dtype = torch.promote_types(x.dtype, torch.float32)  # rotate in fp32 at least, like the triton kernel
    pairs = x.to(dtype).unflatten(-1, (d // 2, 2))  # (b, N, heads, d/2, 2): pair i is (x[2i], x[2i+1])
    even, odd = pairs[..., 0], pairs[..., 1]
    c, s = cos.to(dtype)[:, None, :], sin.to(dtype)[:, None, :]  # (N, 1, d/2), broadcast over heads
    # The rotation in real arithmetic (the docstring's two lines), not as a complex product: Inductor generates no
    # code for complex operators and would run them eagerly inside every compiled layer, forward and backward.
    return torch.stack((even * c - odd * s, odd * c + even * s), dim=-1).flatten(-2).to(x.dtype)
