"""Lesson 03: the SNR measures, the crossover finder and the λ sweep (graded), the synthetic model and the claims.

Graded exercises (call `impl.<name>`, see tests/adapters.py):
    03.1 signal_to_noise    03.2 noise_crossover    03.3 lambda_sweep + best_lambda
The expected values come from small hand-worked rows or from an oracle written out here with plain loops, never from
the reference under test. The last block checks every claim lesson 03 makes against outputs/numbers.json (which
tests/test_lessons.py keeps equal to a fresh run). Tolerances are stated per test; everything is seeded.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st

from diffattn.pure.snr import (
    noise_logits,
    output_cosine,
    rho1_optimal_lambda,
    rho1_snr_gain,
    signal_logits,
    signal_share,
    signal_to_noise,
    subtract_maps,
)
from diffattn.pure.softmax import softmax
from diffattn.core.results import load_numbers
from tests.feedback import refuses, show

REL = 1e-9  # float64 arithmetic on rows of <= a few thousand entries


def oracle_snr(weights, s):
    """w_s / mean_{j≠s} |w_j|, written out with a loop."""
    noise = 0.0
    for j, w in enumerate(weights):
        if j != s:
            noise += abs(w)
    return weights[s] / (noise / (len(weights) - 1))


def oracle_softmax(logits):
    """softmax written out (the graded tests never lean on the reference of an exercise: see tests/test_handout.py)."""
    top = max(logits)
    exps = [math.exp(z - top) for z in logits]
    return [e / math.fsum(exps) for e in exps]


def gaussian_row(n, seed):
    rng = random.Random(seed)
    return [rng.gauss(0.0, 1.0) for _ in range(n)], [rng.gauss(0.0, 1.0) for _ in range(n)]


def synthetic(n, mu, sigma, rho, seed, s=0):
    eps1, eta = gaussian_row(n, seed)
    return signal_logits(eps1, s, mu, sigma), noise_logits(eps1, eta, sigma, rho)


# ---------------------------------------------------------------- 03.1 signal_to_noise


def oracle_snr_exact(weights, s):
    """w_s / mean_{j≠s} |w_j| in exact rational arithmetic (±inf for a zero floor), rounded once at the end."""
    noise = sum(Fraction(abs(w)) for j, w in enumerate(weights) if j != s) / (len(weights) - 1)
    if noise == 0:
        return math.copysign(math.inf, weights[s])
    return float(Fraction(weights[s]) / noise)


def versus(want, got):
    """'expected W, got G' to 6 significant digits, or to every digit where 6 would make them look the same."""
    w, g = show(want), show(got)
    if w == g:
        w, g = repr(want), repr(got)
    return f"expected {w}, got {g}"


def first_miss(lambdas, got, want, rel):
    """Where a λ sweep that failed `got == pytest.approx(want, rel=rel)` first goes wrong: its length, or the λ."""
    if len(got) != len(want):
        return f"expected {len(want)} SNRs, one per λ in {show(list(lambdas))}, got {len(got)}: {show(got)}"
    for lam, g, w in zip(lambdas, got, want):
        if g != pytest.approx(w, rel=rel):
            return f"at λ = {show(lam)}: {versus(w, g)}"
    return versus(want, got)


@pytest.mark.grade("03.1", points=2)
def test_snr_of_a_hand_worked_diff_row(impl):
    # noise weights 0.25, −0.25, 0: mean |w_j| = 0.5/3, so SNR = 0.5 / (1/6) = 3. The signed mean elsewhere is 0,
    # and a mean over all four |w_j| (signal included) is 0.25, giving 2: both are wrong.
    snr = impl.signal_to_noise([0.5, 0.25, -0.25, 0.0], 0)
    assert snr == pytest.approx(3.0, rel=REL), \
        f"signal_to_noise([0.5, 0.25, -0.25, 0], s=0) = w_s / mean_{{j≠s}} |w_j| = 0.5 / (0.5/3): {versus(3.0, snr)}"
    # the signal need not be first: position 2 of a row whose other weights are 0.1, −0.3, 0.2 (mean |w| = 0.2)
    snr = impl.signal_to_noise([0.1, -0.3, 0.6, 0.2], 2)
    assert snr == pytest.approx(3.0, rel=REL), \
        f"signal_to_noise([0.1, -0.3, 0.6, 0.2], s=2) = 0.6 / mean(|0.1|, |-0.3|, |0.2|) = 0.6/0.2: {versus(3.0, snr)}"


@pytest.mark.grade("03.1", points=1)
def test_snr_of_a_softmax_row_is_the_exponential_contrast(impl):
    # softmax weights are e^{z_j}/Z, so SNR = e^{z_s} / mean_{j≠s} e^{z_j}: Z cancels
    logits = [2.0, 0.0, math.log(3.0), -math.log(2.0)]
    expected = math.exp(2.0) / ((1.0 + 3.0 + 0.5) / 3)
    snr = impl.signal_to_noise(oracle_softmax(logits), 0)
    assert snr == pytest.approx(expected, rel=REL), (f"signal_to_noise(softmax([2, 0, ln 3, -ln 2]), s=0) = "
                                                     f"e^2 / mean(1, 3, 0.5) (Z cancels): {versus(expected, snr)}")


@pytest.mark.grade("03.1", points=2)
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), lam=st.floats(0.0, 1.0), n=st.integers(2, 64), data=st.data())
def test_snr_matches_the_oracle_on_diff_rows(impl, seed, lam, n, data):
    """A1 − λA2 rows (negative entries, row sum 1 − λ) at any signal position; relative tolerance 1e-9."""
    s = data.draw(st.integers(0, n - 1))
    z1, z2 = gaussian_row(n, seed)
    weights = [a - lam * b for a, b in zip(oracle_softmax(z1), oracle_softmax(z2))]
    snr = impl.signal_to_noise(weights, s)
    want = oracle_snr(weights, s)
    assert snr == pytest.approx(want, rel=REL), (f"signal_to_noise of a row A1 − λ·A2 (N={n}, λ={show(lam)}, "
                                                 f"seed {seed}) at s={s}, w_s / mean_{{j≠s}} |w_j|: "
                                                 f"{versus(want, snr)}")


@pytest.mark.grade("03.1", points=1)
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(1e-3, 1e3))
def test_snr_is_scale_free(impl, seed, scale):
    weights = [a - 0.6 * b for a, b in zip(*map(oracle_softmax, gaussian_row(16, seed)))]
    scaled = impl.signal_to_noise([scale * w for w in weights], 3)
    plain = impl.signal_to_noise(weights, 3)
    assert scaled == pytest.approx(plain, rel=1e-9), (f"the SNR of a row (N=16, λ=0.6, seed {seed}, s=3) scaled by "
                                                      f"{show(scale)} must be the unscaled row's: "
                                                      f"{versus(plain, scaled)}")


@pytest.mark.grade("03.1", points=1)
def test_snr_edge_cases(impl):
    snr = impl.signal_to_noise([0.2, 0.0, 0.0], 0)
    assert snr == math.inf, (f"signal_to_noise([0.2, 0, 0], s=0): a noise floor of exactly 0 under a positive signal: "
                             f"{versus(math.inf, snr)}")
    snr = impl.signal_to_noise([0.0, -0.2, 0.0], 1)
    assert snr == -math.inf, (f"signal_to_noise([0, -0.2, 0], s=1): a zero floor under a negative signal keeps the "
                              f"sign: {versus(-math.inf, snr)}")
    snr = impl.signal_to_noise([0.25, 0.25, 0.25, 0.25], 1)
    assert snr == pytest.approx(1.0, rel=REL), \
        f"signal_to_noise([0.25, 0.25, 0.25, 0.25], s=1): no signal above the floor: {versus(1.0, snr)}"
    with refuses(ValueError, "signal_to_noise([1], s=0): a one-entry row has no noise positions to average over"):
        impl.signal_to_noise([1.0], 0)
    for bad_index in (2, -1):  # the signal index must be a position of the row: 0 <= s < N, no wrap-around
        with refuses(ValueError, f"signal_to_noise([0.5, 0.5], s={bad_index}): s must satisfy 0 ≤ s < N = 2 "
                                 "(no wrap-around)"):
            impl.signal_to_noise([0.5, 0.5], bad_index)


@pytest.mark.grade("03.1", points=1)
def test_snr_of_an_all_zero_row_is_undefined_and_any_sequence_works(impl):
    """0/0: the docstring's ±inf is for a zero floor under a non-zero signal; a row of zeros has no SNR."""
    with refuses(ValueError, "signal_to_noise([0, 0, 0], s=1): 0/0, a row of zeros has no SNR (±inf is for a zero "
                             "floor under a non-zero signal)"):
        impl.signal_to_noise([0.0, 0.0, 0.0], 1)
    snr = impl.signal_to_noise((0.5, 0.25), 0)
    assert snr == pytest.approx(2.0, rel=REL), \
        f"signal_to_noise of the tuple (0.5, 0.25), s=0 (any sequence is a row): {versus(2.0, snr)}"
    snr = impl.signal_to_noise([0.3, 0.1], 1)
    assert snr == pytest.approx(1 / 3, rel=REL), \
        f"signal_to_noise([0.3, 0.1], s=1) (the signal in the last position) = 0.1 / 0.3: {versus(1 / 3, snr)}"


