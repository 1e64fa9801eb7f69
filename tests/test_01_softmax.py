"""Lesson 01: the stable softmax (graded exercise 01.1) and the noise-floor experiment behind the lesson's numbers.

Graded tests call `impl.softmax` (reference, exercises/ex01_softmax.py, or a tests/wrong module). Tolerances are
absolute and stated beside each assertion; hypothesis runs derandomised, so every run checks the same examples.
"""

from __future__ import annotations

import json
import math
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from diffattn.core.errors import ConfigError
from diffattn.lessons import lesson01_noise_floor as lesson
from diffattn.pure.softmax import softmax as reference_softmax
from tests.feedback import expect_close, refuses, show

TOL = 1e-12
PROPERTY = settings(derandomize=True, max_examples=150, deadline=None)

logit_rows = st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=40)


def exact_softmax(logits):
    """The textbook formula evaluated where it cannot overflow (|z| ≤ 700); an oracle independent of any impl."""
    exps = [math.exp(z) for z in logits]
    return [e / math.fsum(exps) for e in exps]


# ---------------------------------------------------------------- exercise 01.1 (graded)


def shown(got, want):
    """show(got), or every digit of it where 6 significant digits would make it look like `want`."""
    return repr(got) if show(got) == show(want) else show(got)


def why_no_distribution(logits):
    """What makes a row of logits impossible to normalise, in the lesson's words."""
    if not logits:
        return "an empty row has no weights"
    if all(z == -math.inf for z in logits):
        return "every logit is −inf (masked): there is no key to attend to"
    return "a NaN or +inf logit has no finite weight"


@pytest.mark.grade("01.1", points=2)
@PROPERTY
@given(logit_rows)
@example([0.0])
@example([0.0, 1000.0])
def test_weights_form_a_distribution(impl, logits):
    before = list(logits)
    weights = impl.softmax(logits)
    assert logits == before, (f"return a new list; the caller's logits must not change: softmax({show(before)}) "
                              f"left them as {show(logits)}")
    assert weights is not logits, f"return a new list; softmax({show(before)}) returned the caller's list itself"
    assert len(weights) == len(logits), \
        f"softmax of {len(logits)} logits {show(logits)} must return {len(logits)} weights, got {len(weights)}"
    for j, w in enumerate(weights):
        assert 0.0 <= w <= 1.0, f"softmax({show(logits)}): weight {j} must lie in [0, 1], got {show(w)}"
    total = math.fsum(weights)
    assert abs(total - 1.0) <= TOL, \
        f"softmax({show(logits)}): the weights must sum to 1 (±1e-12), got {shown(total, 1.0)}"


@pytest.mark.grade("01.1", points=1)
@PROPERTY
@given(st.lists(st.floats(-30, 30), min_size=1, max_size=30), st.floats(-1000, 1000))
def test_adding_a_constant_to_every_logit_changes_nothing(impl, logits, shift):
    shifted = impl.softmax([z + shift for z in logits])
    unshifted = impl.softmax(logits)
    # z + c rounds to within ulp(1000)/2 ≈ 6e-14 per logit, so the weights may move by a few 1e-13: tolerance 1e-11
    for j, (a, b) in enumerate(zip(shifted, unshifted)):
        assert abs(a - b) <= 1e-11, (f"adding c = {show(shift)} to every logit of {show(logits)} must change nothing; "
                                     f"weight {j}: {show(b)} without c, {shown(a, b)} with it (tolerance 1e-11)")


@pytest.mark.grade("01.1", points=2)
def test_huge_and_tiny_logits_neither_overflow_nor_vanish(impl):
    expected = exact_softmax([2.0, 1.0, 0.0])  # softmax is shift invariant: [1000, 999, 998] has the same weights
    for logits in ([1000.0, 999.0, 998.0], [-1000.0, -1001.0, -1002.0]):
        weights = impl.softmax(logits)
        for j, (w, e) in enumerate(zip(weights, expected)):
            assert abs(w - e) <= TOL, (f"softmax({show(logits)}) must equal softmax([2, 1, 0]) = {show(expected)} "
                                       f"(shift invariance); weight {j}: expected {show(e)}, got {shown(w, e)}")
    spread = impl.softmax([0.0, 1000.0, -1000.0])  # a spread of 2000 defeats subtracting the minimum
    what = "softmax([0, 1000, -1000]) (a spread of 2000: subtract the maximum, not the minimum)"
    assert spread[1] == 1.0, f"{what}: weight 1 must be exactly 1, got {shown(spread[1], 1.0)}"
    assert 0.0 <= spread[0] <= 1e-300, f"{what}: weight 0 must be 0 to within 1e-300, got {show(spread[0])}"
    assert 0.0 <= spread[2] <= 1e-300, f"{what}: weight 2 must be 0 to within 1e-300, got {show(spread[2])}"


