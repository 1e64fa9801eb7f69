"""07.1 mistake (class C, one-sided bound): query_head_groups refuses zero head counts (`if not num_q_heads or not
num_kv_heads`) but not negative ones.

query_head_groups(4, -2) returns [0, -1, -1, -2] and query_head_groups(-4, 2) returns [] instead of the docstring's
ConfigError for a count <= 0 (−4 % 2 and 4 % −2 are both 0, so the multiple check passes too).
"""

from diffattn.core.errors import ConfigError


def query_head_groups(num_q_heads, num_kv_heads):
    if not num_q_heads or not num_kv_heads:
        raise ConfigError("head counts must be non-zero")
    if num_q_heads % num_kv_heads:
        raise ConfigError(f"{num_q_heads} query heads are not a multiple of {num_kv_heads} KV heads")
    per_group = num_q_heads // num_kv_heads
    return [i // per_group for i in range(num_q_heads)]


OVERRIDES = {"query_head_groups": query_head_groups}
LOSES = ("07.1",)