@pytest.mark.grade("03.1", points=1)
@pytest.mark.parametrize("weights, s, want", [
    ([1e308, 1e308, 1e308], 0, 1.0),  # the floor's sum, 2e308, overflows: the mean does not
    ([1.7e308, -1.7e308, 1.7e308, -1.7e308], 1, -1.0),
    ([5e-324, 5e-324, -5e-324], 2, -1.0),  # subnormal weights: the smallest positive float
    ([1e-300, 1e300, 1e300], 1, 2.0),  # 1e300 / mean(1e-300, 1e300): 600 decades apart in one row
], ids=["huge", "huge-mixed-signs", "subnormal", "huge-range"])
def test_snr_of_extreme_but_valid_rows(impl, weights, s, want):
    """The docstring takes any weights: their sum may overflow (Σ|w_j| of 1e308s) while their mean does not."""
    snr = impl.signal_to_noise(weights, s)
    assert snr == pytest.approx(want, rel=REL), f"signal_to_noise({show(weights)}, s={s}): {versus(want, snr)}"


@pytest.mark.grade("03.1", points=1)
@settings(max_examples=40, deadline=None)
@given(weights=st.lists(st.floats(1e-3, 1.0) | st.floats(-1.0, -1e-3) | st.just(0.0), min_size=2, max_size=12),
       power=st.integers(-1000, 1000), data=st.data())
def test_snr_is_scale_free_across_the_whole_float_range(impl, weights, power, data):
    """SNR(2^k·w) = SNR(w) for every k that keeps the row finite and normal: an exact scaling of every weight."""
    s = data.draw(st.integers(0, len(weights) - 1), label="s")
    if all(w == 0.0 for j, w in enumerate(weights) if j != s) and weights[s] == 0.0:
        return  # 0/0: undefined, tested elsewhere
    scaled = [math.ldexp(w, power) for w in weights]
    plain, got = oracle_snr_exact(weights, s), impl.signal_to_noise(scaled, s)
    assert got == pytest.approx(plain, rel=REL), (f"signal_to_noise of a row scaled by 2^{power} ({show(scaled)}, "
                                                  f"s={s}) must equal the unscaled row's: {versus(plain, got)}")


# ---------------------------------------------------------------- 03.2 noise_crossover


