"""The retrieval tasks (diffattn.data.retrieval): shapes, determinism, answers that are really in the haystack,
near-duplicate distractors, needle depth, and one-line errors for impossible settings."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings, strategies as st  # noqa: E402

from diffattn.data import retrieval as R  # noqa: E402
from diffattn.core.errors import ConfigError  # noqa: E402

pytestmark = pytest.mark.torch
FEW = settings(max_examples=25, deadline=None)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("task", R.TASKS)
def test_task_batch_shapes_vocab_and_determinism(task):
    inputs, targets = R.task_batch(task, 5, 96, gen(3))
    assert inputs.shape == targets.shape == (5, 96) and inputs.dtype == targets.dtype == torch.long
    assert 0 <= int(inputs.min()) and int(inputs.max()) < 256
    again = R.task_batch(task, 5, 96, gen(3))
    assert torch.equal(inputs, again[0]) and torch.equal(targets, again[1])
    assert not torch.equal(inputs, R.task_batch(task, 5, 96, gen(4))[0])
    # next-token targets: wherever a target is set, it is the following input
    set_ = targets != R.IGNORE
    assert set_.any(dim=1).all()
    assert torch.equal(targets[:, :-1][set_[:, :-1]], inputs[:, 1:][set_[:, :-1]])


@FEW
@given(seed=st.integers(0, 10_000), seq_len=st.integers(40, 160), layout=st.sampled_from(R.TABLE2),
       depth=st.one_of(st.none(), st.floats(0, 1)), near=st.booleans(), key_len=st.integers(1, 3))
def test_needles_answer_is_the_value_of_the_one_record_with_that_key(seed, seq_len, layout, depth, near, key_len):
    n, r = layout
    if R.needles_length(n, r, key_len, 2) > seq_len + 1:
        return
    e = R.needle_example(gen(seed), seq_len, n, r, depth, key_len=key_len, value_len=2, near_duplicates=near)
    text = e.text()
    assert len(e.tokens) == seq_len + 1 and len(e.queries) == r and len(e.distractors) == n - r
    records = [text[s:t] for s, t in [q.record for q in e.queries] + list(e.distractors)]
    keys = [rec[1:1 + key_len] for rec in records]
    assert len(set(keys)) == n, "every key appears in exactly one record"
    assert text.count("#") == n and text.count("?") == r
    for q in e.queries:
        assert text[q.record[0]:q.record[1]] == f"#{q.key.decode()}={q.value.decode()}"
        assert e.targets[q.answer[0]:q.answer[1]] == list(q.value)
        assert text[q.answer[0] - key_len - 1:q.answer[0] + 1] == f"?{q.key.decode()}="
        assert q.record[1] <= e.context_end <= q.answer[0]
    assert sum(t != R.IGNORE for t in e.targets) == 2 * r
    haystack = [c for i, c in enumerate(text[:e.context_end])
                if not any(s <= i < t for s, t in [q.record for q in e.queries] + list(e.distractors))]
    assert set(haystack) <= set(R.FILLER.decode())
    if near:  # each distractor key differs from some asked key in exactly one letter
        asked = [q.key.decode() for q in e.queries]
        for key in keys[r:]:
            assert any(sum(a != b for a, b in zip(key, k)) == 1 for k in asked), (key, asked)


@pytest.mark.parametrize("depth", [0.0, 0.5, 1.0])
def test_depth_places_the_asked_records(depth):
    for seed in range(5):
        e = R.needle_example(gen(seed), 128, 4, 2, depth, key_len=2, value_len=2)
        filler_before = [q.record[0] - sum(t - s for s, t in e.distractors + tuple(x.record for x in e.queries)
                                           if t <= q.record[0]) for q in e.queries]
        filler_len = e.context_end - R.needles_length(4, 0, 2, 2)
        assert all(f == round(depth * filler_len) for f in filler_before), (depth, filler_before, e.text())


def test_training_draws_the_table2_layouts():
    seen = {(len(e.queries) + len(e.distractors), len(e.queries)) for e in R.examples("needles", 80, 64, gen(0))}
    assert seen == set(R.TABLE2)


def test_mqar_pairs_and_queries():
    e = R.mqar_example(gen(1), 48, n_pairs=6, n_queries=3)
    text = e.text()
    assert text[e.context_end] == "|" and len(e.queries) == 3
    for q in e.queries:
        assert text[q.record[0]:q.record[1]] == (q.key + q.value).decode()
        assert text[q.answer[0]] == q.key.decode() and e.targets[q.answer[0]] == q.value[0]


@pytest.mark.parametrize("task, seq_len, options, message", [
    ("needles", 20, {"n_needles": 6, "n_queries": 2}, "too short"),
    ("needles", 64, {"n_needles": 2, "n_queries": 3}, "n_queries"),
    ("needles", 64, {"depth": 1.5}, "depth"),
    ("needles", 64, {"colour": 1}, "colour"),
    ("mqar", 64, {"n_pairs": 30}, "n_pairs"),
    ("mqar", 10, {}, "too short"),
    ("haystack", 64, {}, "task must be"),
])
def test_bad_settings_raise_one_line_errors(task, seq_len, options, message):
    with pytest.raises(ConfigError, match=message) as info:
        R.task_batch(task, 2, seq_len, gen(0), **options)
    assert "\n" not in str(info.value)
