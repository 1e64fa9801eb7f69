"""02.1 mistake (class B, lazy validation): the shapes are checked on the first row only — len(q1) == len(q2) and
len(q1[0]) == len(q2[0]) == len(k1[0]) ... — and the dot products zip the rows.

A ragged q2 such as [[0.3, −0.2], [0.5]] (its second query 1 wide, while q1 is 2×2) is not (N_q, d): q1 and q2
differ in shape, which the docstring says is a ValueError, but zip silently drops the missing coordinate and a
weight map comes back. Rectangular inputs give the right map and every rectangular mismatch is refused.
"""

import math

from diffattn.pure.softmax import softmax


def _map(q, k, causal):
    n_q, n_k, d = len(q), len(k), len(q[0])
    if causal and n_q > n_k:
        raise ValueError("causal attention needs N_q <= N_k")
    rows = []
    for i, qi in enumerate(q):
        z = [sum(a * b for a, b in zip(qi, kj)) / math.sqrt(d) for kj in k]
        rows.append(softmax([x if not causal or j <= i + n_k - n_q else -math.inf for j, x in enumerate(z)]))
    return rows


def diff_weights_v1(q1, k1, q2, k2, lam, causal=False):
    if not math.isfinite(lam):
        raise ValueError("λ must be finite")
    if len(q1) != len(q2) or len(k1) != len(k2):
        raise ValueError("both maps need the same number of queries and keys")
    if not len(q1[0]) == len(q2[0]) == len(k1[0]) == len(k2[0]):  # only the first row of each matrix
        raise ValueError("queries and keys of both maps must have the same width d")
    a1, a2 = _map(q1, k1, causal), _map(q2, k2, causal)
    return [[x - lam * y for x, y in zip(r1, r2)] for r1, r2 in zip(a1, a2)]


OVERRIDES = {"diff_weights_v1": diff_weights_v1}
LOSES = ("02.1",)