def linear(slope, intercept):
    return lambda sigma: intercept + slope * sigma


@pytest.mark.grade("03.2", points=2)
def test_crossover_interpolates_between_the_bracketing_levels(impl):
    levels = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    # 1 − σ/4 meets 0.4 at σ = 2.4, between the grid points 2.0 (0.5) and 2.5 (0.375)
    sigma = impl.noise_crossover(levels, linear(-0.25, 1.0), 0.4)
    assert sigma == pytest.approx(2.4, abs=1e-12), (f"noise_crossover(σ = 0, 0.5, …, 3; measure 1 − σ/4; threshold "
                                                    f"0.4) interpolates between σ = 2 (0.5) and σ = 2.5 (0.375): "
                                                    f"{versus(2.4, sigma)}")
    # default threshold 0.5 on an uneven grid: the measure 0.9, 0.6, 0.2 crosses 0.5 a quarter of the way from 1 to 3
    measure = {0.0: 0.9, 1.0: 0.6, 3.0: 0.2}.__getitem__
    sigma = impl.noise_crossover([0.0, 1.0, 3.0], measure)
    assert sigma == pytest.approx(1.5, abs=1e-12), (f"noise_crossover([0, 1, 3], measure 0.9, 0.6, 0.2, default "
                                                    f"threshold 0.5): 0.5 lies a quarter of the way from σ = 1 to 3: "
                                                    f"{versus(1.5, sigma)}")


@pytest.mark.grade("03.2", points=1)
def test_crossover_edge_cases(impl):
    levels = [0.0, 1.0, 2.0]
    sigma = impl.noise_crossover(levels, lambda s: 0.1)
    assert sigma == 0.0, (f"noise_crossover([0, 1, 2], measure 0.1 everywhere): already below 0.5 at the first "
                          f"level: {versus(0.0, sigma)}")
    sigma = impl.noise_crossover(levels, lambda s: 0.9)
    assert sigma is None, (f"noise_crossover([0, 1, 2], measure 0.9 everywhere): it never drops below 0.5: "
                           f"expected None, got {show(sigma)}")
    bumpy = {0.0: 0.9, 1.0: 0.3, 2.0: 0.8, 3.0: 0.1}.__getitem__
    sigma = impl.noise_crossover([0.0, 1.0, 2.0, 3.0], bumpy)
    assert sigma == pytest.approx(2.0 / 3.0, abs=1e-12), (f"noise_crossover([0, 1, 2, 3], measure 0.9, 0.3, 0.8, 0.1)"
                                                          f": the first crossing, between σ = 0 and 1: "
                                                          f"{versus(2.0 / 3.0, sigma)}")
    with refuses(ValueError, "noise_crossover with levels [0, 2, 1] (the levels must increase)"):
        impl.noise_crossover([0.0, 2.0, 1.0], lambda s: 0.9)
    with refuses(ValueError, "noise_crossover with no levels [] (an empty grid is an error, not \"never drops\")"):
        impl.noise_crossover([], lambda s: 0.9)


@pytest.mark.grade("03.2", points=1)
def test_crossover_needs_strictly_below_and_a_strictly_increasing_grid(impl):
    sigma = impl.noise_crossover([0.0, 1.0, 2.0], {0.0: 0.9, 1.0: 0.5, 2.0: 0.1}.__getitem__)
    assert sigma == pytest.approx(1.0), (f"noise_crossover([0, 1, 2], measure 0.9, 0.5, 0.1, threshold 0.5): 0.5 is "
                                         f"not below 0.5, the crossing is at σ = 1: {versus(1.0, sigma)}")
    sigma = impl.noise_crossover([0.0, 1.0], lambda s: 0.5)
    assert sigma is None, (f"noise_crossover([0, 1], measure 0.5 everywhere, threshold 0.5): exactly at the threshold "
                           f"is not below it: expected None, got {show(sigma)}")
    sigma = impl.noise_crossover([3.0], lambda s: 0.2, threshold=0.25)
    assert sigma == 3.0, \
        f"noise_crossover([3], measure 0.2, threshold 0.25): one level, already below: {versus(3.0, sigma)}"
    sigma = impl.noise_crossover([3.0], lambda s: 0.3, threshold=0.25)
    assert sigma is None, \
        f"noise_crossover([3], measure 0.3, threshold 0.25): one level, not below: expected None, got {show(sigma)}"
    with refuses(ValueError, "noise_crossover with levels [0, 1, 1] (equal levels are not strictly increasing)"):
        impl.noise_crossover([0.0, 1.0, 1.0], lambda s: 0.9)


@pytest.mark.grade("03.2", points=1)
def test_crossover_stops_measuring_once_it_has_crossed(impl):
    asked = []

    def measure(sigma):
        asked.append(sigma)
        if sigma > 2.0:
            raise AssertionError("measured past the crossing (each call may be a whole experiment)")
        return 1.0 - sigma / 2

    sigma = impl.noise_crossover([0.0, 0.5, 1.0, 1.5, 2.0, 2.5], measure)
    assert sigma == pytest.approx(1.0, abs=1e-12), \
        f"noise_crossover(σ = 0, 0.5, …, 2.5; measure 1 − σ/2; threshold 0.5): {versus(1.0, sigma)}"
    assert asked == [0.0, 0.5, 1.0, 1.5], (f"noise_crossover must measure σ = 0, 0.5, 1, 1.5 in order and stop at 1.5, "
                                           f"the first level below 0.5; it measured σ = {show(asked)}")


