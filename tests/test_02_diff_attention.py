"""Lesson 02: differential attention V1 and V2 (graded exercises 02.1 and 02.2) and the lesson's worked example.

Graded tests call `impl.diff_weights_v1`, `impl.diff_attention_v1`, `impl.diff_attention_v2` and compare with
`oracle_*` below: the formulas written out with plain loops and `math`, independent of diffattn, at tolerance 1e-12.
Random inputs are seeded; hypothesis runs derandomised.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diffattn.core.errors import ConfigError
from diffattn.lessons import lesson02_diff_attention as lesson
from diffattn.lessons.lesson02_diff_attention import random_matrix
from diffattn.pure.attention import diff_weights_v1, lambda_init, logit_difference_weights
from tests.feedback import expect_close, refuses, show

TOL = 1e-12
PROPERTY = settings(derandomize=True, max_examples=60, deadline=None)


# ---------------------------------------------------------------- the oracle: the formulas, written out


def oracle_map(q, k, causal=False):
    """softmax(q kᵀ/√d) row by row; with causal, query i sees keys j ≤ i + N_k − N_q."""
    d, n_q, n_k = len(q[0]), len(q), len(k)
    rows = []
    for i in range(n_q):
        seen = [j for j in range(n_k) if not causal or j <= i + n_k - n_q]
        z = {j: sum(q[i][c] * k[j][c] for c in range(d)) / math.sqrt(d) for j in seen}
        top = max(z.values())
        e = {j: math.exp(z[j] - top) for j in seen}
        total = sum(e.values())
        rows.append([e[j] / total if j in e else 0.0 for j in range(n_k)])
    return rows


def oracle_v1_weights(q1, k1, q2, k2, lam, causal=False):
    a1, a2 = oracle_map(q1, k1, causal), oracle_map(q2, k2, causal)
    return [[a1[i][j] - lam * a2[i][j] for j in range(len(k1))] for i in range(len(q1))]


def oracle_times(w, v):
    return [[sum(w[i][j] * v[j][c] for j in range(len(v))) for c in range(len(v[0]))] for i in range(len(w))]


def oracle_v2(q1, q2, k, v, lambda_logits, causal=False):
    gates = [1.0 / (1.0 + math.exp(-x)) for x in lambda_logits]
    a1, a2 = oracle_map(q1, k, causal), oracle_map(q2, k, causal)
    w = [[a1[i][j] - gates[i] * a2[i][j] for j in range(len(k))] for i in range(len(q1))]
    return oracle_times(w, v)


def draw(seed, n_q, n_k, d, width_v, std=1.0):
    """q1, k1, q2, k2 and v of the given shapes, seeded."""
    rng = random.Random(seed)
    q1, q2 = random_matrix(rng, n_q, d, std), random_matrix(rng, n_q, d, std)
    k1, k2 = random_matrix(rng, n_k, d, std), random_matrix(rng, n_k, d, std)
    return q1, k1, q2, k2, random_matrix(rng, n_k, width_v)


MAP = ("query", "key")  # how a failure names a weight: "query 1, key 5"
OUT = ("query", "column")  # and an output entry


def case(lam, causal):
    return f"λ={show(float(lam))}, " + ("causal" if causal else "no mask")


SHAPES = [(6, 6, 8, False), (6, 6, 8, True), (3, 7, 4, True), (4, 9, 2, False), (1, 5, 16, True)]  # N_q, N_k, d, causal
seeds = st.integers(0, 10_000)
small = st.integers(1, 6)


# ---------------------------------------------------------------- exercise 02.1: V1 weights (graded)


@pytest.mark.grade("02.1", points=2)
@PROPERTY
@given(seeds, small, small, st.integers(1, 5), st.floats(-2.0, 2.0), st.booleans())
def test_v1_rows_sum_to_one_minus_lambda(impl, seed, n_q, extra, d, lam, causal):
    q1, k1, q2, k2, _ = draw(seed, n_q, n_q + extra - 1, d, 1)
    for i, row in enumerate(impl.diff_weights_v1(q1, k1, q2, k2, lam, causal)):
        total = math.fsum(row)
        assert abs(total - (1.0 - lam)) <= TOL, \
            f"V1 weights ({case(lam, causal)}): query {i} must sum to 1 − λ = {show(1.0 - lam)}, got {show(total)}"


@pytest.mark.grade("02.1", points=0.5)
@pytest.mark.parametrize("n_q, n_k, d, causal", SHAPES)
def test_v1_weights_match_the_formula(impl, n_q, n_k, d, causal):
    q1, k1, q2, k2, _ = draw(1, n_q, n_k, d, 1)
    for lam in (0.8, 0.2, -0.3, 1.4):
        expect_close(impl.diff_weights_v1(q1, k1, q2, k2, lam, causal), oracle_v1_weights(q1, k1, q2, k2, lam, causal),
                     f"V1 weights A1 − λ·A2 (N_q={n_q}, N_k={n_k}, d={d}, {case(lam, causal)})", TOL, axes=MAP)


@pytest.mark.grade("02.1", points=1)
def test_v1_weights_go_negative_on_the_lesson_example(impl):
    """Lesson 02's example (seed 0, N = 6, d = 8, λ = 0.8): a softmax could never give a negative weight."""
    q1, k1, q2, k2, _ = lesson.example_inputs()
    weights = impl.diff_weights_v1(q1, k1, q2, k2, lesson.LAM)
    negatives = sum(w < 0 for row in weights for w in row)
    expected = sum(w < 0 for row in oracle_v1_weights(q1, k1, q2, k2, lesson.LAM) for w in row)
    assert negatives == expected, f"lesson 02's example (λ=0.8): expected {expected} negative weights, got {negatives}"
    expect_close(weights, oracle_v1_weights(q1, k1, q2, k2, lesson.LAM), "lesson 02's example (λ=0.8)", TOL, axes=MAP)


