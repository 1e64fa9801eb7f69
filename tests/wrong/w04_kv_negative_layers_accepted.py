"""04.2 mistake (class C, one-sided bound): the two sizes 04.2 adds to 04.1's layout, `layers` and
`bytes_per_value`, are refused when zero (`if not layers or not bytes_per_value`) but not when negative.

kv_cache_bytes_per_token("baseline", -32, 32, 128, 8) returns −131072 bytes instead of the docstring's ValueError
(layers >= 1, bytes_per_value >= 1); heads, head_dim and kv_heads are validated like the reference.
"""

from diffattn.pure.accounting import kv_cache_bytes_per_token as reference


def kv_cache_bytes_per_token(variant, layers, heads, head_dim, kv_heads=None, bytes_per_value=2):
    if not layers or not bytes_per_value:
        raise ValueError("layers and bytes_per_value must be non-zero")
    per_layer = reference(variant, 1, heads, head_dim, kv_heads, 1)  # validates the layout
    return layers * per_layer * bytes_per_value


OVERRIDES = {"kv_cache_bytes_per_token": kv_cache_bytes_per_token}
LOSES = ("04.2",)
