"""Lesson 03: how much of an attention row lands on the one token that matters, for softmax and for DIFF.

One query, N keys, the signal at a known position s. Everything works on one row of logits z_j = q·k_j/√d:

    softmax:  w = softmax(z1)                          w_j ≥ 0, Σ_j w_j = 1
    DIFF:     w = softmax(z1) − λ·softmax(z2)          w_j can be < 0, Σ_j w_j = 1 − λ

    SNR(w)     = w_s / mean_{j≠s} |w_j|                signal weight over the typical magnitude of a noise weight
    share(w)   = w_s / Σ_j |w_j|                       fraction of the attention magnitude that sits on the signal
    cos(o, v_s), o = Σ_j w_j v_j                       how well the output points at the signal's value

The noise floor is measured with |w_j| because a signed mean is not a measurement: Σ_{j≠s} w_j = 1 − λ − w_s is fixed
by the row sum, so positive and negative noise weights would cancel in it however large they are.

The noise logits have std τ (lesson 03 keeps σ for the sigmoid of DIFF V2's coefficient σ(λ_t)).

With ρ = 1 (both maps carry the same noise) the algebra is exact, and rho1_optimal_lambda / rho1_snr_gain give the
λ that zeroes the floor and the SNR gain over softmax for any other λ.
"""

from __future__ import annotations

import math
from itertools import chain
from typing import Callable, Sequence

from diffattn.core.errors import require
from diffattn.pure.matrix import Vector, dot
from diffattn.pure.softmax import softmax


def signal_logits(eps1: Sequence[float], signal_index: int, mu: float, noise_std: float) -> Vector:
    """Map 1's logits from standard-normal draws eps1 (length N): z1_j = τ·ε1_j for j ≠ s, and z1_s = μ.

    μ is how far the signal's logit q·k_s/√d sits above the noise logits' mean; τ = noise_std is their spread. For keys unrelated
    to the query, q·k_j/√d is a sum of d products with mean 0, so a Gaussian noise logit is the natural model.
    """
    require(len(eps1) >= 2, f"need N >= 2 positions: the signal and at least one noise token (got {len(eps1)})")
    _check_index(signal_index, len(eps1))
    require(noise_std >= 0, f"noise std τ must be >= 0 (got {noise_std})")
    z1 = [noise_std * e for e in eps1]
    z1[signal_index] = mu
    return z1


def noise_logits(eps1: Sequence[float], eta: Sequence[float], noise_std: float, rho: float) -> Vector:
    """Map 2's logits: z2_j = τ·(ρ·ε1_j + √(1−ρ²)·η_j) at every j, signal position included (τ = noise_std).

    Map 2 never sees the signal; its noise has correlation ρ with map 1's (ρ = 1: the same noise, ρ = 0: independent
    noise of the same size). Reusing one eps1, eta across μ, τ and ρ gives common random numbers.
    """
    require(len(eps1) == len(eta), f"eps1 and eta must have the same length (got {len(eps1)} and {len(eta)})")
    require(noise_std >= 0, f"noise std τ must be >= 0 (got {noise_std})")
    require(-1.0 <= rho <= 1.0, f"noise correlation ρ must be in [-1, 1] (got {rho})")
    independent = math.sqrt(1.0 - rho * rho)
    return [noise_std * (rho * e + independent * h) for e, h in zip(eps1, eta)]


def subtract_maps(a1: Sequence[float], a2: Sequence[float], lam: float) -> Vector:
    """A1 − λ·A2 for one row of two already-normalised maps: lesson 02's diff_weights_v1 after its two softmaxes.

    With a1 = softmax(z1) and a2 = softmax(z2) this is the DIFF row; taking the maps (not the logits) lets a sweep
    over λ or ρ reuse a softmax instead of recomputing it.
    """
    require(len(a1) == len(a2), f"both maps must have the same length (got {len(a1)} and {len(a2)})")
    require(math.isfinite(lam), f"λ must be a finite number (got {lam})")
    return [x - lam * y for x, y in zip(a1, a2)]


def signal_to_noise(weights: Sequence[float], signal_index: int) -> float:
    """SNR = w_s / mean_{j≠s} |w_j| for one attention row (N >= 2 weights, any signs).

    The numerator keeps its sign (a negative w_s puts −v_s into the output); the denominator is the mean magnitude
    of the N − 1 noise weights. Returns ±inf when every noise weight is exactly 0; raises ConfigError when all are.
    """
    require(len(weights) >= 2, f"SNR needs the signal and at least one other position (got N = {len(weights)})")
    _check_index(signal_index, len(weights))
    # Every weight is scaled by the same power of two 2^−e, e the exponent of the largest |w|: exact, and Σ|w_j| of
    # weights near 1.8e308 no longer overflows (nor does fsum's intermediate sum); the ratio is unchanged.
    exponent = math.frexp(max(map(abs, weights)))[1]
    scaled = [math.ldexp(w, -exponent) for w in weights]
    signal = scaled[signal_index]
    # Σ_{j≠s} |w_j| as one exactly rounded fsum (adding −|w_s| inside it): a row whose noise cancels is exactly 0
    noise = math.fsum(chain(map(abs, scaled), (-abs(signal),))) / (len(weights) - 1)
    if noise == 0.0:
        require(signal != 0.0, "all weights are zero: SNR is undefined")
        return math.copysign(math.inf, signal)
    return signal / noise


def signal_share(weights: Sequence[float], signal_index: int) -> float:
    """w_s / Σ_j |w_j| ∈ [−1, 1]: equals a_s for softmax; negative means the signal enters with the wrong sign."""
    _check_index(signal_index, len(weights))
    total = math.fsum(map(abs, weights))
    require(total > 0.0, "all weights are zero: the signal share is undefined")
    return weights[signal_index] / total