@pytest.mark.grade("02.1", points=0.5)
@pytest.mark.parametrize("n_q, n_k", [(5, 5), (3, 6), (1, 4)])
def test_v1_causal_mask_gives_future_keys_exactly_zero(impl, n_q, n_k):
    q1, k1, q2, k2, _ = draw(2, n_q, n_k, 4, 1)
    weights = impl.diff_weights_v1(q1, k1, q2, k2, 0.5, causal=True)
    shape = f"N_q={n_q}, N_k={n_k}"
    for i in range(n_q):
        for j, w in enumerate(weights[i]):
            if j > i + n_k - n_q:
                assert w == 0.0, (f"causal V1 weights ({shape}): query {i} may see keys j ≤ i + N_k − N_q = "
                                  f"{i + n_k - n_q}; key {j} must weigh exactly 0, got {show(w)}")
            else:
                assert w != 0.0, (f"causal V1 weights ({shape}): query {i} sees keys j ≤ i + N_k − N_q = "
                                  f"{i + n_k - n_q}; visible key {j} got weight exactly 0")


@pytest.mark.grade("02.1", points=1)
def test_v1_rejects_what_it_cannot_compute(impl):
    q1, k1, q2, k2, _ = draw(3, 3, 4, 2, 1)
    for lam in (math.nan, math.inf, -math.inf):  # not finite: both infinities, not only +inf
        with refuses(ValueError, f"diff_weights_v1 with λ = {lam}"):
            impl.diff_weights_v1(q1, k1, q2, k2, lam)
    with refuses(ValueError, "diff_weights_v1 with 3 queries in q1 and 2 in q2"):
        impl.diff_weights_v1(q1, k1, q2[:2], k2, 0.5)
    with refuses(ValueError, "diff_weights_v1 with keys k1 wider (d=3) than queries q1 (d=2)"):
        impl.diff_weights_v1(q1, [row + [0.0] for row in k1], q2, k2, 0.5)
    with refuses(ValueError, "causal diff_weights_v1 with more queries (6) than keys (2)"):
        impl.diff_weights_v1(q1 + q1, k1[:2], q2 + q2, k2[:2], 0.5, causal=True)
    with refuses(ValueError, "diff_weights_v1 with d=2 in the first map and d=3 in the second"):
        impl.diff_weights_v1(q1, k1, [row + [0.0] for row in q2], [row + [0.0] for row in k2], 0.5)
    with refuses(ValueError, "diff_weights_v1 with 4 keys in k1 and 3 in k2"):
        impl.diff_weights_v1(q1, k1, q2, k2[:3], 0.5)


