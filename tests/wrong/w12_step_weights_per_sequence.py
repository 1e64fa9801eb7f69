"""12.1 mistake: every sequence of the batch reads the weights again. A step streams the weights once for the whole
batch (that is what batching buys); this counts batch × (weights + cache), so the bytes grow as fast as the FLOPs
and no batch would ever turn compute-bound."""

from diffattn.pure.accounting import DecodeStep
from diffattn.pure.roofline import decode_step as reference


def decode_step(config, variant, context, batch, bytes_per_value=2, v1_kernel="two_call"):
    one = reference(config, variant, context, 1, bytes_per_value, v1_kernel)
    return DecodeStep(batch * one.flops, batch * one.bytes)


OVERRIDES = {"decode_step": decode_step}
LOSES = ("12.1",)
