"""12.2 mistake (class B, lazy validation): weight_bytes is only needed to compute B*, so it is checked only then;
when no batch is compute-bound the function answers None for a weight_bytes of 0 or −1 instead of refusing it."""

from diffattn.pure.roofline import roofline_crossover as reference


def roofline_crossover(weight_bytes, flops_per_sequence, bytes_per_sequence, peak_flops, bandwidth):
    if reference(1, flops_per_sequence, bytes_per_sequence, peak_flops, bandwidth) is None:
        return None  # never compute-bound: the weights do not matter (checks everything but weight_bytes)
    return reference(weight_bytes, flops_per_sequence, bytes_per_sequence, peak_flops, bandwidth)


OVERRIDES = {"roofline_crossover": roofline_crossover}
LOSES = ("12.2",)
