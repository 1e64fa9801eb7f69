"""Lesson 01: a numerically stable softmax.

softmax(z)_i = exp(z_i) / Σ_j exp(z_j) = exp(z_i − m) / Σ_j exp(z_j − m)   for any constant m.

Choosing m = max_j z_j makes every exponent ≤ 0, so nothing overflows, and makes the largest term exactly 1, so the sum
is ≥ 1 and never underflows to zero. Masked positions carry −inf and get weight exactly 0. Any other constant keeps
the identity but not these guarantees: m = min_j z_j, for instance, overflows once the logits spread by more than ~710.
"""

from __future__ import annotations

import math
from typing import Sequence

from diffattn.core.errors import require
from diffattn.pure.matrix import Vector


def softmax(logits: Sequence[float]) -> Vector:
    """Stable softmax of one row of logits; `-inf` entries (masked positions) get weight exactly 0.

    Raises ConfigError (a ValueError) for an empty row, a row that is entirely masked, or a NaN / +inf logit.

    >>> [round(w, 4) for w in softmax([1000.0, 1000.0, float("-inf")])]
    [0.5, 0.5, 0.0]
    """
    require(len(logits) > 0, "softmax needs at least one logit")
    finite_or_masked = all(z == -math.inf or math.isfinite(z) for z in logits)
    require(finite_or_masked, "logits must be finite or -inf (masked): got NaN or +inf")
    m = max(logits)
    require(m > -math.inf, "softmax of a row that is entirely masked (-inf) is undefined")
    exps = [math.exp(z - m) for z in logits]  # every exponent ≤ 0: no overflow; the max term is exactly 1
    total = math.fsum(exps)  # fsum: the sum of 131,072 tiny weights is correctly rounded, not drifted by n·ε
    return [e / total for e in exps]