@pytest.mark.grade("02.1", points=1)
def test_without_a_mask_more_queries_than_keys_is_fine(impl):
    """Only causal=True needs N_q <= N_k; an unmasked head attends 5 queries over 3 keys."""
    q1, k1, q2, k2, _ = draw(16, 5, 3, 4, 1)
    expect_close(impl.diff_weights_v1(q1, k1, q2, k2, 0.3), oracle_v1_weights(q1, k1, q2, k2, 0.3),
                 "V1 weights, 5 queries over 3 keys, no mask (only causal needs N_q ≤ N_k)", TOL, axes=MAP)


def ragged(rows):
    """The same matrix with its LAST row one entry short: no longer (N, d), found only by checking every row."""
    return [list(row) for row in rows[:-1]] + [list(rows[-1][:-1])]


@pytest.mark.grade("02.1", points=1)
@pytest.mark.parametrize("which", ["q1", "k1", "q2", "k2"])
def test_v1_checks_every_row_of_every_matrix(impl, which):
    """A matrix with one short row is not (N, d): it differs in shape from its partner, whichever row it is."""
    q1, k1, q2, k2, _ = draw(17, 3, 4, 3, 1)
    inputs = {"q1": q1, "k1": k1, "q2": q2, "k2": k2}
    inputs[which] = ragged(inputs[which])
    case = f"diff_weights_v1 with {which}'s last row {len(inputs[which][-1])} wide (its other rows and d are 3)"
    with refuses(ValueError, case):
        impl.diff_weights_v1(inputs["q1"], inputs["k1"], inputs["q2"], inputs["k2"], 0.5)


@pytest.mark.grade("02.1", points=1)
@PROPERTY
@given(seeds, st.floats(allow_nan=False, allow_infinity=False), st.booleans())
def test_v1_takes_every_finite_lambda(impl, seed, lam, causal):
    """λ may be any finite float (±1e308 included). Entries then reach |λ|, so the tolerance is 1e-12·max(1, |λ|):
    the rounding of λ·A2_ij is |λ| times A2's."""
    q1, k1, q2, k2, _ = draw(seed, 3, 4, 2, 1)
    expect_close(impl.diff_weights_v1(q1, k1, q2, k2, lam, causal), oracle_v1_weights(q1, k1, q2, k2, lam, causal),
                 f"V1 weights ({case(lam, causal)})", TOL * max(1.0, abs(lam)), axes=MAP)


# ---------------------------------------------------------------- exercise 02.2: V1 and V2 outputs (graded)


@pytest.mark.grade("02.2", points=0.5)
@pytest.mark.parametrize("n_q, n_k, d, causal", SHAPES)
def test_v1_output_matches_the_formula_and_is_2d_wide(impl, n_q, n_k, d, causal):
    q1, k1, q2, k2, v = draw(4, n_q, n_k, d, 2 * d)
    out = impl.diff_attention_v1(q1, k1, q2, k2, v, 0.8, causal)
    what = f"V1 output (A1 − λ·A2)·v (N_q={n_q}, N_k={n_k}, d={d}, {case(0.8, causal)})"
    expect_close(out, oracle_times(oracle_v1_weights(q1, k1, q2, k2, 0.8, causal), v), what, TOL, axes=OUT)
    if not causal:  # the signature's default is causal=False
        expect_close(impl.diff_attention_v1(q1, k1, q2, k2, v, 0.8), out,
                     "V1 output without the `causal` argument (the default is False) vs causal=False", TOL, axes=OUT)


@pytest.mark.grade("02.2", points=1)
def test_v1_output_is_two_attention_passes_subtracted(impl):
    """(A1 − λA2)v = A1 v − λ·A2 v: why kernels can run attention twice and subtract the outputs."""
    q1, k1, q2, k2, v = draw(5, 6, 6, 4, 8)
    first = impl.diff_attention_v1(q1, k1, q2, k2, v, 0.0, True)  # λ = 0: just A1 v
    second = impl.diff_attention_v1(q2, k2, q1, k1, v, 0.0, True)  # the maps swapped: A2 v
    for lam in (0.8, 0.35):
        expected = [[a - lam * b for a, b in zip(ra, rb)] for ra, rb in zip(first, second)]
        expect_close(impl.diff_attention_v1(q1, k1, q2, k2, v, lam, True), expected,
                     f"V1 output with λ={lam} vs A1·v − λ·A2·v from two λ=0 calls", TOL, axes=OUT)


