"""V1 with a λ per head (four d-vectors for each of the h/2 differential heads); the paper shares one λ per layer."""

from diffattn.pure import accounting


def attention_params(variant, hidden, heads, head_dim, kv_heads=None):
    count = accounting.attention_params(variant, hidden, heads, head_dim, kv_heads)
    if variant == "diff_v1":
        count += 4 * head_dim * (heads // 2 - 1)  # one λ set per differential head instead of one per layer
    return count


OVERRIDES = {"attention_params": attention_params}
LOSES = ("04.1",)
