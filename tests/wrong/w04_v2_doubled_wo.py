"""A common picture of V2: W_O widened to 2h·d → D as in a 2h-head Transformer (the official o_proj reads h·d)."""

from diffattn.pure import accounting


def attention_params(variant, hidden, heads, head_dim, kv_heads=None):
    count = accounting.attention_params(variant, hidden, heads, head_dim, kv_heads)
    if variant == "diff_v2":
        count += heads * head_dim * hidden  # the second half of a doubled W_O
    return count


OVERRIDES = {"attention_params": attention_params}
LOSES = ("04.1",)
