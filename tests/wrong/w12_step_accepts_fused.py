"""12.1 mistake (class B, a path that does not exist): v1_kernel="fused" accepted and counted the way lesson 04's
accounting counts lesson 12's fused V1 kernel (map 2 scores its keys without reading values). That kernel combines the
maps of several new queries (training, prefill); a decode step has one new query and never runs it, so the docstring
asks for "two_call" or "four_call" and a ValueError for anything else."""

from diffattn.pure.accounting import DecodeStep, decode_kv_read_bytes, kernel_calls, matmul_params, require_counts
from diffattn.pure.roofline import decode_step as reference


def decode_step(config, variant, context, batch, bytes_per_value=2, v1_kernel="two_call"):
    if v1_kernel != "fused":
        return reference(config, variant, context, batch, bytes_per_value, v1_kernel)
    require_counts(context=context, batch=batch, bytes_per_value=bytes_per_value)
    calls = kernel_calls(variant, config.heads, config.head_dim, config.kv_heads, v1_kernel)
    attention = config.layers * context * sum(2 * c.query_heads * (c.key_width + c.value_width) for c in calls)
    cache = config.layers * context * decode_kv_read_bytes(variant, config.heads, config.head_dim, config.kv_heads,
                                                           bytes_per_value, v1_kernel)
    weights = matmul_params(config, variant)
    return DecodeStep(batch * (2 * weights + attention), bytes_per_value * weights + batch * cache)


OVERRIDES = {"decode_step": decode_step}
LOSES = ("12.1",)