@pytest.mark.grade("02.2", points=1)
def test_v1_values_must_be_2d_wide(impl):
    q1, k1, q2, k2, v = draw(6, 3, 3, 4, 4)  # v only d wide: V1 has one value projection of width 2d
    with refuses(ValueError, "diff_attention_v1 with values d=4 wide (V1's values are 2d = 8 wide)"):
        impl.diff_attention_v1(q1, k1, q2, k2, v, 0.5)
    _, _, _, _, v = draw(6, 3, 2, 4, 8)  # 2d wide, but 2 values for 3 keys
    with refuses(ValueError, "diff_attention_v1 with 2 value rows for 3 keys"):
        impl.diff_attention_v1(q1, k1, q2, k2, v, 0.5)


def ones_column(n, width, seed=7):
    """Values whose last column is all ones: that output column is then each row's weight sum."""
    v = random_matrix(random.Random(seed), n, width - 1)
    return [row + [1.0] for row in v]


@pytest.mark.grade("02.2", points=2)
@PROPERTY
@given(seeds, st.lists(st.floats(-6.0, 6.0), min_size=1, max_size=6), st.booleans())
def test_v2_rows_sum_to_one_minus_sigmoid_of_each_tokens_lambda(impl, seed, lambda_logits, causal):
    n = len(lambda_logits)
    q1, k, q2, _, _ = draw(seed, n, n, 3, 1)
    out = impl.diff_attention_v2(q1, q2, k, ones_column(n, 3), lambda_logits, causal)
    for i, (row, x) in enumerate(zip(out, lambda_logits)):
        want = 1.0 - 1.0 / (1.0 + math.exp(-x))
        assert abs(row[-1] - want) <= TOL, (f"V2 ({'causal' if causal else 'no mask'}): query {i}'s weights must sum "
                                            f"to 1 − σ(λ_t) = {show(want)} for λ logit {show(x)}, got {show(row[-1])}")


@pytest.mark.grade("02.2", points=0.5)
@pytest.mark.parametrize("n_q, n_k, d, causal", SHAPES)
def test_v2_output_matches_the_formula_and_is_d_wide(impl, n_q, n_k, d, causal):
    q1, k, q2, _, _ = draw(8, n_q, n_k, d, 1)
    v = random_matrix(random.Random(9), n_k, d)
    lambda_logits = [(-1.5 + 0.7 * i) for i in range(n_q)]
    out = impl.diff_attention_v2(q1, q2, k, v, lambda_logits, causal)
    shape = f"N_q={n_q}, N_k={n_k}, d={d}, {'causal' if causal else 'no mask'}"
    expect_close(out, oracle_v2(q1, q2, k, v, lambda_logits, causal),
                 f"V2 output (A1 − σ(λ_t)·A2)·v, one λ logit per query ({shape})", TOL, axes=OUT)
    expect_close(impl.diff_attention_v2(q1, q2, k, v, 0.3, causal), oracle_v2(q1, q2, k, v, [0.3] * n_q, causal),
                 f"V2 output with one λ logit 0.3 for every query ({shape})", TOL, axes=OUT)
    if not causal:  # the signature's default is causal=False
        expect_close(impl.diff_attention_v2(q1, q2, k, v, lambda_logits), out,
                     "V2 output without the `causal` argument (the default is False) vs causal=False", TOL, axes=OUT)


@pytest.mark.grade("02.2", points=1)
def test_v2_causal_mask_gives_future_keys_exactly_zero(impl):
    n = 6
    q1, k, q2, _, _ = draw(10, n, n, n, 1)
    identity = [[float(i == j) for j in range(n)] for i in range(n)]  # v = I (d = N): the output is the map itself
    weights = impl.diff_attention_v2(q1, q2, k, identity, [0.5] * n, causal=True)
    for i in range(n):
        for j in range(i + 1, n):
            assert weights[i][j] == 0.0, (f"causal V2 (N = {n}, values = identity, so the output is the map): "
                                          f"query {i} must give future key {j} exactly 0, got {show(weights[i][j])}")


