"""V2 caching 2h KV heads, as if its doubled query heads came with doubled key/value heads."""

from diffattn.pure import accounting


def kv_cache_bytes_per_token(variant, layers, heads, head_dim, kv_heads=None, bytes_per_value=2):
    count = accounting.kv_cache_bytes_per_token(variant, layers, heads, head_dim, kv_heads, bytes_per_value)
    return 2 * count if variant == "diff_v2" else count


OVERRIDES = {"kv_cache_bytes_per_token": kv_cache_bytes_per_token}
LOSES = ("04.2",)
