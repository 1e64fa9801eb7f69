"""The PyTorch track (lessons 05-07): DIFF V1 and V2 attention on FlashAttention / SDPA kernels.

    functional.py   the torch mirror of diffattn.pure (same names), plus λ, per-head norm and the V2 GQA core
    kernels.py      attention(q, k, v, causal, backend): flash-attn, PyTorch SDPA, or the math path
    rope.py         interleaved rotary embedding, as in the official code
    norm.py         RMSNorm
    cache.py        KV caches for decoding: KVCache (torch.cat), StaticKVCache (preallocated, in place)
    attention.py    MultiheadAttention, DiffAttentionV1, DiffAttentionV2 (official parameter names)

Layout everywhere except the pure mirrors: (batch, seq, heads, head_dim), the flash-attn / official-code layout.
The kernel entry point is `diffattn.nn.kernels.attention`; it is not re-exported here, so that the name
`diffattn.nn.attention` keeps meaning the module file.
"""

from diffattn.nn.attention import DiffAttentionV1, DiffAttentionV2, MultiheadAttention, state_dict_variant
from diffattn.nn.cache import KVCache, StaticKVCache
from diffattn.nn.kernels import available_backends, resolve_backend
from diffattn.nn.norm import RMSNorm
from diffattn.nn.rope import apply_rope, rope_cos_sin

__all__ = [
    "DiffAttentionV1",
    "DiffAttentionV2",
    "KVCache",
    "MultiheadAttention",
    "RMSNorm",
    "StaticKVCache",
    "apply_rope",
    "available_backends",
    "resolve_backend",
    "rope_cos_sin",
    "state_dict_variant",
]
