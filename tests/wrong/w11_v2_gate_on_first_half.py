"""11.2 mistake: applies the fixed coefficient to the wrong half of each pair, o[2i+1] − c·o[2i] instead of
o[2i] − c·o[2i+1]: the map that should be subtracted is kept and the kept one subtracted."""

import torch

from diffattn.core.errors import require
from diffattn.nn.kernels import attention
from diffattn.nn.rope import apply_rope


def v2_forward(attn, x, rope, gate):
    require(0.0 < gate < 1.0, f"gate must lie in (0, 1) (got {gate})")
    b, n, _ = x.shape
    h, h_kv, d = attn.num_heads, attn.num_kv_heads, attn.head_dim
    q = apply_rope(attn.q_proj(x).view(b, n, 2 * h, d), *rope)
    k = apply_rope(attn.k_proj(x).view(b, n, h_kv, d), *rope)
    o = attention(q, k, attn.v_proj(x).view(b, n, h_kv, d))
    return attn.o_proj((o[:, :, 1::2] - gate * o[:, :, 0::2]).reshape(b, n, h * d))


OVERRIDES = {"v2_forward": v2_forward}
LOSES = ("11.2",)
