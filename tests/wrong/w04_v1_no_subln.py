"""V1 without the learnable RMSNorm(2d) weight (the pre-PR #1644 elementwise_affine=False module)."""

from diffattn.pure import accounting


def attention_params(variant, hidden, heads, head_dim, kv_heads=None):
    count = accounting.attention_params(variant, hidden, heads, head_dim, kv_heads)
    if variant == "diff_v1":
        count -= 2 * head_dim  # subln weight left out
    return count


OVERRIDES = {"attention_params": attention_params}
LOSES = ("04.1",)
