"""Lesson 01: a numerically stable softmax.

softmax(z)_i = exp(z_i) / Σ_j exp(z_j) = exp(z_i − m) / Σ_j exp(z_j − m)   for any constant m.

Choosing m = max_j z_j makes every exponent ≤ 0, so nothing overflows and the largest term is exactly 1, so the sum is
≥ 1 and never underflows to zero. Masked positions carry −inf and get weight exactly 0.
"""

from __future__ import annotations

import math
from typing import Sequence

from diffattn.pure.matrix import Vector


def softmax(logits: Sequence[float]) -> Vector:
    """Stable softmax of one row of logits; `-inf` entries (masked positions) get weight 0.

    >>> [round(w, 4) for w in softmax([1000.0, 1000.0, float("-inf")])]
    [0.5, 0.5, 0.0]
    """
    if len(logits) == 0:
        raise ValueError("softmax needs at least one logit")
    m = max(logits)
    if m == -math.inf:
        raise ValueError("softmax of a row that is entirely masked (-inf) is undefined")
    if math.isnan(m) or any(math.isnan(z) for z in logits):
        raise ValueError("softmax got a NaN logit")
    exps = [math.exp(z - m) for z in logits]  # every exponent ≤ 0: no overflow; the max term is exactly 1
    total = math.fsum(exps)  # fsum: the sum of many tiny weights at 128k tokens stays exact to the last bit
    return [e / total for e in exps]
