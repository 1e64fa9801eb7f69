"""12.1 mistake: the decode step's attention FLOPs counted with the prefill convention (lesson 04's
attention_flops_per_token: a query sees context/2 keys on average), so the causal half is taken off a step whose new
token sees every cached key: the attention FLOPs come out halved."""

from diffattn.pure.accounting import DecodeStep, attention_flops_per_token, matmul_params
from diffattn.pure.roofline import decode_step as reference


def decode_step(config, variant, context, batch, bytes_per_value=2, v1_kernel="two_call"):
    moved = reference(config, variant, context, batch, bytes_per_value, v1_kernel).bytes
    attention = attention_flops_per_token(variant, config.heads, config.head_dim, context, config.kv_heads, v1_kernel)
    return DecodeStep(batch * (2 * matmul_params(config, variant) + config.layers * attention), moved)


OVERRIDES = {"decode_step": decode_step}
LOSES = ("12.1",)
