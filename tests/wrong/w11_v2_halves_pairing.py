"""11.2 mistake: pairs the first half of the query heads with the second half (`chunk(2)`) instead of neighbours
(2i, 2i+1); the trained layer subtracts neighbours, so the patched layer computes unrelated differences."""

from diffattn.core.errors import require
from diffattn.nn.kernels import attention
from diffattn.nn.rope import apply_rope


def v2_forward(attn, x, rope, gate):
    require(0.0 < gate < 1.0, f"gate must lie in (0, 1) (got {gate})")
    b, n, _ = x.shape
    h, h_kv, d = attn.num_heads, attn.num_kv_heads, attn.head_dim
    q = apply_rope(attn.q_proj(x).view(b, n, 2 * h, d), *rope)
    k = apply_rope(attn.k_proj(x).view(b, n, h_kv, d), *rope)
    first, second = attention(q, k, attn.v_proj(x).view(b, n, h_kv, d)).chunk(2, dim=2)
    return attn.o_proj((first - gate * second).reshape(b, n, h * d))


OVERRIDES = {"v2_forward": v2_forward}
LOSES = ("11.2",)