def output_cosine(weights: Sequence[float], values: Sequence[Sequence[float]], signal_index: int) -> float:
    """cos(o, v_s) with o = Σ_j w_j v_j; `values` is (N, d_v). Scale-free, so DIFF's row sum 1 − λ does not matter."""
    require(len(values) == len(weights), f"need one value row per weight (got {len(values)} and {len(weights)})")
    _check_index(signal_index, len(weights))
    d_v = len(values[signal_index])
    require(all(len(row) == d_v for row in values), "every value row must have the same width d_v")
    columns = list(zip(*values))  # (d_v, N): one dot product per output coordinate
    out = [dot(weights, column) for column in columns]
    target = values[signal_index]
    norms = math.sqrt(dot(out, out) * dot(target, target))
    require(norms > 0.0, "the output or the signal value is the zero vector: cosine is undefined")
    return dot(out, target) / norms


def noise_crossover(
    noise_levels: Sequence[float], measure: Callable[[float], float], threshold: float = 0.5
) -> float | None:
    """The noise level where `measure` first drops below `threshold`, linearly interpolated; None if it never does.

    `noise_levels` must be strictly increasing (checked for the whole grid before `measure` first runs). `measure` is
    evaluated in order and only until the crossing. If the first level is already below the threshold, that level is
    returned.
    """
    require(len(noise_levels) >= 1, "need at least one noise level")
    require(all(a < b for a, b in zip(noise_levels, noise_levels[1:])), "noise levels must be strictly increasing")
    previous_level = previous_value = None
    for level in noise_levels:
        value = measure(level)
        if value < threshold:
            if previous_level is None:
                return level
            return _line_meets(previous_level, previous_value, level, value, threshold)
        previous_level, previous_value = level, value
    return None


def _line_meets(x0: float, y0: float, x1: float, y1: float, threshold: float) -> float:
    """Where the straight line through (x0, y0) and (x1, y1), y0 ≥ threshold > y1, meets the threshold:
    x0 + (x1 − x0)·(y0 − threshold)/(y0 − y1). For differences that overflow (levels or values near ±1.8e308) the
    same line from halved operands: the fraction is unchanged and x0 + f·(x1 − x0) = x0 + f·h + f·h, h = x1/2 − x0/2."""
    rise, run = y0 - y1, x1 - x0  # 0 ≤ y0 − threshold ≤ rise: when rise is finite, so is y0 − threshold
    if math.isfinite(rise) and math.isfinite(run):
        return x0 + run * (y0 - threshold) / rise
    fraction = (y0 / 2 - threshold / 2) / (y0 / 2 - y1 / 2)
    half = fraction * (x1 / 2 - x0 / 2)
    return x0 + half + half


def lambda_sweep(z1: Sequence[float], z2: Sequence[float], signal_index: int, lambdas: Sequence[float]) -> list[float]:
    """signal_to_noise(softmax(z1) − λ·softmax(z2)) for each λ; each softmax is computed once."""
    require(len(z1) == len(z2), f"both logit rows must have the same length (got {len(z1)} and {len(z2)})")
    a1, a2 = softmax(z1), softmax(z2)
    return [signal_to_noise(subtract_maps(a1, a2, lam), signal_index) for lam in lambdas]


def rho1_optimal_lambda(a1: Sequence[float], a2: Sequence[float], signal_index: int) -> float:
    """λ* = (1 − a1_s)/(1 − a2_s): the λ at which A1 − λA2 has no noise at all when ρ = 1.

    With ρ = 1 both maps give noise token j the same e^{τε_j}, so a1_j = e^{τε_j}/Z1 and a2_j = e^{τε_j}/Z2 with the
    same noise sum Z' = Σ_{j≠s} e^{τε_j} = (1 − a1_s)·Z1 = (1 − a2_s)·Z2. Every noise weight is then
    a1_j − λ·a2_j = a1_j·(1 − λ/λ*), and λ* = Z2/Z1 is the fraction of map 1's mass that the noise holds, up to a2_s.
    """
    return (1.0 - a1[signal_index]) / (1.0 - a2[signal_index])


def rho1_snr_gain(a1: Sequence[float], a2: Sequence[float], signal_index: int, lam: float) -> float:
    """SNR(A1 − λA2) / SNR(A1) when ρ = 1: (1 − λ·a2_s/a1_s) / |1 − λ/λ*|.

    The noise floor shrinks by |1 − λ/λ*| (see rho1_optimal_lambda) and the signal by 1 − λ·a2_s/a1_s. When the floor
    holds nearly all of map 1 (a1_s, a2_s → 0, so λ* → 1) the gain tends to 1/(1 − λ): 5 at λ = 0.8.
    """
    floor_factor = abs(1.0 - lam / rho1_optimal_lambda(a1, a2, signal_index))  # |1 − λ/λ*|
    return (1.0 - lam * a2[signal_index] / a1[signal_index]) / floor_factor


def best_lambda(lambdas: Sequence[float], snrs: Sequence[float]) -> float:
    """The λ whose SNR is largest (the first one on ties)."""
    require(len(lambdas) == len(snrs) >= 1, f"need one SNR per λ (got {len(lambdas)} λ and {len(snrs)} SNRs)")
    best = max(range(len(snrs)), key=lambda i: snrs[i])  # max returns the first maximal index
    return lambdas[best]


def _check_index(index: int, n: int) -> None:
    require(0 <= index < n, f"signal index must be in [0, {n}) (got {index})")
