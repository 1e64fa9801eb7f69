"""KV cache that sizes any variant it does not recognise ("diff_v3", a typo) as the baseline instead of refusing it.

The numbers for the four real variants are right; a misspelled variant silently gets the baseline's cache.
"""


def kv_cache_unknown_variant_as_baseline(variant, layers, heads, head_dim, kv_heads=None, bytes_per_value=2):
    kv_heads = heads if kv_heads is None else kv_heads
    if min(layers, heads, head_dim, kv_heads, bytes_per_value) <= 0 or heads % kv_heads:
        raise ValueError("impossible layout")
    if variant == "diff_v1":
        if heads % 2 or kv_heads % 2:
            raise ValueError("DIFF V1 needs even heads and kv_heads")
        return layers * (kv_heads // 2) * (2 * head_dim + 2 * head_dim) * bytes_per_value
    return layers * kv_heads * 2 * head_dim * bytes_per_value


OVERRIDES = {"kv_cache_bytes_per_token": kv_cache_unknown_variant_as_baseline}
LOSES = ("04.2",)
