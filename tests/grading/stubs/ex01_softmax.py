"""Exercise 01.1 · stable softmax (lesson 01: lessons/01-softmax-noise-floor.md).

Grade it with `make grade EX=ex01` (`make grade` grades every exercise). Use only the standard library (`math`);
do not import diffattn: the point is to write the function the rest of the course stands on.
"""

from __future__ import annotations

import math  # noqa: F401  (you will need math.exp, math.inf, math.isfinite, math.fsum)
from typing import Sequence


def softmax(logits: Sequence[float]) -> list[float]:
    """Numerically stable softmax of one row of logits.

    Input:  `logits`, a sequence of N >= 1 floats z_0 … z_{N−1}. An entry may be `-math.inf`: a masked position.
    Output: a new list of N floats w with w_i = exp(z_i − m) / Σ_j exp(z_j − m), where m = max_j z_j.
            Every w_i is in [0, 1] and Σ_i w_i = 1 within 1e-12. A masked (−inf) entry gets exactly 0.0.
    Stability: subtract the maximum before exponentiating. Logits like [1000, 999, 998] or [−1000, −1001] must work;
            `math.exp(z)` alone raises OverflowError above z ≈ 709.78 and returns 0.0 below z ≈ −745.
    Errors: raise ValueError (any subclass is fine) for an empty row, a row whose entries are all −inf (there is no
            distribution to return), or a NaN or +inf entry.
    Tolerance: the grader compares against exact values with absolute tolerance 1e-12.

    Example:
    >>> [round(w, 4) for w in softmax([1000.0, 999.0, 998.0, -math.inf])]
    [0.6652, 0.2447, 0.09, 0.0]
    """
    raise NotImplementedError("exercise 01.1: write the stable softmax (see the docstring)")