@pytest.mark.grade("01.1", points=2)
def test_masked_positions_get_exactly_zero(impl):
    weights = impl.softmax([1.0, -math.inf, 2.0, -math.inf])
    what = "softmax([1, -inf, 2, -inf])"
    # exact: a masked key must not leak any weight
    assert weights[1] == 0.0, f"{what}: masked key 1 must weigh exactly 0, got {show(weights[1])}"
    assert weights[3] == 0.0, f"{what}: masked key 3 must weigh exactly 0, got {show(weights[3])}"
    expected = exact_softmax([1.0, 2.0])
    assert abs(weights[0] - expected[0]) <= TOL, \
        f"{what}: key 0 must weigh softmax([1, 2])[0] = {show(expected[0])}, got {shown(weights[0], expected[0])}"
    assert abs(weights[2] - expected[1]) <= TOL, \
        f"{what}: key 2 must weigh softmax([1, 2])[1] = {show(expected[1])}, got {shown(weights[2], expected[1])}"
    single = impl.softmax([-math.inf, 5.0, -math.inf])
    assert single == [0.0, 1.0, 0.0], \
        f"softmax([-inf, 5, -inf]) must be exactly [0, 1, 0], got {shown(single, [0.0, 1.0, 0.0])}"


@pytest.mark.grade("01.1", points=0.5)
@pytest.mark.parametrize("bad", [[], [-math.inf, -math.inf], [math.nan, 1.0], [1.0, math.inf]],
                         ids=["empty", "all-masked", "nan", "plus-inf"])
def test_rows_without_a_distribution_raise_value_error(impl, bad):
    with refuses(ValueError, f"softmax({show(bad)}): {why_no_distribution(bad)}"):
        impl.softmax(bad)


@pytest.mark.grade("01.1", points=0.5)
@pytest.mark.parametrize("bad", [[1.0, math.nan], [-math.inf, math.nan, 2.0], [math.nan], [0.0, -math.inf, math.inf]],
                         ids=["nan-last", "nan-after-masked", "only-nan", "plus-inf-after-masked"])
def test_nan_or_plus_inf_anywhere_raises(impl, bad):
    """Every entry is checked, not only the first or the maximum (max([1.0, nan]) is 1.0: NaN hides from it)."""
    case = f"softmax({show(bad)}) has a NaN or +inf logit (check every entry, not only the first or the max)"
    with refuses(ValueError, case):
        impl.softmax(bad)


@pytest.mark.grade("01.1", points=1)
def test_any_sequence_of_logits_and_a_single_logit(impl):
    # a tuple is a sequence too; the result is a new list. Within 1e-12 (the docstring's tolerance: a log-sum-exp
    # softmax returns 0.49999999999999994 here), except the masked weight, which must be exactly 0.
    expect_close(impl.softmax((2.0, 2.0)), [0.5, 0.5], "softmax of the tuple (2, 2)", TOL, axes=("weight",))
    expect_close(impl.softmax([-1e300]), [1.0], "softmax([-1e300]) (one logit)", TOL, axes=("weight",))
    masked = impl.softmax([7.0, -math.inf])
    expect_close(masked, [1.0, 0.0], "softmax([7, -inf])", TOL, axes=("weight",))
    assert masked[1] == 0.0, f"softmax([7, -inf]): the masked weight must be exactly 0, got {show(masked[1])}"


@pytest.mark.grade("01.1", points=0.5)
@pytest.mark.parametrize("n, margin", [(2, 0.0), (16, 2.0), (1024, 5.0), (4096, 10.0)])
def test_noise_floor_matches_the_closed_form(impl, n, margin):
    weights = impl.softmax([margin] + [0.0] * (n - 1))
    what = f"softmax([{show(margin)}] + [0]×{n - 1}) (N={n}, margin m={show(margin)})"
    floor, want_floor = math.fsum(weights[1:]), (n - 1) / (n - 1 + math.exp(margin))
    assert abs(floor - want_floor) <= TOL, (f"{what}: the noise floor (the N − 1 irrelevant weights) must be "
                                            f"(N − 1)/(N − 1 + e^m) = {show(want_floor)}, "
                                            f"got {shown(floor, want_floor)}")
    signal, want_signal = weights[0], math.exp(margin) / (n - 1 + math.exp(margin))
    assert abs(signal - want_signal) <= TOL, \
        f"{what}: weight 0 must be e^m/(N − 1 + e^m) = {show(want_signal)}, got {shown(signal, want_signal)}"


