"""12.2 mistake: returns the first compute-bound batch, max(1, ceil(B*)), instead of B* itself (the docstring asks
for the real crossing; the first batch is what a caller derives from it)."""

import math

from diffattn.pure.roofline import roofline_crossover as reference


def roofline_crossover(weight_bytes, flops_per_sequence, bytes_per_sequence, peak_flops, bandwidth):
    b_star = reference(weight_bytes, flops_per_sequence, bytes_per_sequence, peak_flops, bandwidth)
    return None if b_star is None else float(max(1, math.ceil(b_star)))


OVERRIDES = {"roofline_crossover": roofline_crossover}
LOSES = ("12.2",)