@pytest.mark.grade("03.2", points=1)
@settings(max_examples=40, deadline=None)
@given(slope=st.floats(-5.0, -0.01), root=st.floats(0.05, 3.95), step=st.sampled_from([0.1, 0.25, 0.5]))
def test_crossover_finds_the_root_of_a_straight_line(impl, slope, root, step):
    """For a decreasing straight line the interpolation is exact: the answer is the root, to 1e-9."""
    levels = [step * i for i in range(int(4.0 / step) + 1)]  # 0 … 4, so the root 0.05 … 3.95 is inside the grid
    sigma = impl.noise_crossover(levels, linear(slope, 0.5 - slope * root))
    assert sigma == pytest.approx(root, abs=1e-9), (f"noise_crossover(σ = 0, {show(step)}, …, 4; the straight line "
                                                    f"{show(0.5 - slope * root)} + ({show(slope)})·σ): it crosses 0.5 "
                                                    f"at σ = {show(root)} (interpolation is exact): "
                                                    f"{versus(root, sigma)}")


def crossing_exact(x0, y0, x1, y1, threshold):
    """σ_{i−1} + (σ_i − σ_{i−1})·(m_{i−1} − t)/(m_{i−1} − m_i) in exact rational arithmetic, rounded once."""
    x0, y0, x1, y1, t = map(Fraction, (x0, y0, x1, y1, threshold))
    return float(x0 + (x1 - x0) * (y0 - t) / (y0 - y1))


@pytest.mark.grade("03.2", points=1)
@pytest.mark.parametrize("levels, values, threshold", [
    ([-1e308, 1e308], [1e308, -1e308], 0.5),  # σ_i − σ_{i−1} and m_{i−1} − m_i both overflow to inf
    ([-1e308, 1e308], [0.75, 0.25], 0.5),  # only σ_i − σ_{i−1} overflows
    ([0.0, 1.0], [1e308, -1e308], 0.5),  # only m_{i−1} − m_i overflows
    ([0.0, 1.0], [1.7e308, -1.7e308], -1e308),  # m_{i−1} − t overflows too
    ([1e-320, 2e-320], [1.0, 0.0], 0.5),  # subnormal levels
    ([-5.0, 1e300], [0.75, 0.25], 0.5),
], ids=["huge-levels-and-measures", "huge-levels", "huge-measures", "huge-threshold-gap", "subnormal-levels", "wide-bracket"])
def test_crossover_of_extreme_but_valid_grids(impl, levels, values, threshold):
    """Any strictly increasing grid and any finite measure: the straight line still meets the threshold between the
    bracketing levels, even where the textbook differences overflow. Tolerance 1e-12 of the bracket's magnitude."""
    want = crossing_exact(levels[0], values[0], levels[1], values[1], threshold)
    got = impl.noise_crossover(levels, dict(zip(levels, values)).__getitem__, threshold)
    scale = max(map(abs, levels))
    assert got is not None and abs(got - want) <= 1e-12 * scale, (
        f"noise_crossover({show(levels)}, measure {show(values)}, threshold {show(threshold)}): the line through "
        f"the two points meets the threshold at {show(want)}, got {show(got)}")


@pytest.mark.grade("03.2", points=1)
@pytest.mark.parametrize("levels", [[0.0, 1.0, 0.5], [0.0, 1.0, 2.0, 2.0], [0.0, 1.0, math.nan], [1.0, 0.0]])
def test_crossover_checks_the_whole_grid_before_measuring(impl, levels):
    """A grid that is not strictly increasing is refused even when the measure would cross before the bad pair, and
    before `measure` runs (each call can be a whole experiment)."""
    calls = []

    def measure(sigma):
        calls.append(sigma)
        return 0.1  # already below the threshold: a walk would stop at the first level
    with refuses(ValueError, f"noise_crossover({show(levels)}): the grid is not strictly increasing"):
        impl.noise_crossover(levels, measure)
    assert calls == [], f"noise_crossover({show(levels)}) called measure at {show(calls)} before refusing the grid"


# ---------------------------------------------------------------- 03.3 lambda_sweep and best_lambda

LAMBDAS = [0.0, 0.25, 0.5, 0.8, 1.0]


@pytest.mark.grade("03.3", points=2)
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), rho=st.sampled_from([0.0, 0.5, 0.9, 1.0]))
def test_lambda_sweep_matches_the_oracle(impl, seed, rho):
    """SNR of softmax(z1) − λ·softmax(z2) for each λ (softmax first, then subtract); relative tolerance 1e-9."""
    z1, z2 = synthetic(64, 4.0, 1.0, rho, seed, s=5)
    a1, a2 = oracle_softmax(z1), oracle_softmax(z2)
    expected = [oracle_snr([x - lam * y for x, y in zip(a1, a2)], 5) for lam in LAMBDAS]
    sweep = impl.lambda_sweep(z1, z2, 5, LAMBDAS)
    assert sweep == pytest.approx(expected, rel=REL), (f"lambda_sweep (N=64, ρ={show(rho)}, seed {seed}, s=5): the SNR "
                                                       f"of softmax(z1) − λ·softmax(z2) (softmax first, then subtract) "
                                                       f"{first_miss(LAMBDAS, sweep, expected, REL)}")


@pytest.mark.grade("03.3", points=1)
def test_lambda_sweep_argmax_is_where_identical_noise_cancels(impl):
    """ρ = 1: the noise weights are a1_j·(1 − λ/λ*), so on a fine grid the best λ is within one step of λ*."""
    lambdas = [i / 1000 for i in range(1001)]
    for seed in range(3):
        z1, z2 = synthetic(1024, 8.0, 1.5, 1.0, seed)
        optimum = (1 - oracle_softmax(z1)[0]) / (1 - oracle_softmax(z2)[0])
        best = impl.best_lambda(lambdas, impl.lambda_sweep(z1, z2, 0, lambdas))
        assert abs(best - optimum) <= 1e-3, (f"best_lambda of a sweep over λ = 0, 0.001, …, 1 (ρ = 1, N=1024, seed "
                                             f"{seed}): identical noise cancels at λ* = {show(optimum)}; expected a λ "
                                             f"within 0.001 of it, got {show(best)}")


