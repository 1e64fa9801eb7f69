"""Summaries over seeds: one helper, so every table computes its spread the same way."""

from __future__ import annotations

import statistics
from typing import Iterable


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n − 1); the deviation of a single value is reported as 0.0, not an error."""
    xs = list(values)
    return statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0
