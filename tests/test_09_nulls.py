"""Lesson 09: the null models beside every retrieval accuracy, the `rebind` task, and the paired tests (stats).

A null is what a rule that never matches the asked key scores on the same queries; the tests pin each rule on
examples small enough to count by hand, then check properties on many random examples of every task.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("scipy")

from hypothesis import given, settings, strategies as st  # noqa: E402

from diffattn.data import nulls, retrieval as R  # noqa: E402
from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.eval import needle_accuracy as retrieval  # noqa: E402
from diffattn.core.stats import clustered_difference, t_interval  # noqa: E402

pytestmark = pytest.mark.torch


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def needles(seed: int, **options) -> R.Example:
    return R.needle_example(gen(seed), 64, **options)


def test_one_needle_is_answered_by_copying_without_a_key():
    e = needles(0, n_needles=1, n_queries=1)
    p = nulls.example_nulls(e)
    assert p["copy_any"] == p["copy_unanswered"] == p["copy_latest"] == [1.0]
    assert p["chance"] == [0.1]


def test_two_needles_with_different_values_halve_the_copy_rule_and_the_second_query_is_free():
    for seed in range(50):  # find an example whose two values differ
        e = needles(seed, n_needles=2, n_queries=2)
        if e.records[0].value != e.records[1].value:
            break
    p = nulls.example_nulls(e)
    assert p["copy_any"] == [0.5, 0.5]
    assert p["copy_unanswered"] == [0.5, 1.0]  # one value is left once the first is answered
    latest = e.records[-1].value
    assert p["copy_latest"] == [float(q.value == latest) for q in e.queries]
    assert p["any_binding"] == [1.0, 1.0]


def test_multi_byte_values_lower_chance_per_value():
    e = needles(3, n_needles=4, n_queries=2, value_len=3)
    assert nulls.example_nulls(e)["chance"] == [pytest.approx(1e-3)] * 2


def test_rebind_latest_binding_answers_and_the_earlier_one_shares_the_key():
    for seed in range(30):
        e = R.rebind_example(gen(seed), 48, n_keys=6, n_rebinds=3, n_queries=2)
        tokens = e.tokens
        for r in e.records:  # every record is the bytes it claims
            assert bytes(tokens[r.span[0]:r.span[1]]) == r.key + r.value
        for q in e.queries:
            bindings = [r for r in e.records if r.key == q.key]
            assert len(bindings) == 2 and bindings[0].value != bindings[1].value
            assert q.value == bindings[-1].value and q.record == bindings[-1].span
            assert tokens[q.answer[0] + 1] == q.value[0]
        assert nulls.example_nulls(e)["any_binding"] == [0.5, 0.5]
        asked = {q.record for q in e.queries}
        assert asked.isdisjoint(e.distractors) and len(e.distractors) == len(e.records) - len(asked)


@pytest.mark.parametrize("options,message", [
    ({"n_queries": 5, "n_rebinds": 4}, "n_queries <= n_rebinds"),
    ({"n_rebinds": 9, "n_keys": 8}, "n_rebinds <= n_keys"),
    ({"n_keys": 27}, "n_keys"),
])
def test_rebind_options_that_leave_the_null_undefined_fail_in_one_line(options, message):
    with pytest.raises(ConfigError, match=message):
        R.rebind_example(gen(0), 64, **options)


def test_rebind_too_short_a_context_fails():
    with pytest.raises(ConfigError, match="too short"):
        R.rebind_example(gen(0), 20)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), task=st.sampled_from(["needles", "mqar", "rebind"]))
def test_every_null_is_a_probability_and_copying_any_record_finds_the_own_value(seed, task):
    e = R.examples(task, 1, 96, gen(seed))[0]
    p = nulls.example_nulls(e)
    n = len(e.records)
    for rule in nulls.RULES:
        assert len(p[rule]) == len(e.queries) and all(0.0 <= x <= 1.0 for x in p[rule])
    for x in p["copy_any"]:  # the asked key's own record is one of the n
        assert x >= 1 / n - 1e-12
    expected_binding = 0.5 if task == "rebind" else 1.0
    assert p["any_binding"] == [expected_binding] * len(e.queries)
    assert p["copy_unanswered"][0] == p["copy_any"][0]  # nothing is answered before the first query


def test_best_key_free_rule_never_picks_the_key_matching_one():
    p = {"copy_any": [0.2], "copy_unanswered": [0.3], "copy_latest": [0.0], "chance": [0.1], "any_binding": [1.0]}
    assert nulls.best_key_free(p) == "copy_unanswered"


def fake_run(flags, probs_latest):
    """A run_batches result: one example per query, copy_latest the best null."""
    n = len(flags)
    null = {rule: [0.0] * n for rule in nulls.RULES}
    null["copy_latest"] = probs_latest
    return {"flags": flags, "clusters": list(range(n)), "nulls": null, "answered": sum(flags), "asked": n,
            "answer_loss": 1.0}


def test_a_model_that_only_copies_the_latest_value_does_not_retrieve():
    latest = [1.0, 0.0] * 50
    r = retrieval.summarise(fake_run([bool(x) for x in latest], latest))
    assert r["null_rule"] == "copy_latest" and r["null_best"] == 0.5 and r["accuracy"] == 0.5
    assert r["vs_null"]["difference"] == 0.0 and not r["vs_null"]["above"]


def test_a_model_that_answers_everything_beats_the_null():
    r = retrieval.summarise(fake_run([True] * 100, [1.0, 0.0] * 50))
    assert r["vs_null"]["above"] and r["vs_null"]["difference"] == 0.5


def test_t_interval_matches_the_textbook_value():
    r = t_interval([1.0, 2.0, 3.0])
    half = 4.302652729911275 / math.sqrt(3)  # t_{0.975, 2}
    assert r["mean"] == 2.0 and r["std"] == 1.0
    assert r["ci95"] == pytest.approx([2.0 - half, 2.0 + half], rel=1e-9)
    assert t_interval([0.5])["ci95"] is None


def test_clustered_difference_is_exact_where_nothing_varies_and_deterministic():
    assert clustered_difference([1.0] * 6, [1.0] * 6, [0, 0, 1, 1, 2, 2])["ci95"] == [0.0, 0.0]
    a, b = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0], [0.0] * 8
    first, second = (clustered_difference(a, b, [0, 0, 1, 1, 2, 2, 3, 3]) for _ in range(2))
    assert first == second and first["ci95"][0] <= first["difference"] <= first["ci95"][1]


def test_clustering_widens_the_interval_when_the_queries_of_one_example_agree():
    """Two identical queries per example carry one example's information, not two: the interval must say so."""
    flags = [float(i % 3 == 0) for i in range(60) for _ in range(2)]
    together = clustered_difference(flags, [0.0] * 120, [i for i in range(60) for _ in range(2)])
    apart = clustered_difference(flags, [0.0] * 120, list(range(120)))
    width = lambda r: r["ci95"][1] - r["ci95"][0]  # noqa: E731
    assert width(together) > 1.25 * width(apart)


def test_clustered_difference_rejects_mismatched_lengths():
    with pytest.raises(ValueError):
        clustered_difference([1.0], [1.0, 0.0], [0, 1])


def test_clustered_difference_is_the_same_whatever_the_last_bits_of_its_inputs():
    """The nulls are fractions: 1/3 computed two ways differs in the last bit, and the interval must not care (so
    that another CPU, adding in another order, prints the same digits)."""
    flags = [float(i % 4 == 0) for i in range(90)]
    third, also_third = [1 / 3] * 90, [(1 - 2 / 3)] * 90
    assert third != also_third
    assert clustered_difference(flags, third, [i // 2 for i in range(90)]) == clustered_difference(
        flags, also_third, [i // 2 for i in range(90)])
