"""DIFF V1 output multiplied by √2 "to compensate the gradient", as a widely shared explanation recommends.

No √2 appears in the official code: V1 rescales by the constant (1 − λ_init) after a per-head RMSNorm, and at
initialisation subtracting the maps shrinks the output by (1 − λ), not by 1/√2. The head output is (A1 − λA2) v.
"""

import math

from diffattn.pure.attention import diff_attention_v1


def diff_attention_v1_times_sqrt2(q1, k1, q2, k2, v, lam, causal=False):
    return [[math.sqrt(2.0) * x for x in row] for row in diff_attention_v1(q1, k1, q2, k2, v, lam, causal)]


OVERRIDES = {"diff_attention_v1": diff_attention_v1_times_sqrt2}
LOSES = ("02.2",)
