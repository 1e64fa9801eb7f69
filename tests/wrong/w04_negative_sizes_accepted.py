"""04.1 mistake: only checks the layout's arithmetic (h·d = D, h_kv | h), so negative sizes that satisfy it count."""

from diffattn.pure.accounting import attention_params as reference


def attention_params(variant, hidden, heads, head_dim, kv_heads=None):
    kv = heads if kv_heads is None else kv_heads
    if heads < 0 and heads * head_dim == hidden and kv != 0 and heads % kv == 0:
        return reference(variant, -hidden, -heads, head_dim, -kv)  # the count of the mirrored, valid layout
    return reference(variant, hidden, heads, head_dim, kv_heads)


OVERRIDES = {"attention_params": attention_params}
LOSES = ("04.1",)
