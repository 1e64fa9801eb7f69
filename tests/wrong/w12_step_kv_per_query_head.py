"""12.1 mistake: forgets GQA sharing. Each query head is charged its own keys and values, as if every one had a KV
head of its own: the cache reads of a GQA model come out h/h_kv times too large (right only for MHA)."""

from diffattn.pure.accounting import DecodeStep, kernel_calls, matmul_params
from diffattn.pure.roofline import decode_step as reference


def decode_step(config, variant, context, batch, bytes_per_value=2, v1_kernel="two_call"):
    flops = reference(config, variant, context, batch, bytes_per_value, v1_kernel).flops
    calls = kernel_calls(variant, config.heads, config.head_dim, config.kv_heads, v1_kernel)
    per_token = sum(call.query_heads * (call.key_width + call.value_width) for call in calls) * bytes_per_value
    weights = matmul_params(config, variant)
    return DecodeStep(flops, bytes_per_value * weights + batch * config.layers * context * per_token)


OVERRIDES = {"decode_step": decode_step}
LOSES = ("12.1",)
