"""12.2 mistake (class C, a bound checked on one side): the ceilings are checked to be > 0 (which refuses NaN too)
but not to be finite, so an infinite peak_flops or bandwidth is accepted (inf FLOP/s: "never compute-bound", None;
inf bytes/s: B* = 0.0) instead of refused."""


def roofline_crossover(weight_bytes, flops_per_sequence, bytes_per_sequence, peak_flops, bandwidth):
    for count in (weight_bytes, flops_per_sequence, bytes_per_sequence):
        if not isinstance(count, int) or count < 1:
            raise ValueError("counts must be ints ≥ 1")
    if not (peak_flops > 0 and bandwidth > 0):
        raise ValueError("ceilings must be positive")
    margin = flops_per_sequence * (bandwidth / peak_flops) - bytes_per_sequence
    return weight_bytes / margin if margin > 0 else None


OVERRIDES = {"roofline_crossover": roofline_crossover}
LOSES = ("12.2",)
