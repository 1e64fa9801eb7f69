"""11.1 mistake (class D, dtype order): v1_forward rebuilds the layer with its own per-head RMSNorm written in the
activations' dtype (no float32 upcast), where the layer (and diffattn.nn.functional.rms_norm, allowed here)
computes the mean square in float32.

Identical for float32 layers (all the graded ones). For a float16 layer whose heads have entries of a few hundred,
x² passes 65504, the mean square is inf and the normalised heads are 0: the output is not what the layer computes
with λ replaced; in bfloat16 the norm loses digits.
"""

import math

import torch

from diffattn.core.errors import ConfigError
from diffattn.nn.kernels import attention
from diffattn.nn.rope import apply_rope


def v1_forward(attn, x, rope, lam):
    if not math.isfinite(lam):
        raise ConfigError(f"λ must be finite (got {lam})")
    b, n, _ = x.shape
    h, h_kv, d = attn.num_heads, attn.num_kv_heads, attn.head_dim
    q = apply_rope(attn.q_proj(x).view(b, n, 2 * h, d), *rope)
    k = apply_rope(attn.k_proj(x).view(b, n, 2 * h_kv, d), *rope)
    v = attn.v_proj(x).view(b, n, h_kv, 2 * d)
    a1 = attention(q[:, :, 0::2], k[:, :, 0::2], v, causal=True)
    a2 = attention(q[:, :, 1::2], k[:, :, 1::2], v, causal=True)
    heads = a1 - lam * a2  # (b, N, h, 2d)
    normed = heads * torch.rsqrt(heads.pow(2).mean(dim=-1, keepdim=True) + 1e-5)  # in x's dtype
    normed = normed * attn.subln.weight * (1.0 - attn.lambda_init)
    return attn.out_proj(normed.reshape(b, n, h * 2 * d))


OVERRIDES = {"v1_forward": v1_forward}
LOSES = ("11.1",)