@pytest.mark.grade("03.3", points=2)
def test_best_lambda_returns_the_lambda_not_its_index_and_bad_input_raises(impl):
    best = impl.best_lambda([0.1, 0.3, 0.5, 0.7], [2.0, 9.0, 4.0, 1.0])
    assert best == 0.3, (f"best_lambda([0.1, 0.3, 0.5, 0.7], SNRs [2, 9, 4, 1]): the λ with the largest SNR, not its "
                         f"index: {versus(0.3, best)}")
    best = impl.best_lambda([0.0, 0.25, 0.5], [1.0, 3.0, 3.0])
    assert best == 0.25, f"best_lambda([0, 0.25, 0.5], SNRs [1, 3, 3]): a tie goes to the first λ: {versus(0.25, best)}"
    best = impl.best_lambda([0.6], [5.0])
    assert best == 0.6, f"best_lambda([0.6], SNRs [5]): the only λ: {versus(0.6, best)}"
    best = impl.best_lambda([0.0, 0.5, 1.0], [2.0, 3.0, -7.0])
    assert best == 0.5, \
        f"best_lambda([0, 0.5, 1], SNRs [2, 3, -7]): the largest SNR, not the largest |SNR|: {versus(0.5, best)}"
    with refuses(ValueError, "best_lambda with 2 λs [0.1, 0.2] and 1 SNR [1]"):
        impl.best_lambda([0.1, 0.2], [1.0])
    with refuses(ValueError, "lambda_sweep with 3 logits in z1 and 2 in z2 (zip would silently drop the extra one)"):
        impl.lambda_sweep([1.0, 0.0, 0.0], [0.0, 0.0], 0, [0.5])


@pytest.mark.grade("03.3", points=1)
def test_best_lambda_with_negative_snrs_and_empty_input(impl):
    """A running maximum that starts at 0 (or at the first λ's index) gets these wrong."""
    best = impl.best_lambda([0.0, 0.5, 1.0], [-3.0, -1.0, -2.0])
    assert best == 0.5, (f"best_lambda([0, 0.5, 1], SNRs [-3, -1, -2]): every SNR is negative and the largest is -1: "
                         f"{versus(0.5, best)}")
    best = impl.best_lambda([0.2, 0.4], [-math.inf, -5.0])
    assert best == 0.4, f"best_lambda([0.2, 0.4], SNRs [-inf, -5]): {versus(0.4, best)}"
    best = impl.best_lambda((0.1, 0.9), (1.0, 1.0))
    assert best == 0.1, \
        f"best_lambda of the tuples (0.1, 0.9), SNRs (1, 1): a tie goes to the first λ: {versus(0.1, best)}"
    with refuses(ValueError, "best_lambda([], []): no λ to choose from"):
        impl.best_lambda([], [])


@pytest.mark.grade("03.3", points=1)
def test_lambda_sweep_edges(impl):
    z1, z2 = (1.0, 0.0, -1.0), (0.0, 0.0, 0.0)
    sweep = impl.lambda_sweep(z1, z2, 0, [])
    assert sweep == [], f"lambda_sweep((1, 0, -1), (0, 0, 0), s=0) over no λs: expected [], got {show(sweep)}"
    softmax_snr = oracle_snr(oracle_softmax(z1), 0)
    sweep = impl.lambda_sweep(z1, z2, 0, [0.0])
    assert sweep == pytest.approx([softmax_snr], rel=REL), (f"lambda_sweep((1, 0, -1), (0, 0, 0), s=0) at λ = 0 is "
                                                            f"softmax's own SNR: "
                                                            f"{first_miss([0.0], sweep, [softmax_snr], REL)}")
    sweep = impl.lambda_sweep(z1, z2, 2, [0.5, 0.5])
    expected = [oracle_snr([a - 0.5 * b for a, b in zip(oracle_softmax(z1), oracle_softmax(z2))], 2)] * 2
    assert sweep == pytest.approx(expected, rel=REL), (f"lambda_sweep((1, 0, -1), (0, 0, 0), s=2) over λs [0.5, 0.5] "
                                                       f"(one SNR per λ, repeats too): "
                                                       f"{first_miss([0.5, 0.5], sweep, expected, REL)}")


@pytest.mark.grade("03.3", points=1)
def test_lengths_are_checked_on_both_sides_before_any_work(impl):
    """Different lengths are refused whichever list is longer, and with no λ to sweep as well."""
    for z1, z2 in (([1.0, 0.0, 0.0], [0.0, 0.0]), ([1.0, 0.0], [0.0, 0.0, 0.0])):
        for lambdas in ([], [0.5]):
            with refuses(ValueError, f"lambda_sweep({show(z1)}, {show(z2)}, s=0, λs {show(lambdas)}): z1 and z2 "
                                     "have different lengths"):
                impl.lambda_sweep(z1, z2, 0, lambdas)
    for lambdas, snrs in (([0.1, 0.2], [1.0, 2.0, 9.0]), ([0.1, 0.2, 0.3], [1.0, 2.0]), ([0.1], []), ([], [1.0])):
        with refuses(ValueError, f"best_lambda(λs {show(lambdas)}, SNRs {show(snrs)}): the lengths differ"):
            impl.best_lambda(lambdas, snrs)


@pytest.mark.grade("03.3", points=1)
def test_best_lambda_over_infinite_snrs(impl):
    """SNRs are ±inf when a floor is exactly 0: the largest still wins and ties still go to the first λ."""
    for lambdas, snrs, want in (([0.1, 0.2], [-math.inf, -math.inf], 0.1), ([0.1, 0.2, 0.3], [1.0, math.inf, math.inf],
                                                                             0.2), ([0.4, 0.5], [-math.inf, 3.0], 0.5)):
        best = impl.best_lambda(lambdas, snrs)
        assert best == want, f"best_lambda(λs {show(lambdas)}, SNRs {show(snrs)}): {versus(want, best)}"


