"""02.1 and 02.2, correct: DIFF V1 weights and outputs, DIFF V2 outputs, one head, lists of rows.

How it differs from the reference (diffattn.pure.attention): every matrix is validated up front as a whole rectangle
(every row's length, not only through the helpers' first use), the causal mask is applied by softmaxing only the
visible prefix of keys (the reference fills −inf and softmaxes the whole row), dot products and output sums are
math.fsum (the reference uses sum), the softmax is lesson 01's log-sum-exp version from tests/correct/c01_softmax.py
(not the reference's), and σ is evaluated as exp(−|x|)-based branches on a per-row list before any attention work.
"""

from __future__ import annotations

import math

from tests.correct.c01_softmax import softmax


def _rectangle(rows, name):
    """rows as a list of float lists, and their common width; ValueError for an empty or ragged matrix."""
    matrix = [list(row) for row in rows]
    if not matrix:
        raise ValueError(f"{name} has no rows")
    widths = {len(row) for row in matrix}
    if len(widths) != 1:
        raise ValueError(f"{name} is ragged: its rows have lengths {sorted(widths)}")
    width = widths.pop()
    if width == 0:
        raise ValueError(f"{name} has rows of width 0")
    return matrix, width


def _map(q, k, causal):
    """softmax(q kᵀ/√d) for validated rectangles; with causal, query i sees keys j <= i + N_k − N_q."""
    n_q, n_k, d = len(q), len(k), len(q[0])
    if causal and n_q > n_k:
        raise ValueError(f"causal attention needs N_q <= N_k (got {n_q} queries and {n_k} keys)")
    root = math.sqrt(d)
    rows = []
    for i, query in enumerate(q):
        visible = n_k if not causal else i + (n_k - n_q) + 1
        logits = [math.fsum(a * b for a, b in zip(query, key)) / root for key in k[:visible]]
        rows.append(softmax(logits) + [0.0] * (n_k - visible))
    return rows


def _times(weights, v):
    columns = list(zip(*v))
    return [[math.fsum(w * x for w, x in zip(row, column)) for column in columns] for row in weights]


def _pair(q1, k1, q2, k2):
    """Validate the two maps of a V1 head; returns the four rectangles."""
    q1, d1 = _rectangle(q1, "q1")
    q2, d2 = _rectangle(q2, "q2")
    k1, e1 = _rectangle(k1, "k1")
    k2, e2 = _rectangle(k2, "k2")
    if len(q1) != len(q2) or d1 != d2:
        raise ValueError(f"q1 is {len(q1)}×{d1} but q2 is {len(q2)}×{d2}: both maps need the same query shape")
    if len(k1) != len(k2) or e1 != e2:
        raise ValueError(f"k1 is {len(k1)}×{e1} but k2 is {len(k2)}×{e2}: both maps need the same key shape")
    if d1 != e1:
        raise ValueError(f"queries are {d1} wide but keys are {e1} wide")
    return q1, k1, q2, k2


def _finite_lambda(lam):
    if not (isinstance(lam, (int, float)) and math.isfinite(lam)):
        raise ValueError(f"λ must be a finite number (got {lam!r})")
    return float(lam)


def diff_weights_v1(q1, k1, q2, k2, lam, causal=False):
    lam = _finite_lambda(lam)
    q1, k1, q2, k2 = _pair(q1, k1, q2, k2)
    first, second = _map(q1, k1, causal), _map(q2, k2, causal)
    return [[a - lam * b for a, b in zip(ra, rb)] for ra, rb in zip(first, second)]


def diff_attention_v1(q1, k1, q2, k2, v, lam, causal=False):
    lam = _finite_lambda(lam)
    q1, k1, q2, k2 = _pair(q1, k1, q2, k2)
    v, width = _rectangle(v, "v")
    if width != 2 * len(q1[0]):
        raise ValueError(f"DIFF V1 values are 2d = {2 * len(q1[0])} wide, got {width}")
    if len(v) != len(k1):
        raise ValueError(f"{len(v)} value rows for {len(k1)} keys")
    return _times(diff_weights_v1(q1, k1, q2, k2, lam, causal), v)


def _sigmoid(x):
    small = math.exp(-abs(x))  # <= 1: never overflows, for any finite x
    return 1.0 / (1.0 + small) if x >= 0 else small / (1.0 + small)


def diff_attention_v2(q1, q2, k, v, lambda_logits, causal=False):
    q1, d1 = _rectangle(q1, "q1")
    q2, d2 = _rectangle(q2, "q2")
    k, d_k = _rectangle(k, "k")
    v, _ = _rectangle(v, "v")
    if len(q1) != len(q2) or d1 != d2:
        raise ValueError(f"q1 is {len(q1)}×{d1} but q2 is {len(q2)}×{d2}: the pair needs one shape")
    if d1 != d_k:
        raise ValueError(f"queries are {d1} wide but keys are {d_k} wide")
    if len(k) != len(v):
        raise ValueError(f"{len(v)} value rows for {len(k)} keys")
    if isinstance(lambda_logits, (int, float)):
        logits = [lambda_logits] * len(q1)
    else:
        logits = list(lambda_logits)
        if len(logits) != len(q1):
            raise ValueError(f"need one λ logit per query: {len(q1)} queries, {len(logits)} logits")
    gates = []
    for t, x in enumerate(logits):
        if not (isinstance(x, (int, float)) and math.isfinite(x)):
            raise ValueError(f"λ logit {t} is {x!r}: it must be finite")
        gates.append(_sigmoid(float(x)))
    first, second = _map(q1, k, causal), _map(q2, k, causal)
    weights = [[a - g * b for a, b in zip(ra, rb)] for ra, rb, g in zip(first, second, gates)]
    return _times(weights, v)


OVERRIDES = {
    "diff_weights_v1": diff_weights_v1,
    "diff_attention_v1": diff_attention_v1,
    "diff_attention_v2": diff_attention_v2,
}