# The docstring's whole domain: any finite float, or −inf (masked), in rows with at least one finite entry.
FINITE = st.floats(allow_nan=False, allow_infinity=False)
whole_rows = st.lists(st.one_of(FINITE, st.just(-math.inf)), min_size=1, max_size=30).filter(
    lambda row: max(row) > -math.inf)


def shifted_oracle(logits):
    """exp(z − m)/Σ exp(z − m) with m = max, summed exactly. z − m may round to −inf (1e308 − (−1e308)): weight 0,
    which is within 1e-12 of the true exp(−2e308)."""
    top = max(logits)
    exps = [math.exp(z - top) for z in logits]
    return [e / math.fsum(exps) for e in exps]


@pytest.mark.grade("01.1", points=1)
@PROPERTY
@given(whole_rows)
@example([1.7e308, -1.7e308, 0.0]).via("the widest spread: z − m overflows to −inf")
@example([-1e308, -1e308]).via("every logit hugely negative")
@example([5e-324, -5e-324, -math.inf]).via("subnormal logits")
def test_every_finite_row_works_however_far_out(impl, logits):
    """Any finite logits, out to ±1.8e308: the subtraction of the maximum must hold everywhere, not only near 0."""
    expect_close(impl.softmax(logits), shifted_oracle(logits), f"softmax({show(logits)})", TOL, axes=("weight",))


@pytest.mark.grade("01.1", points=1)
@settings(derandomize=True, max_examples=30, deadline=None)
@given(FINITE, st.integers(1, 30_000))
@example(700.0, 20_000).via("each exp(700) ≈ 1e304 is finite, their sum is not")
@example(709.5, 3).via("3·exp(709.5) overflows")
@example(-745.0, 2).via("each exp(−745) underflows to 0 without the shift")
def test_equal_logits_share_the_weight_in_rows_of_any_length(impl, value, n):
    """N equal logits give 1/N each for every finite value: a shift applied only to "large" rows leaves Σ exp(z)
    to overflow once N·exp(z) passes 1.8e308, however small each term."""
    expect_close(impl.softmax([value] * n), [1.0 / n] * n, f"softmax of {n} logits all equal to {show(value)}", TOL,
                 axes=("weight",))


# ---------------------------------------------------------------- the reference and the experiment


def test_reference_raises_config_error_with_a_one_line_message():
    with pytest.raises(ConfigError, match="entirely masked"):
        reference_softmax([-math.inf])
    with pytest.raises(ConfigError, match="NaN or \\+inf"):
        reference_softmax([math.inf, 0.0])


def test_naive_softmax_is_right_in_range_and_fails_outside_it():
    logits = [3.0, -1.0, 0.5]
    assert all(abs(a - b) <= 1e-15 for a, b in zip(lesson.naive_softmax(logits), reference_softmax(logits)))
    with pytest.raises(OverflowError):
        lesson.naive_softmax([1000.0, 999.0])
    with pytest.raises(ZeroDivisionError):  # every exp underflows to 0.0, so the sum is 0
        lesson.naive_softmax([-1000.0, -1001.0])


@pytest.fixture(scope="module")
def results():
    return lesson.run(progress=False)


def test_measured_noise_floor_is_the_closed_form_at_every_size_and_margin(results):
    for margin in results["margins"]:
        for n in results["sizes"]:
            measured = results["mass"][f"m{margin:g}"][str(n)]
            assert math.isclose(measured, lesson.closed_form_mass(n, margin), rel_tol=1e-12), (n, margin)
    for n in results["sizes"]:  # one irrelevant token's weight in the m = noisy_margin row
        expected = 1.0 / (n - 1 + math.exp(results["noisy_margin"]))
        assert math.isclose(results["per_token"][str(n)], expected, rel_tol=1e-12), n
    assert results["sizes"][-1] == 131072
    assert results["closed_form_max_rel_error"] < 1e-12


