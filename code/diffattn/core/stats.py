"""Summaries and tests, one helper each, so every table computes its spread and its intervals the same way.

    mean_std              mean and sample standard deviation over seeds (stdlib)
    t_interval            a Student-t 95% interval for the mean of a few seed-level numbers (scipy.stats.t)
    clustered_difference  mean of a − b over paired items with a bootstrap interval that resamples whole clusters
                          (scipy.stats.bootstrap): two models scored on the same queries, or a model against a null

scipy is imported inside the functions, so the stdlib track and the command line's --help never need it.
"""

from __future__ import annotations

import math
import statistics
from fractions import Fraction
from typing import Iterable, Sequence

CONFIDENCE = 0.95
RESAMPLES = 4000
BOOTSTRAP_SEED = 0  # a fixed generator: the interval of given numbers is the same on every run
DENOMINATOR = 10**6  # the largest denominator a flag or null probability is read back as (they are k/N, 10^-L, 26^-L)


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n − 1); the deviation of a single value is reported as 0.0, not an error."""
    xs = list(values)
    return statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0


def t_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> dict:
    """Mean, sample std and the t interval mean ± t_{n−1}·s/√n (None bounds for a single value)."""
    from scipy import stats

    xs = list(values)
    mean, std = mean_std(xs)
    if len(xs) < 2:
        return {"mean": mean, "std": std, "n": len(xs), "ci95": None}
    half = float(stats.t.ppf(0.5 + confidence / 2, len(xs) - 1)) * std / math.sqrt(len(xs))
    return {"mean": mean, "std": std, "n": len(xs), "ci95": [mean - half, mean + half]}


def clustered_difference(a: Sequence[float], b: Sequence[float], clusters: Sequence[int],
                         confidence: float = CONFIDENCE, resamples: int = RESAMPLES) -> dict:
    """Mean of a_i − b_i over items, and a percentile bootstrap interval that resamples clusters (examples) whole.

    a, b: one number per item (1/0 answered flags, or a null's probability of answering); clusters: the example each
    item comes from. Queries of one haystack are not independent, so resampling single queries would be too narrow.
    `above` is True when the whole interval lies above 0: a beats b with this paired test."""
    import numpy as np
    from scipy import stats

    if not (len(a) == len(b) == len(clusters)) or not a:
        raise ValueError(f"need one a, b and cluster per item (got {len(a)}, {len(b)}, {len(clusters)})")
    ids = {c: i for i, c in enumerate(dict.fromkeys(clusters))}
    # Flags and null probabilities are small fractions (k/N records, 10^-L): scaled to integers every sum below is
    # exact, whatever order numpy adds in on a given CPU, so the interval is the same number everywhere.
    fractions = [Fraction(x).limit_denominator(DENOMINATOR) - Fraction(y).limit_denominator(DENOMINATOR)
                 for x, y in zip(a, b)]
    scale = math.lcm(*(f.denominator for f in fractions))
    if scale * len(a) >= 2**52:  # too fine to scale exactly: plain floats (rounding-level differences between CPUs)
        fractions, scale = [Fraction(x) - Fraction(y) for x, y in zip(a, b)], 1
    diff, count = np.zeros(len(ids)), np.zeros(len(ids))
    for f, c in zip(fractions, clusters):
        diff[ids[c]] += float(f * scale)
        count[ids[c]] += 1
    count *= scale  # Σd / Σn over the scaled sums is the same ratio
    estimate = float(diff.sum() / count.sum())
    if len(ids) < 2 or np.allclose(diff / count, diff[0] / count[0]):  # nothing varies: the interval is the point
        low = high = estimate
    else:
        result = stats.bootstrap((diff, count), lambda d, n, axis=-1: d.sum(axis=axis) / n.sum(axis=axis),
                                 paired=True, vectorized=True, n_resamples=resamples, confidence_level=confidence,
                                 method="percentile", rng=np.random.default_rng(BOOTSTRAP_SEED))
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return {"difference": estimate, "ci95": [low, high], "above": low > 0, "below": high < 0,
            "items": len(a), "clusters": len(ids)}
