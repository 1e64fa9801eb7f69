"""12.1 mistake: the embedding table counted as streamed weights (the whole parameter count, 8.03B for Llama-3.1-8B,
instead of the 7.50B matmul weights: a B* ≈ 357 comes from this). Decoding
looks up one row per sequence; it neither reads the table whole nor multiplies by it."""

from diffattn.pure.accounting import DecodeStep
from diffattn.pure.roofline import decode_step as reference


def decode_step(config, variant, context, batch, bytes_per_value=2, v1_kernel="two_call"):
    step = reference(config, variant, context, batch, bytes_per_value, v1_kernel)
    table = (config.vocab or 0) * config.hidden
    return DecodeStep(step.flops + batch * 2 * table, step.bytes + bytes_per_value * table)


OVERRIDES = {"decode_step": decode_step}
LOSES = ("12.1",)