# ---------------------------------------------------------------- the synthetic model and the other measures


def test_noise_logits_have_the_requested_correlation():
    """Sample correlation of map 1's and map 2's noise over 20,000 tokens: within 0.02 of ρ (≈ 3 standard errors)."""
    eps1, eta = gaussian_row(20_000, 7)
    for rho in (0.0, 0.5, 0.9, 1.0):
        z2 = noise_logits(eps1, eta, 1.0, rho)
        n = len(z2)
        m1, m2 = sum(eps1) / n, sum(z2) / n
        cov = sum((a - m1) * (b - m2) for a, b in zip(eps1, z2)) / n
        sd1 = math.sqrt(sum((a - m1) ** 2 for a in eps1) / n)
        sd2 = math.sqrt(sum((b - m2) ** 2 for b in z2) / n)
        assert cov / (sd1 * sd2) == pytest.approx(rho, abs=0.02)


def test_shared_random_keys_correlate_two_queries_logits_by_their_cosine():
    """The lesson's reading of ρ for a V2 head pair (shared keys): for isotropic keys k ~ N(0, I_d),
    corr(q1·k, q2·k) = cos(q1, q2). 20,000 keys, d = 16: within 0.02 (≈ 3 standard errors)."""
    rng = random.Random(5)
    d = 16
    q1 = [rng.gauss(0.0, 1.0) for _ in range(d)]
    r = [rng.gauss(0.0, 1.0) for _ in range(d)]
    for mix in (0.0, 0.5, 2.0):
        q2 = [a + mix * b for a, b in zip(r, q1)]
        cosine = sum(a * b for a, b in zip(q1, q2)) / math.sqrt(sum(a * a for a in q1) * sum(b * b for b in q2))
        keys = [[rng.gauss(0.0, 1.0) for _ in range(d)] for _ in range(20_000)]
        x = [sum(a * b for a, b in zip(q1, k)) for k in keys]
        y = [sum(a * b for a, b in zip(q2, k)) for k in keys]
        mx, my = sum(x) / len(x), sum(y) / len(y)
        cov = sum((a - mx) * (b - my) for a, b in zip(x, y))
        corr = cov / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))
        assert corr == pytest.approx(cosine, abs=0.02)


def test_map_one_carries_the_signal_and_map_two_only_noise():
    eps1, eta = gaussian_row(8, 1)
    z1 = signal_logits(eps1, 3, 6.0, 2.0)
    assert z1[3] == 6.0 and [z for j, z in enumerate(z1) if j != 3] == [2.0 * e for j, e in enumerate(eps1) if j != 3]
    assert noise_logits(eps1, eta, 2.0, 1.0) == [2.0 * e for e in eps1]  # ρ = 1: the same noise, signal slot too


@pytest.mark.parametrize("bad", [
    lambda: signal_logits([0.1], 0, 1.0, 1.0),
    lambda: signal_logits([0.1, 0.2], 2, 1.0, 1.0),
    lambda: signal_logits([0.1, 0.2], 0, 1.0, -1.0),
    lambda: noise_logits([0.1, 0.2], [0.3], 1.0, 0.5),
    lambda: noise_logits([0.1, 0.2], [0.3, 0.4], 1.0, 1.5),
    lambda: subtract_maps([0.5, 0.5], [1.0], 0.5),
    lambda: subtract_maps([0.5, 0.5], [0.5, 0.5], math.nan),
    lambda: signal_share([0.0, 0.0], 0),
    lambda: output_cosine([1.0, 0.0], [[1.0, 0.0]], 0),
    lambda: output_cosine([1.0, 0.0], [[1.0, 0.0], [1.0]], 0),
])
def test_bad_input_raises_a_config_error(bad):
    from diffattn.core.errors import ConfigError

    with pytest.raises(ConfigError):
        bad()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), lam=st.floats(0.0, 1.0))
def test_diff_rows_sum_to_one_minus_lambda_and_share_is_bounded(seed, lam):
    z1, z2 = synthetic(32, 3.0, 1.0, 0.5, seed)
    w = subtract_maps(softmax(z1), softmax(z2), lam)
    assert math.fsum(w) == pytest.approx(1.0 - lam, abs=1e-12)
    assert -1.0 <= signal_share(w, 0) <= 1.0
    assert signal_share(softmax(z1), 0) == pytest.approx(softmax(z1)[0], rel=1e-12)  # softmax: share = a_s


def test_output_cosine_concentrates_at_the_l2_share():
    """With i.i.d. N(0, I) values, cos(o, v_s) → w_s/‖w‖₂ as d_v grows; at d_v = 4096 within 0.03 (≈ 3/√d_v)."""
    rng = random.Random(11)
    z1, z2 = synthetic(24, 2.0, 1.0, 0.9, 5)
    w = subtract_maps(softmax(z1), softmax(z2), 0.8)
    values = [[rng.gauss(0.0, 1.0) for _ in range(4096)] for _ in w]
    l2_share = w[0] / math.sqrt(math.fsum(x * x for x in w))
    assert output_cosine(w, values, 0) == pytest.approx(l2_share, abs=0.03)
    assert output_cosine([0.0, 3.0, 0.0], [[1.0, 0.0], [0.0, 2.0], [5.0, 5.0]], 1) == pytest.approx(1.0, rel=1e-12)
    assert output_cosine([2.5 * x for x in w], values, 0) == pytest.approx(output_cosine(w, values, 0), rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), lam=st.floats(0.0, 1.0), mu=st.floats(0.0, 8.0))