@pytest.mark.grade("02.2", points=1)
def test_v2_with_identical_queries_is_scaled_ordinary_attention(impl):
    """q1 = q2 makes both maps the same A (they share k), so the head is (1 − σ(λ_t))·A v, row by row."""
    q, k, _, _, _ = draw(11, 5, 5, 4, 1)
    v = random_matrix(random.Random(12), 5, 4)
    lambda_logits = [-3.0, -0.5, 0.0, 1.0, 4.0]
    plain = oracle_times(oracle_map(q, k, True), v)
    out = impl.diff_attention_v2(q, q, k, v, lambda_logits, True)
    for i, (row, base, x) in enumerate(zip(out, plain, lambda_logits)):
        scale = 1.0 - 1.0 / (1.0 + math.exp(-x))
        expect_close(row, [scale * b for b in base], f"V2 with q1 = q2, query {i} (λ logit {x:g}): (1 − σ(λ_t))·A·v",
                     TOL, axes=("column",))


@pytest.mark.grade("02.2", points=1)
def test_v2_rejects_what_it_cannot_compute(impl):
    q1, k, q2, _, _ = draw(13, 3, 3, 2, 1)
    v = random_matrix(random.Random(14), 3, 2)
    for bad in ([0.1, 0.2], [0.1, math.nan, 0.2], math.inf, -math.inf, [0.1, 0.2, -math.inf]):
        with refuses(ValueError, f"diff_attention_v2 (3 queries) with lambda_logits = {bad}"):
            impl.diff_attention_v2(q1, q2, k, v, bad)
    with refuses(ValueError, "diff_attention_v2 with 3 queries in q1 and 2 in q2"):
        impl.diff_attention_v2(q1, q2[:2], k, v, [0.0, 0.0, 0.0])
    with refuses(ValueError, "diff_attention_v2 with 2 value rows for 3 keys"):
        impl.diff_attention_v2(q1, q2, k, v[:2], [0.0, 0.0, 0.0])
    with refuses(ValueError, "causal diff_attention_v2 with more queries (3) than keys (2)"):
        impl.diff_attention_v2(q1, q2, k[:2], v[:2], [0.0, 0.0, 0.0], causal=True)


def stable_sigmoid(x):
    """σ(x) without overflow anywhere: 1/(1 + e^−x) for x ≥ 0, e^x/(1 + e^x) for x < 0 (e^−x overflows below −709)."""
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


@pytest.mark.grade("02.2", points=1)
@PROPERTY
@given(seeds, st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=5), st.booleans())
def test_v2_takes_every_finite_lambda_logit(impl, seed, lambda_logits, causal):
    """Any finite λ_t, out to ±1.8e308: σ(−1000) is 0 to double precision and σ(1000) is 1, while the textbook
    1/(1 + e^−λ_t) overflows for λ_t < −709.78."""
    n = len(lambda_logits)
    q1, k, q2, _, _ = draw(seed, n, n, 3, 1)
    v = random_matrix(random.Random(seed + 1), n, 3)
    gates = [stable_sigmoid(x) for x in lambda_logits]
    a1, a2 = oracle_map(q1, k, causal), oracle_map(q2, k, causal)
    want = oracle_times([[x - g * y for x, y in zip(r1, r2)] for r1, r2, g in zip(a1, a2, gates)], v)
    expect_close(impl.diff_attention_v2(q1, q2, k, v, lambda_logits, causal), want,
                 f"V2 output with λ logits {show(lambda_logits)} ({'causal' if causal else 'no mask'})", TOL, axes=OUT)


@pytest.mark.grade("02.2", points=1)
@pytest.mark.parametrize("x", [-1000.0, -1e308, 1000.0, 1e308])
def test_v2_takes_one_extreme_lambda_logit_for_every_row(impl, x):
    q1, k, q2, _, _ = draw(18, 3, 3, 2, 1)
    v = random_matrix(random.Random(19), 3, 2)
    gate = stable_sigmoid(x)
    a1, a2 = oracle_map(q1, k), oracle_map(q2, k)
    want = oracle_times([[a - gate * b for a, b in zip(r1, r2)] for r1, r2 in zip(a1, a2)], v)
    expect_close(impl.diff_attention_v2(q1, q2, k, v, x), want,
                 f"V2 output with the single λ logit {show(x)} for every row (σ = {show(stable_sigmoid(x))})", TOL,
                 axes=OUT)


