"""12.1 and 12.2, correct: one decode step's FLOPs and bytes, and the crossover batch B*.

How it differs from the reference (diffattn.pure.roofline): no kernel-call list; each variant's attention cost is a
closed form in units of h·d (query side) and h_kv·d (cache side), read off the docstring's table once: the baseline
scores and sums with h query heads (4·h·d FLOPs per cached token) and reads 2·h_kv·d values; the 2h model and V2
double the query side only; V1 costs 6·h·d FLOPs and reads 3·h_kv·d values on two calls, 8·h·d and 4·h_kv·d on four.
Every argument is validated up front by one function that collects every violation. B* is computed in exact rational
arithmetic (fractions) and rounded once, so no ceiling in the float range can overflow or round it.
"""

from __future__ import annotations

import math
from fractions import Fraction

from diffattn.pure.accounting import DecodeStep, matmul_params

# variant, kernel -> (FLOPs per cached token in units of h·d, values read per cached token in units of h_kv·d)
PER_TOKEN = {
    ("baseline", "two_call"): (4, 2), ("baseline", "four_call"): (4, 2),
    ("baseline_2h", "two_call"): (8, 2), ("baseline_2h", "four_call"): (8, 2),
    ("diff_v2", "two_call"): (8, 2), ("diff_v2", "four_call"): (8, 2),
    ("diff_v1", "two_call"): (6, 3), ("diff_v1", "four_call"): (8, 4),
}


def _positive_ints(**values):
    return [f"{name} must be an int ≥ 1 (got {value!r})" for name, value in values.items()
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1)]


def decode_step(config, variant, context, batch, bytes_per_value=2, v1_kernel="two_call"):
    problems = _positive_ints(context=context, batch=batch, bytes_per_value=bytes_per_value)
    if (variant, v1_kernel) not in PER_TOKEN:
        problems.append(f"unknown variant or V1 kernel ({variant!r}, {v1_kernel!r})")
    if problems:
        raise ValueError("; ".join(problems))
    query_units, cache_units = PER_TOKEN[variant, v1_kernel]
    hd, kvd = config.heads * config.head_dim, config.kv_heads * config.head_dim
    weights = matmul_params(config, variant)
    per_sequence_flops = 2 * weights + config.layers * context * query_units * hd
    per_sequence_bytes = config.layers * context * cache_units * kvd * bytes_per_value
    return DecodeStep(flops=per_sequence_flops * batch, bytes=weights * bytes_per_value + per_sequence_bytes * batch)


def roofline_crossover(weight_bytes, flops_per_sequence, bytes_per_sequence, peak_flops, bandwidth):
    problems = _positive_ints(weight_bytes=weight_bytes, flops_per_sequence=flops_per_sequence,
                              bytes_per_sequence=bytes_per_sequence)
    problems += [f"{name} must be a positive finite number (got {value!r})"
                 for name, value in (("peak_flops", peak_flops), ("bandwidth", bandwidth))
                 if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0)]
    if problems:
        raise ValueError("; ".join(problems))
    # compute ≥ memory  ⇔  B·(f·W − k·P) ≥ w·P: solvable for B only when f·W − k·P > 0
    excess = flops_per_sequence * Fraction(bandwidth) - bytes_per_sequence * Fraction(peak_flops)
    if excess <= 0:
        return None
    return float(weight_bytes * Fraction(peak_flops) / excess)


OVERRIDES = {"decode_step": decode_step, "roofline_crossover": roofline_crossover}