def test_rho1_theory_is_exact(seed, lam, mu):
    """ρ = 1: the measured SNR gain equals (1 − λa2_s/a1_s)/|1 − λ/λ*|, and λ* leaves no noise weight standing."""
    z1, z2 = synthetic(128, mu, 1.0, 1.0, seed)
    a1, a2 = softmax(z1), softmax(z2)
    optimum = rho1_optimal_lambda(a1, a2, 0)
    if abs(lam - optimum) > 1e-6:
        measured = signal_to_noise(subtract_maps(a1, a2, lam), 0) / signal_to_noise(a1, 0)
        assert measured == pytest.approx(rho1_snr_gain(a1, a2, 0, lam), rel=1e-6)
    residual = subtract_maps(a1, a2, optimum)
    assert max(abs(w) for j, w in enumerate(residual) if j != 0) < 1e-15
    # λ = 1: the row sums to 0 and every noise weight has the same sign, so |SNR| = N − 1 whatever μ is
    assert abs(signal_to_noise(subtract_maps(a1, a2, 1.0), 0)) == pytest.approx(127, rel=1e-9)


# ---------------------------------------------------------------- lesson 03's claims, checked on its numbers


@pytest.fixture(scope="module")
def lesson():
    numbers = load_numbers()
    assert "03" in numbers, "outputs/numbers.json has no lesson 03: run `diffattn course --lessons 03`"
    return numbers["03"]


def test_claim_softmax_snr_is_flat_in_context_length(lesson):
    """SNR_softmax ≈ e^{μ − σ²/2} at every N from 1k to 128k (within 5%), while the share falls by > 50×."""
    ctx, theory = lesson["context"], lesson["setup"]["softmax_snr_theory"]
    assert all(abs(snr / theory - 1) < 0.05 for snr in ctx["snr"]["softmax"])
    assert ctx["share"]["softmax"][0] / ctx["share"]["softmax"][-1] > 50


def test_claim_softmax_share_follows_the_mean_field_formula(lesson):
    """share ≈ 1/(1 + (N − 1)·e^{σ²/2 − μ}) at the headline N, within 0.02."""
    mean_field = 1 / (1 + lesson["setup"]["floor_over_signal"])
    assert lesson["headline"]["softmax"]["share"]["mean"] == pytest.approx(mean_field, abs=0.02)


def test_claim_the_gain_depends_on_rho_and_fixed_lambda_can_lose(lesson):
    diff = lesson["headline"]["diff"]
    fixed = [diff[k]["fixed"]["ratio"]["gmean"] for k in ("rho000", "rho050", "rho090", "rho099", "rho100")]
    best = [diff[k]["best"]["ratio"]["gmean"] for k in ("rho000", "rho050", "rho090", "rho099", "rho100")]
    assert fixed[0] < 1 and fixed[1] < 1 < fixed[2]  # λ = 0.8 loses at ρ ≤ 0.5 and wins from ρ = 0.9
    assert best == sorted(best) and best[0] < 1.1 and best[-1] > 10  # the best λ's gain grows with ρ
    assert all(b >= f for b, f in zip(best, fixed))


def test_claim_rho1_gain_approaches_one_over_one_minus_lambda(lesson):
    """Past the context where λ* = λ, the ρ = 1 gain falls monotonically towards 1/(1 − λ) = 5 (within 5% at 128k)."""
    ratio, limit = lesson["context"]["ratio"]["rho100"], lesson["setup"]["ratio_limit"]
    peak = ratio.index(max(ratio))
    tail = ratio[peak:]
    assert tail == sorted(tail, reverse=True) and all(r > limit for r in tail)
    assert tail[-1] == pytest.approx(limit, rel=0.05)
    assert lesson["context"]["rho100_theory_ratio"] == pytest.approx(ratio, rel=1e-9)


def test_claim_best_lambda_at_rho1_matches_theory(lesson):
    lam = lesson["lambda"]
    step = lam["grid"][1] - lam["grid"][0]
    assert abs(lam["best"]["rho100"] - lam["rho100_optimum"]["mean"]) <= step


def test_claim_crossover_order(lesson):
    """DIFF (λ = 0.8) drowns before softmax at ρ ≤ 0.5 and after it at ρ ≥ 0.9."""
    c = lesson["noise"]["crossover"]
    assert c["rho000"] < c["rho050"] < c["softmax"] < c["rho090"] < c["rho099"] < c["rho100"]
    assert lesson["noise"]["diff_above_softmax"]["rho000"] is None
    assert lesson["noise"]["diff_above_softmax"]["rho050"] is None
    # even identical noise does not help at low σ: λ = 0.8 over-subtracts a light floor
    assert all(lesson["noise"]["diff_above_softmax"][k][0] > 0 for k in ("rho090", "rho099", "rho100"))


def test_claim_context_sweep(lesson):
    ctx = lesson["context"]
    assert ctx["share"]["softmax"][0] < 0.5 and ctx["crossover_n"]["softmax"] == ctx["n"][0]
    assert all(r < 1 for r in ctx["ratio"]["rho000"])  # independent noise: DIFF behind softmax at every length
    assert ctx["crossover_n"]["rho000"] <= ctx["crossover_n"]["softmax"] < ctx["crossover_n"]["rho090"]
    assert ctx["crossover_n"]["rho090"] < ctx["crossover_n"]["rho100"]
    for name in ("softmax", "rho000", "rho090", "rho100"):  # the tail halves with every doubling of N (±15%)
        tail = ctx["share"][name][-4:]
        assert all(0.85 < 2 * b / a < 1.15 for a, b in zip(tail, tail[1:]))


def test_claim_output_cosine_barely_separates_the_methods(lesson):
    """With i.i.d. values the floor hardly moves the output direction: every condition's mean cosine is > 0.95."""
    assert lesson["headline"]["lowest_cos"] > 0.95