@pytest.mark.grade("02.2", points=1)
@pytest.mark.parametrize("which", ["q1", "q2", "v"])
def test_v2_and_v1_outputs_check_every_row(impl, which):
    """One short row in q1 or q2 (V1 and V2) or in V1's values is a shape error, whichever row it is."""
    q1, k1, q2, k2, v = draw(20, 3, 3, 2, 4)
    if which == "v":
        with refuses(ValueError, "diff_attention_v1 with the values' last row 3 wide (the others 2d = 4)"):
            impl.diff_attention_v1(q1, k1, q2, k2, ragged(v), 0.5)
        return
    pair = {"q1": q1, "q2": q2}
    pair[which] = ragged(pair[which])
    with refuses(ValueError, f"diff_attention_v2 with {which}'s last row 1 wide (the other query rows are 2)"):
        impl.diff_attention_v2(pair["q1"], pair["q2"], k1, [row[:2] for row in v], [0.0, 0.0, 0.0])
    with refuses(ValueError, f"diff_attention_v1 with {which}'s last row 1 wide (the other query rows are 2)"):
        impl.diff_attention_v1(pair["q1"], k1, pair["q2"], k2, v, 0.5)


# ---------------------------------------------------------------- the reference and the lesson's numbers


@pytest.fixture(scope="module")
def results():
    return lesson.run(progress=False)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(seeds, small, st.floats(-3.0, 3.0))
def test_the_logit_difference_is_always_a_plain_distribution(seed, n, lam):
    """softmax(z1 − λ·z2) is one softmax: rows sum to 1 and nothing is negative, for every λ and input."""
    q1, k1, q2, k2, _ = draw(seed, n, n, 3, 1)
    for row in logit_difference_weights(q1, k1, q2, k2, lam, causal=True):
        assert abs(math.fsum(row) - 1.0) <= TOL and min(row) >= 0.0


def test_worked_example_numbers(results):
    cells = results["n"] ** 2
    assert all(abs(s - (1 - results["lam"])) <= TOL for s in results["w_row_sums"])
    assert 0 < results["w_negatives"] < cells and results["w_min"] < 0
    assert results["linearity_max_abs_error"] <= 1e-14
    assert all(abs(s - 1.0) <= TOL for s in results["seed003_row_sums"])
    assert results["seed003_negatives"] == 0 and results["seed003_min"] > 0


def test_v2_example_numbers(results):
    for total, gate in zip(results["v2_row_sums"], results["v2_gates"]):
        assert abs(total - (1.0 - gate)) <= TOL and 0.0 < total < 1.0
    assert results["v2_future_zeros"] == results["n"] * (results["n"] - 1) // 2
    assert all(rms <= sup < math.sqrt(2) for rms, sup in zip(results["v2_rms"], results["v2_rms_sup"]))


def test_a_diff_head_shrinks_by_one_minus_lambda_only_when_its_maps_agree(results):
    for lam, same, init, trained in zip(
        results["shrink_lambdas"], results["shrink_identical"], results["shrink_init"], results["shrink_trained"]
    ):
        assert abs(same - (1.0 - lam)) <= TOL  # A2 = A1 exactly
        assert abs(init - (1.0 - lam)) <= 0.01  # near-uniform maps, as at initialisation
        assert abs(trained - (1.0 - lam)) > 0.1  # sharp, different maps: no fixed factor
    assert results["init_map_max_abs_difference"] < 0.01


def test_lambda_init_schedule_is_zero_based(results):
    table = results["lambda_init"]
    assert table["depths"][0] == 0 and table["zero_based"][0] == pytest.approx(0.2, abs=1e-15)
    assert round(table["one_based_l_in_code_formula"][0], 4) == 0.3555 == round(lambda_init(1), 4)
    assert table["zero_based"] == sorted(table["zero_based"]) and max(table["zero_based"]) < 0.8
    with pytest.raises(ConfigError):
        lambda_init(-1)


def test_reference_refuses_maps_of_different_shapes():
    q1, k1, q2, k2, _ = draw(15, 3, 4, 2, 1)
    with pytest.raises(ConfigError, match="same number of keys"):
        diff_weights_v1(q1, k1, q2, k2[:3], 0.5)


def test_report_and_figure(results, tmp_path):
    text = lesson.report(results)
    assert f"{results['w_negatives']} of 36 weights are negative" in text and "0.3555" in text
    pytest.importorskip("matplotlib")
    (path,) = lesson.figures(results, tmp_path)
    assert path.name == "02-effective-maps.png" and path.stat().st_size > 10_000
