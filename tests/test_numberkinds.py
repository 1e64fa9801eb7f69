"""diffattn.core.numberkinds: the rules every lesson-number check follows (freshness, portability, lesson text, course)."""

from __future__ import annotations

from pathlib import Path

import pytest

from diffattn.lessons.quotes import check_text, format_like
from diffattn.core.numberkinds import (Bound, Exact, Stable, disagreements, edge_cases, keep_saved_if_agreeing, kind_of,
                                  quoted_text)

KINDS = {"loss.*": Stable(rel=0.03), "gap": Bound(below=1e-5), "copies": Bound(at_least=0.875)}
SAVED = {"loss": {"last": 0.0169, "steps": 60}, "gap": 2.3e-6, "copies": 0.96875, "params": 99648}


def test_first_matching_pattern_wins_and_unnamed_numbers_are_exact():
    assert kind_of(KINDS, "loss.last") == Stable(rel=0.03)
    assert kind_of({"a.*": Bound(below=1.0), "a.b": Stable(abs=1.0)}, "a.b") == Bound(below=1.0)
    assert kind_of(KINDS, "params") == Exact()


def test_numbers_within_their_kind_agree():
    fresh = {"loss": {"last": 0.0172, "steps": 60}, "gap": 9e-6, "copies": 0.984375, "params": 99648}
    assert disagreements(fresh, SAVED, KINDS) == []
    assert keep_saved_if_agreeing(fresh, SAVED, KINDS) is SAVED


@pytest.mark.parametrize("key, value", [("loss.last", 0.0180), ("loss.steps", 62), ("gap", 2e-5), ("gap", float("nan")),
                                        ("copies", 0.85), ("params", 99649), ("params", 99648.5)])
def test_a_number_outside_its_kind_is_reported(key, value):
    fresh = {"loss": dict(SAVED["loss"]), **{k: v for k, v in SAVED.items() if k != "loss"}}
    if "." in key:
        fresh["loss"][key.split(".")[1]] = value
    else:
        fresh[key] = value
    problems = disagreements(fresh, SAVED, KINDS, "07")
    assert len(problems) == 1 and problems[0].startswith(f"07.{key}:")
    assert keep_saved_if_agreeing(fresh, SAVED, KINDS) is fresh


def test_a_changed_structure_is_reported():
    assert disagreements({"loss": {"last": 0.0169}}, SAVED, KINDS)


def test_edge_cases_move_floats_to_the_limits_of_their_kind_and_nothing_else():
    up, down = edge_cases(SAVED, KINDS)
    assert up["loss"]["last"] == pytest.approx(0.0169 * 1.03) and down["loss"]["last"] == pytest.approx(0.0169 * 0.97)
    assert up["params"] == down["params"] == 99648  # Exact: never moved
    moved = list(edge_cases({"answered": 300}, {"answered": Stable(abs=40.5)}))
    assert [m["answered"] for m in moved] == [340, 260] and all(type(m["answered"]) is int for m in moved)
    assert Bound(below=1e-5).holds(up["gap"]) and down["gap"] == 0.0
    assert down["copies"] == 0.875 and up["copies"] == SAVED["copies"]


def test_lesson_text_must_quote_only_digits_that_survive_and_bounds_not_values():
    def tag(text: str, key: str) -> str:  # "88%" quotes 0.875 as a percentage
        return f"{text}<!--n 07.{key}-->\n"

    numbers = {"07": SAVED}

    def problems(source: str):
        return check_text(Path("x.md"), source, numbers, lambda args: "", lambda n: KINDS)

    assert not problems(tag("0.02", "loss.last") + tag("1e-05", "gap") + tag("88%", "copies"))
    too_many_digits = problems(tag("0.0169", "loss.last"))
    assert len(too_many_digits) == 1 and "quote fewer" in str(too_many_digits[0])
    assert problems(tag("2.3e-06", "gap"))  # the measured gap is rounding: only its bound may be quoted


def test_quoted_text_formats_bounds_and_flags_unstable_digits():
    fmt = lambda v: format_like("0.00", "", v)  # noqa: E731
    assert quoted_text(Bound(below=0.05), "0.05", 0.0123, fmt) == ("0.05", None)
    assert quoted_text(Stable(abs=1e-3), "0.02", 0.0169, fmt) == ("0.02", None)
    assert quoted_text(Stable(abs=1e-2), "0.02", 0.0169, fmt)[1] is not None


@pytest.mark.parametrize("bad", [dict(), dict(abs=-1.0)])
def test_stable_needs_a_positive_tolerance(bad):
    with pytest.raises(ValueError):
        Stable(**bad)


def test_bound_takes_exactly_one_limit():
    with pytest.raises(ValueError):
        Bound()
    with pytest.raises(ValueError):
        Bound(below=1.0, at_least=0.0)
