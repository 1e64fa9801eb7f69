"""12.2 mistake (class C, the boundary): treats f/k = P/W as compute-bound "at an infinite batch" and returns inf.
At the tie compute never reaches memory (memory always takes w/W longer), so no batch is compute-bound: None."""

import math


def roofline_crossover(weight_bytes, flops_per_sequence, bytes_per_sequence, peak_flops, bandwidth):
    for count in (weight_bytes, flops_per_sequence, bytes_per_sequence):
        if count < 1:
            raise ValueError("counts must be ≥ 1")
    for ceiling in (peak_flops, bandwidth):
        if not 0 < ceiling < float("inf"):
            raise ValueError("ceilings must be positive and finite")
    margin = flops_per_sequence * (bandwidth / peak_flops) - bytes_per_sequence
    if margin < 0:
        return None
    return weight_bytes / margin if margin > 0 else math.inf


OVERRIDES = {"roofline_crossover": roofline_crossover}
LOSES = ("12.2",)
