"""03.1–03.3, correct: SNR of one attention row, the noise crossover, the λ sweep and its best λ.

How it differs from the reference (diffattn.pure.snr):
  signal_to_noise  rescales the row by a power of two first (exact), so Σ|w_j| neither overflows (weights near
                   1e308, where the reference's fsum raises OverflowError) nor loses digits to subnormals, and
                   computes w_s·(N − 1)/Σ_{j≠s}|w_j| over the noise positions only (no fsum of all minus |w_s|).
  noise_crossover  validates the whole grid before the first measurement, and evaluates the interpolation with an
                   overflow-safe fallback (halved differences, a convex combination of the two levels) when the
                   docstring's differences overflow; on ordinary inputs it is the docstring's formula.
  lambda_sweep     uses this module's signal_to_noise and tests/correct/c01_softmax.py's softmax, checks the signal
                   position (and that each λ is finite) before the sweep, even for an empty λ list.
  best_lambda      a min over (−snr, index) keys; NaN SNRs never win (all NaN is a ValueError).
"""

from __future__ import annotations

import math

from tests.correct.c01_softmax import softmax


def _position(signal_index, n):
    if n < 2:
        raise ValueError(f"an SNR needs the signal and at least one other weight (got N = {n})")
    if isinstance(signal_index, bool) or not isinstance(signal_index, int) or not 0 <= signal_index < n:
        raise ValueError(f"signal_index must be a position 0 <= s < {n} (got {signal_index!r})")


def signal_to_noise(weights, signal_index):
    row = list(weights)
    _position(signal_index, len(row))
    largest = max(abs(w) for w in row)
    shift = -math.frexp(largest)[1] if largest > 0 and math.isfinite(largest) else 0
    scaled = [math.ldexp(w, shift) for w in row]  # × 2^shift: exact, every |entry| < 1 afterwards
    signal = scaled[signal_index]
    floor = math.fsum(abs(w) for j, w in enumerate(scaled) if j != signal_index)
    if floor == 0.0:
        if signal == 0.0:
            raise ValueError("every weight is 0: the SNR 0/0 is undefined")
        return math.inf if signal > 0 else -math.inf
    return signal * (len(row) - 1) / floor


def _crossing(level_before, level, before, after, threshold):
    """Where the line through (level_before, before) and (level, after) meets threshold; before >= threshold > after."""
    drop = before - after
    if math.isfinite(drop):
        fraction = (before - threshold) / drop
    else:  # the differences overflow: halve everything first (before/2 − after/2 is finite)
        fraction = (before / 2 - threshold / 2) / (before / 2 - after / 2)
    width = level - level_before
    if math.isfinite(width):
        return level_before + width * fraction
    return level_before * (1.0 - fraction) + level * fraction


def noise_crossover(noise_levels, measure, threshold=0.5):
    levels = list(noise_levels)
    if not levels:
        raise ValueError("noise_crossover needs at least one noise level")
    for i in range(1, len(levels)):
        if not levels[i - 1] < levels[i]:
            raise ValueError(f"noise levels must be strictly increasing: level {i - 1} is {levels[i - 1]!r}, "
                             f"level {i} is {levels[i]!r}")
    previous = None
    for level in levels:
        value = measure(level)
        if value < threshold:
            if previous is None:
                return level
            return _crossing(previous[0], level, previous[1], value, threshold)
        previous = (level, value)
    return None


def lambda_sweep(z1, z2, signal_index, lambdas):
    first, second = list(z1), list(z2)
    if len(first) != len(second):
        raise ValueError(f"z1 and z2 must have the same length (got {len(first)} and {len(second)})")
    grid = list(lambdas)
    for lam in grid:
        if not math.isfinite(lam):
            raise ValueError(f"every λ must be finite (got {lam!r})")
    _position(signal_index, len(first))
    a1, a2 = softmax(first), softmax(second)
    return [signal_to_noise([x - lam * y for x, y in zip(a1, a2)], signal_index) for lam in grid]


def best_lambda(lambdas, snrs):
    grid, measured = list(lambdas), list(snrs)
    if not grid or len(grid) != len(measured):
        raise ValueError(f"need one SNR per λ and at least one (got {len(grid)} λ and {len(measured)} SNRs)")
    candidates = [i for i, s in enumerate(measured) if s == s]
    if not candidates:
        raise ValueError("every SNR is NaN: no λ can be chosen")
    return grid[min(candidates, key=lambda i: (-measured[i], i))]


OVERRIDES = {
    "signal_to_noise": signal_to_noise,
    "noise_crossover": noise_crossover,
    "lambda_sweep": lambda_sweep,
    "best_lambda": best_lambda,
}