def test_claim_the_setting_decides_whether_independent_noise_helps(lesson):
    """ρ = 0, λ = 0.8: DIFF beats softmax when the floor holds most of map 1 (1 − a1_s near λ) and the noise is
    narrow (small τ); it loses at every τ when the floor holds little of map 1 (μ = 8, 1 − a1_s ≤ 0.71)."""
    grid = lesson["setting"]
    taus = grid["noise_stds"]
    ratio, floor = grid["ratio"], grid["floor_share"]
    assert ratio["mu4"][taus.index(0.25)] > 3 and ratio["mu4"][taus.index(0.5)] > 1.5  # the public toy's 2×
    assert ratio["mu4"] == sorted(ratio["mu4"], reverse=True)  # wider private noise: less gain, then a loss
    assert ratio["mu4"][-1] < 1 and ratio["mu6"][-1] < 1
    assert all(r < 0.6 for r in ratio["mu8"])  # the headline's μ = 8: a loss at every τ of the grid
    assert max(floor["mu8"]) < 0.75 < min(floor["mu4"])
    for key in ("mu4", "mu6", "mu8"):  # a wider noise spread fattens the floor
        assert floor[key] == sorted(floor[key])
    # the (8, 1.5) cell is the headline's ρ = 0, λ = 0.8 condition on the same trials (median vs geometric mean)
    assert ratio["mu8"][taus.index(1.5)] == pytest.approx(
        lesson["headline"]["diff"]["rho000"]["fixed"]["ratio"]["gmean"], abs=0.02)


def test_claim_the_public_toy_setting_gives_about_two_and_loses_at_wide_noise(lesson):
    """μ = 4, τ = 0.5, ρ = 0: the public script's single draw printed 47.72 (softmax) and 92.31 (λ = 0.8), peaking at
    λ = 0.8 of its grid; its noise sweep had DIFF below softmax at noise_std 1.5 and 2. The course's model agrees."""
    grid = lesson["setting"]
    toy = grid["toy"]
    # what the script prints at commit 6b10711e (the lesson cites it): its λ row, and its noise sweep at λ = 0.8
    script_lambda_row = [47.72, 67.42, 88.37, 92.31, 85.25]
    script_softmax = [52.09, 48.69, 34.62, 15.93, 8.46]
    script_diff = [173.19, 88.46, 35.14, 11.80, 5.42]
    assert toy["lambdas"] == [0.0, 0.3, 0.6, 0.8, 1.0] and grid["noise_stds"] == [0.25, 0.5, 1.0, 1.5, 2.0]
    assert script_lambda_row == pytest.approx(toy["snr"], rel=0.02)  # "within 2% of our medians"
    assert script_softmax == pytest.approx(grid["softmax_snr"]["mu4"], rel=0.14)  # "at most 13% off"
    assert script_diff == pytest.approx(grid["diff_snr"]["mu4"], rel=0.14)
    assert toy["best_lambda"] == 0.8 and 1.5 < max(toy["ratio"]) < 2.5
    soft, diff = grid["softmax_snr"]["mu4"], grid["diff_snr"]["mu4"]
    wins = [d > s for s, d in zip(soft, diff)]
    assert wins == [True, True, True, False, False]  # τ = 0.25, 0.5, 1 | 1.5, 2
    assert wins == [d > s for s, d in zip(script_softmax, script_diff)]


def test_setting_grid_cell_matches_an_oracle():
    """The public toy's cell (μ 4, τ 0.5, ρ 0, λ 0.8) recomputed with plain loops from the lesson's own draws."""
    from statistics import median

    from diffattn.lessons import lesson03_snr as lesson03

    def loop_softmax(z):
        top = max(z)
        e = [math.exp(x - top) for x in z]
        return [x / sum(e) for x in e]

    ratios = []
    for t in range(lesson03.GRID_TRIALS):
        eps1, eta = lesson03.draws(t, lesson03.N)
        z1 = [0.5 * e for e in eps1]
        z1[0] = 4.0
        a1, a2 = loop_softmax(z1), loop_softmax([0.5 * h for h in eta])  # ρ = 0: map 2 is τ·η
        ratios.append(oracle_snr([x - 0.8 * y for x, y in zip(a1, a2)], 0) / oracle_snr(a1, 0))
    grid = load_numbers()["03"]["setting"]
    assert grid["ratio"]["mu4"][grid["noise_stds"].index(0.5)] == pytest.approx(median(ratios), rel=1e-9)


def test_rho1_gain_is_unbounded_as_lambda_approaches_lambda_star():
    """1/|1 − λ/λ*|: each tenfold step closer to λ* multiplies the gain by about ten, on one row of the headline."""
    z1, z2 = synthetic(1024, 8.0, 1.5, 1.0, 3)
    a1, a2 = softmax(z1), softmax(z2)
    star = rho1_optimal_lambda(a1, a2, 0)
    gains = [signal_to_noise(subtract_maps(a1, a2, star * (1 - 10.0**-k)), 0) / signal_to_noise(a1, 0)
             for k in (1, 2, 3, 4)]
    assert all(9 < b / a < 11 for a, b in zip(gains, gains[1:]))


def test_claim_the_rho1_best_lambda_gain_is_a_grid_artefact(lesson):
    """ρ = 1 at the best grid λ: single trials spread over more than two orders of magnitude (their λ* straddle the
    grid point), and other seeds move the 64-trial geometric mean by more than 10%: no fourth significant figure."""
    best = lesson["headline"]["diff"]["rho100"]["best"]
    optimum = lesson["lambda"]["rho100_optimum"]
    assert optimum["min"] < best["lambda"] < optimum["max"]
    assert best["ratio"]["max"] / best["ratio"]["min"] > 100
    seeds = lesson["seeds"]
    assert (seeds["lambda"] == best["lambda"] and len(seeds["ratio"]) == 9
            and lesson["setup"]["seed"] not in seeds["seeds"])
    assert seeds["max"] / seeds["min"] > 1.1
    assert all(r > 10 for r in seeds["ratio"])  # still far above λ = 0.8's gain: the effect is real, the digits are not
