"""04.1 mistake (class A, huge but valid sizes): V1's h/2 differential heads computed as `heads / 2`, a float, so
every product is float arithmetic and the count is rounded back with int() at the end.

Exact while the products stay below 2**53 (every model that exists), wrong beyond: e.g. hidden = 2·(2**30 + 1),
heads 2, head_dim 2**30 + 1 gives a count that is off in its last digits. The docstring asks for exact integers.
"""

from diffattn.pure.accounting import attention_params as reference


def attention_params(variant, hidden, heads, head_dim, kv_heads=None):
    exact = reference(variant, hidden, heads, head_dim, kv_heads)  # validation, and the other variants
    if variant != "diff_v1":
        return exact
    kv = heads if kv_heads is None else kv_heads
    pairs, kv_pairs = heads / 2, kv / 2  # float division
    q = hidden * pairs * 2 * head_dim
    kv_proj = 2 * hidden * kv_pairs * 2 * head_dim
    out = pairs * 2 * head_dim * hidden
    return int(q + kv_proj + out + 4 * head_dim + 2 * head_dim)


OVERRIDES = {"attention_params": attention_params}
LOSES = ("04.1",)
