"""12.2 mistake (class A, extreme but valid ceilings): the textbook form B* = (w/W) / (f/P − k/W), which the
reference itself used before exercise 12.2 existed. Right for ordinary machines, but w/W and f/P overflow to inf
once the ceilings are scaled down (the H200's × 2^-1040): it answers NaN where B* is the same as unscaled."""

import math


def roofline_crossover(weight_bytes, flops_per_sequence, bytes_per_sequence, peak_flops, bandwidth):
    for count in (weight_bytes, flops_per_sequence, bytes_per_sequence):
        if not isinstance(count, int) or count < 1:
            raise ValueError("counts must be ints ≥ 1")
    for ceiling in (peak_flops, bandwidth):
        if not (math.isfinite(ceiling) and ceiling > 0):
            raise ValueError("ceilings must be positive and finite")
    margin = flops_per_sequence / peak_flops - bytes_per_sequence / bandwidth
    return weight_bytes / bandwidth / margin if margin > 0 else None


OVERRIDES = {"roofline_crossover": roofline_crossover}
LOSES = ("12.2",)
