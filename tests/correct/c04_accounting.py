"""04.1 and 04.2, correct: parameters of one attention module, and KV-cache bytes per token.

How it differs from the reference (diffattn.pure.accounting): no component table; each variant is described by what
its module is built from — (query heads, query width) of W_Q, (KV heads, key width, value width) of W_K and W_V,
the input width of W_O, and its extra vectors — and the counts are products of those integers. The whole layout is
validated first by one function that collects every violated constraint (the reference stops at the first), and the
KV cache is counted from the same description as the parameters, so both exercises share one layout.
"""

from __future__ import annotations

VARIANTS = ("baseline", "baseline_2h", "diff_v1", "diff_v2")


def _is_count(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _validate(variant, heads, head_dim, kv_heads, **others):
    """h_kv (kv_heads, or heads for None) once every constraint holds; else one ValueError naming all that fail."""
    problems = []
    if variant not in VARIANTS:
        problems.append(f"variant must be one of {', '.join(VARIANTS)} (got {variant!r})")
    kv = heads if kv_heads is None else kv_heads
    sizes = {"heads": heads, "head_dim": head_dim, "kv_heads": kv, **others}
    bad = [f"{name} = {value!r}" for name, value in sizes.items() if not _is_count(value) or value <= 0]
    if bad:
        problems.append("sizes must be positive integers: " + ", ".join(bad))
    else:
        if heads % kv:
            problems.append(f"kv_heads ({kv}) must divide heads ({heads})")
        if variant == "diff_v1" and (heads % 2 or kv % 2):
            problems.append(f"DIFF V1 needs even heads and kv_heads (got {heads} and {kv})")
        if "hidden" in others and heads * head_dim != others["hidden"]:
            problems.append(f"heads × head_dim must equal hidden ({heads} × {head_dim} ≠ {others['hidden']})")
    if problems:
        raise ValueError("; ".join(problems))
    return kv


def _layout(variant, heads, head_dim, kv):
    """(q heads, q width, kv heads, key width, value width, o_proj input width) of the official module."""
    d = head_dim
    if variant == "diff_v1":  # h/2 differential heads: 2 query maps of d each; h_kv/2 KV heads of keys 2d, values 2d
        return heads // 2, 2 * d, kv // 2, 2 * d, 2 * d, (heads // 2) * 2 * d
    if variant == "diff_v2":  # 2h query heads of d over the baseline's KV heads; pairs subtracted before W_O
        return 2 * heads, d, kv, d, d, heads * d
    if variant == "baseline_2h":
        return 2 * heads, d, kv, d, d, 2 * heads * d
    return heads, d, kv, d, d, heads * d


def attention_params(variant, hidden, heads, head_dim, kv_heads=None):
    kv = _validate(variant, heads, head_dim, kv_heads, hidden=hidden)
    q_heads, q_width, kv_count, key_width, value_width, o_in = _layout(variant, heads, head_dim, kv)
    total = hidden * q_heads * q_width + hidden * kv_count * (key_width + value_width) + o_in * hidden
    if variant == "diff_v1":
        total += 4 * head_dim + 2 * head_dim  # λ_q1, λ_k1, λ_q2, λ_k2 (d each) and subln's shared (2d,) weight
    if variant == "diff_v2":
        total += hidden * heads  # W_λ: D → h
    return total


def kv_cache_bytes_per_token(variant, layers, heads, head_dim, kv_heads=None, bytes_per_value=2):
    kv = _validate(variant, heads, head_dim, kv_heads, layers=layers, bytes_per_value=bytes_per_value)
    _, _, kv_count, key_width, value_width, _ = _layout(variant, heads, head_dim, kv)
    return layers * kv_count * (key_width + value_width) * bytes_per_value


OVERRIDES = {"attention_params": attention_params, "kv_cache_bytes_per_token": kv_cache_bytes_per_token}
