"""A common claim, V1 "halves the value cache per head": V1 values cached d wide instead of 2d."""

from diffattn.pure import accounting


def kv_cache_bytes_per_token(variant, layers, heads, head_dim, kv_heads=None, bytes_per_value=2):
    count = accounting.kv_cache_bytes_per_token(variant, layers, heads, head_dim, kv_heads, bytes_per_value)
    if variant == "diff_v1":
        count = count * 3 // 4  # keys 2d + values d instead of keys 2d + values 2d, per V1 KV head
    return count


OVERRIDES = {"kv_cache_bytes_per_token": kv_cache_bytes_per_token}
LOSES = ("04.2",)
