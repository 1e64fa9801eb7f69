"""12.2 mistake: solves B·f/P = (w + B·k)/W and returns the root whatever its sign. When a sequence's intensity f/k
is below the ridge point P/W the root is negative: no batch is compute-bound, and the answer is None."""


def roofline_crossover(weight_bytes, flops_per_sequence, bytes_per_sequence, peak_flops, bandwidth):
    for count in (weight_bytes, flops_per_sequence, bytes_per_sequence):
        if count < 1:
            raise ValueError("counts must be ≥ 1")
    for ceiling in (peak_flops, bandwidth):
        if not 0 < ceiling < float("inf"):
            raise ValueError("ceilings must be positive and finite")
    margin = flops_per_sequence * (bandwidth / peak_flops) - bytes_per_sequence
    return weight_bytes / margin if margin != 0 else None


OVERRIDES = {"roofline_crossover": roofline_crossover}
LOSES = ("12.2",)