def test_noise_floor_rises_with_context_and_falls_with_margin(results):
    masses = results["mass"]
    for key, by_n in masses.items():
        values = [by_n[str(n)] for n in results["sizes"]]
        assert values == sorted(values) and values[0] < values[-1], key
    for n in results["sizes"]:
        values = [masses[f"m{m:g}"][str(n)] for m in results["margins"]]
        assert values == sorted(values, reverse=True), n


def test_noisy_irrelevant_logits_raise_the_floor_like_a_margin_cut_of_half_sigma_squared(results):
    for n in results["sizes"]:
        noisy, equal = results["noisy_mass"][str(n)], results["mass"][f"m{results['noisy_margin']:g}"][str(n)]
        if n >= 1024:
            assert noisy > equal, n  # Jensen: E[e^x] = e^{σ²/2} > 1 for x ~ N(0, σ²)
        if n >= 8192:  # the sum of N − 1 log-normals concentrates: relative spread ≈ 1.3/√N < 1.5% here
            assert math.isclose(noisy, results["noisy_mean_field"][str(n)], rel_tol=0.05), n


def test_half_mass_size_is_where_the_irrelevant_tokens_take_over(results):
    for margin in results["margins"][:3]:  # m = 15 would need a 3.3M-token row
        n = results["half_mass_n"][f"m{margin:g}"]
        assert lesson.irrelevant_mass([margin] + [0.0] * (n - 1)) > 0.5
        assert lesson.irrelevant_mass([margin] + [0.0] * (n - 2)) <= 0.5


def test_the_claimed_12_percent_arithmetic(results):
    e = results["seed002"]
    assert e["irrelevant_tokens"] == 127_999
    assert math.isclose(e["claimed_total"], 1.27999, rel_tol=1e-12) and e["claimed_total"] > 1.0
    assert math.isclose(e["tokens_for_claimed_total"], 12_000, rel_tol=1e-12)
    assert math.isclose(e["max_equal_per_token"], 1 / 127_999, rel_tol=1e-15)
    assert math.isclose(e["per_token_for_claimed_total"] * 127_999, 0.12, rel_tol=1e-12)
    assert math.isclose(e["margin_for_claimed_total"], math.log(127_999 * 0.88 / 0.12), rel_tol=1e-15)
    assert abs(e["measured_total_at_margin"] - 0.12) <= 1e-12  # measured on a real 128,000-logit row
    assert math.isclose(e["measured_per_token_at_margin"], e["per_token_for_claimed_total"], rel_tol=1e-12)


@pytest.mark.parametrize("store", [float, lesson.to_float32], ids=["float64", "float32"])
def test_underflow_gap_is_the_exact_boundary(store):
    gap = lesson.underflow_gap(store)
    assert store(reference_softmax([0.0, -gap])[1]) > 0.0
    assert store(reference_softmax([0.0, -math.nextafter(gap, math.inf)])[1]) == 0.0


def test_underflow_gaps_sit_at_the_smallest_subnormals():
    # float64's smallest subnormal is 2^−1074, float32's 2^−149; a weight rounds to 0 below half of it
    ln2 = math.log(2.0)
    assert 1074 * ln2 <= lesson.underflow_gap() <= 1075 * ln2
    assert 149 * ln2 <= lesson.underflow_gap(lesson.to_float32) <= 150 * ln2


def test_exp_overflow_threshold_is_log_of_the_largest_float():
    t = lesson.exp_overflow_threshold()
    math.exp(t)
    with pytest.raises(OverflowError):
        math.exp(math.nextafter(t, math.inf))
    assert math.isclose(t, math.log(sys.float_info.max), rel_tol=1e-15)


def test_stability_section(results):
    s = results["stability"]
    assert (s["naive_big"], s["naive_small"]) == ("OverflowError", "ZeroDivisionError")
    assert all(abs(a - b) <= 1e-15 for a, b in zip(s["stable_big"], s["stable_small"]))
    assert s["stable_masked"][1] == 0.0 and s["masked_logits"] == "[1, -inf, 2]"


def test_report_quotes_the_results(results):
    text = lesson.report(results)
    assert "128.0%" in text and "13.75" in text and "0.8561" in text
    # report uses only the results: rebuilt from their JSON form (what numbers.json stores) it prints the same text
    assert lesson.report(json.loads(json.dumps(results))) == text


def test_figure_is_written(results, tmp_path):
    pytest.importorskip("matplotlib")
    (path,) = lesson.figures(results, tmp_path)
    assert path.name == "01-irrelevant-mass.png" and path.stat().st_size > 10_000
