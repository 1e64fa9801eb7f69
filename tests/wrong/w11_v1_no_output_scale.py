"""11.1 mistake: recomputes the V1 layer with λ replaced but forgets the (1 − λ_init) factor after the per-head norm,
so every head comes out 1/(1 − λ_init) times too large (1.25× at depth 0, up to 5× deep in a big model)."""

import torch

from diffattn.core.errors import require
from diffattn.nn.functional import rms_norm
from diffattn.nn.kernels import attention
from diffattn.nn.rope import apply_rope


def v1_forward(attn, x, rope, lam):
    require(torch.isfinite(torch.tensor(float(lam))).item(), "λ must be finite")
    b, n, _ = x.shape
    h, h_kv, d = attn.num_heads, attn.num_kv_heads, attn.head_dim
    q = apply_rope(attn.q_proj(x).view(b, n, 2 * h, d), *rope)
    k = apply_rope(attn.k_proj(x).view(b, n, 2 * h_kv, d), *rope)
    v = attn.v_proj(x).view(b, n, h_kv, 2 * d)
    heads = attention(q[:, :, 0::2], k[:, :, 0::2], v) - lam * attention(q[:, :, 1::2], k[:, :, 1::2], v)
    return attn.out_proj(rms_norm(heads, attn.subln.weight, attn.subln.eps).flatten(2))


OVERRIDES = {"v1_forward": v1_forward}
LOSES = ("11.1",)
