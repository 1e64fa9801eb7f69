"""04.2 mistake (class B, lazy validation): h_kv | h is checked only for the DIFF variants, where the head pairing
needs it; the baseline cache (layers · 2 · h_kv · d · bytes) never uses h, so its layout is not checked.

kv_cache_bytes_per_token("baseline", 32, 32, 128, 5) returns a number for a GQA layout that cannot be built (5 KV
heads do not divide 32 query heads; the module docstring: a ValueError for every variant).
"""

from diffattn.pure.accounting import kv_cache_bytes_per_token as reference


def kv_cache_bytes_per_token(variant, layers, heads, head_dim, kv_heads=None, bytes_per_value=2):
    kv = heads if kv_heads is None else kv_heads
    if variant in ("baseline", "baseline_2h"):
        for name, size in (("layers", layers), ("heads", heads), ("head_dim", head_dim), ("kv_heads", kv),
                           ("bytes_per_value", bytes_per_value)):
            if size <= 0:
                raise ValueError(f"{name} must be > 0 (got {size})")
        return layers * 2 * kv * head_dim * bytes_per_value
    return reference(variant, layers, heads, head_dim, kv_heads, bytes_per_value)


OVERRIDES = {"kv_cache_bytes_per_token": kv_cache_bytes_per_token}
LOSES = ("04.2",)
