"""12.1 mistake (class C, a bound checked on one side): refuses a context, batch or bytes_per_value of 0 (`if not
context: raise`) but counts negative ones, returning negative FLOPs and bytes."""

from diffattn.pure.accounting import DecodeStep, decode_kv_read_bytes, matmul_params
from diffattn.pure.roofline import attention_decode_flops


def decode_step(config, variant, context, batch, bytes_per_value=2, v1_kernel="two_call"):
    if not context or not batch or not bytes_per_value:
        raise ValueError("context, batch and bytes_per_value must not be 0")
    heads, head_dim, kv_heads = config.heads, config.head_dim, config.kv_heads
    attention = attention_decode_flops(variant, heads, head_dim, 1, kv_heads, v1_kernel) * context
    reads = decode_kv_read_bytes(variant, heads, head_dim, kv_heads, 1, v1_kernel) * bytes_per_value
    weights = matmul_params(config, variant)
    return DecodeStep(batch * (2 * weights + config.layers * attention),
                      bytes_per_value * weights + batch * config.layers * context * reads)


OVERRIDES = {"decode_step": decode_step}
LOSES = ("12.1",)
