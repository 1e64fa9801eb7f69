"""12.2 mistake (class A, extreme but valid ceilings): clears the fractions, B* = w·P / (f·W − k·P). Right for
ordinary machines, but f·W and k·P overflow to inf once the ceilings are scaled up (the H200's × 2^960), and
inf − inf is NaN: it answers None where B* is the same as unscaled."""

import math


def roofline_crossover(weight_bytes, flops_per_sequence, bytes_per_sequence, peak_flops, bandwidth):
    for count in (weight_bytes, flops_per_sequence, bytes_per_sequence):
        if not isinstance(count, int) or count < 1:
            raise ValueError("counts must be ints ≥ 1")
    for ceiling in (peak_flops, bandwidth):
        if not (math.isfinite(ceiling) and ceiling > 0):
            raise ValueError("ceilings must be positive and finite")
    excess = flops_per_sequence * bandwidth - bytes_per_sequence * peak_flops
    return weight_bytes * peak_flops / excess if excess > 0 else None


OVERRIDES = {"roofline_crossover": roofline_crossover}
LOSES = ("12.2",)
