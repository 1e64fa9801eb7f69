"""12.1 mistake: the weights always counted at 2 bytes (bf16) and only the cache at bytes_per_value, although the
docstring makes bytes_per_value the width of every weight and cached value alike."""

from diffattn.pure.accounting import DecodeStep, matmul_params
from diffattn.pure.roofline import decode_step as reference


def decode_step(config, variant, context, batch, bytes_per_value=2, v1_kernel="two_call"):
    step = reference(config, variant, context, batch, bytes_per_value, v1_kernel)
    return DecodeStep(step.flops, step.bytes + (2 - bytes_per_value) * matmul_params(config, variant))


OVERRIDES = {"decode_step": decode_step}
LOSES = ("12.1",)
