"""Exercises 03.1–03.3 · measuring the noise floor.  Lesson: lessons/03-snr-experiments.md

Grade them with `make grade EX=ex03` (`make grade` grades every exercise).

Plain Python only (no numpy). You may import `math`, `diffattn.pure.softmax.softmax` and `diffattn.core.errors.require`;
do not import `diffattn.pure.snr` (that grades the reference, not you). 03.3's lambda_sweep may call your own
signal_to_noise from 03.1, so do 03.1 first. Tolerances: the grader compares floats at relative 1e-9 (exact formulas,
float64) unless a test says otherwise.
"""

from __future__ import annotations

from typing import Callable, Sequence


def signal_to_noise(weights: Sequence[float], signal_index: int) -> float:
    """Exercise 03.1: SNR = w_s / mean_{j≠s} |w_j| for one attention row.

    Args:
        weights: one row of N >= 2 attention weights, any signs (a DIFF row softmax(z1) − λ·softmax(z2) has negative
            entries and sums to 1 − λ).
        signal_index: s, the position of the signal, 0 <= s < N.
    Returns:
        w_s divided by the mean magnitude of the N − 1 *other* weights. Keep the numerator's sign. The denominator
        uses |w_j| because the signed mean of a DIFF row's noise weights is pinned by the row sum to
        (1 − λ − w_s)/(N − 1): it stays small however large the individual noise weights are. Do not include the
        signal's own weight in the mean. If every other weight is exactly 0, return math.inf (−math.inf if w_s < 0);
        if w_s is 0 as well, the SNR (0/0) is undefined: raise ValueError.
    Raises:
        ValueError (diffattn.core.errors.ConfigError is one) if N < 2, s is not a position of the row (no wrap-around:
        s = −1 is an error), or every weight is 0.

    Example (noise weights 0.25, −0.25, 0: mean magnitude 0.5/3):
        >>> signal_to_noise([0.5, 0.25, -0.25, 0.0], 0)
        3.0
    """
    raise NotImplementedError("exercise 03.1: signal_to_noise")


def noise_crossover(
    noise_levels: Sequence[float], measure: Callable[[float], float], threshold: float = 0.5
) -> float | None:
    """Exercise 03.2: the noise level at which `measure` first drops below `threshold`, linearly interpolated.

    Args:
        noise_levels: a strictly increasing grid σ_0 < σ_1 < … (at least one level).
        measure: a callable σ ↦ value, e.g. the mean signal share of attention at noise σ. Call it on the levels in
            order, and stop calling it once you have found the crossing (in the lesson each call can be a whole
            experiment).
        threshold: the level that counts as "unusable" once the measure is strictly below it.
    Returns:
        - None if the measure never drops below the threshold on the grid;
        - σ_0 if it is already below at the first level;
        - otherwise, with σ_i the first level where measure(σ_i) < threshold, the point where the straight line
          through (σ_{i−1}, m_{i−1}) and (σ_i, m_i) meets the threshold:
              σ_{i−1} + (σ_i − σ_{i−1}) · (m_{i−1} − threshold) / (m_{i−1} − m_i).
        If the measure comes back up later, only the first crossing counts.
    Raises:
        ValueError if the grid is empty or not strictly increasing: check the whole grid before the first call to
        `measure` (a bad level after the crossing is still a bad grid).

    Example (1 − σ/4 is 0.5 at σ = 2 and 0.375 at σ = 2.5; it meets 0.4 at σ = 2.4):
        >>> noise_crossover([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0], lambda s: 1 - s / 4, threshold=0.4)
        2.4
    """
    raise NotImplementedError("exercise 03.2: noise_crossover")


def lambda_sweep(z1: Sequence[float], z2: Sequence[float], signal_index: int, lambdas: Sequence[float]) -> list[float]:
    """Exercise 03.3 (part 1): the SNR of the DIFF row softmax(z1) − λ·softmax(z2) for each λ.

    Args:
        z1, z2: the two maps' logits for one query, both of length N.
        signal_index: s, the signal's position.
        lambdas: the λ values to try, e.g. [0.0, 0.05, …, 1.0].
    Returns:
        [signal_to_noise(softmax(z1) − λ·softmax(z2), s) for λ in lambdas]. Softmax each map first, then subtract
        (differential attention subtracts two normalised maps; softmax(z1 − λ·z2) is a different, wrong thing). Each
        softmax needs computing only once for the whole sweep. λ = 0 gives softmax's own SNR.
    Raises:
        ValueError if z1 and z2 have different lengths.

    Example (two keys, signal at 0; z2 = [0, 0] gives the map [0.5, 0.5]; with λ = 0.5 the DIFF row is
    [e/(e+1) − 0.25, 1/(e+1) − 0.25] ≈ [0.481, 0.019]):
        >>> [round(x, 1) for x in lambda_sweep([1.0, 0.0], [0.0, 0.0], 0, [0.0, 0.5])]
        [2.7, 25.4]
    """
    raise NotImplementedError("exercise 03.3: lambda_sweep")


def best_lambda(lambdas: Sequence[float], snrs: Sequence[float]) -> float:
    """Exercise 03.3 (part 2): the λ whose SNR is largest.

    Args:
        lambdas: the λ grid; snrs: one SNR per λ (same length, at least one).
    Returns:
        The λ value (not its index) with the largest SNR; on ties, the first such λ.
    Raises:
        ValueError if the lengths differ or the lists are empty.

    Example:
        >>> best_lambda([0.1, 0.3, 0.5, 0.7], [2.0, 9.0, 4.0, 1.0])
        0.3
    """
    raise NotImplementedError("exercise 03.3: best_lambda")
