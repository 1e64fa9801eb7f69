"""02.1 mistake (class C, one-sided bound): λ is refused with `if not lam < math.inf`, which catches NaN and +inf
but not −inf.

diff_weights_v1(..., lam=-inf) returns a map of +inf (and NaN where A2 is 0) instead of the docstring's ValueError
for a λ that is not finite. Every finite λ gives the right map, and every shape mismatch is refused.
"""

import math

from diffattn.pure.attention import attention_weights  # the one-map part is not the mistake
from diffattn.pure.matrix import width


def diff_weights_v1(q1, k1, q2, k2, lam, causal=False):
    if not lam < math.inf:  # NaN and +inf fail this comparison; −inf passes it
        raise ValueError(f"λ must be finite (got {lam})")
    if len(q1) != len(q2) or len(k1) != len(k2) or width(q1) != width(q2):
        raise ValueError("both maps need the same shapes")
    a1, a2 = attention_weights(q1, k1, causal), attention_weights(q2, k2, causal)
    return [[x - lam * y for x, y in zip(r1, r2)] for r1, r2 in zip(a1, a2)]


OVERRIDES = {"diff_weights_v1": diff_weights_v1}
LOSES = ("02.1",)
