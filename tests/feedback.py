"""Failure messages for the graded tests: what was expected and what came back, in the exercise's terms.

A student reads one line per failed test (`make grade`), so every graded assertion says what it checked:
`expect_close(got, want, "V1 weights (λ=0.8, causal)", axes=("query", "key"))` fails with
"V1 weights (λ=0.8, causal): query 1, key 5: expected 0, got 0.0834 (difference 0.0834 > tolerance 1e-12)", and
`with refuses(ValueError, "λ = nan"):` fails with "mistake: λ = nan: must raise ValueError; nothing was raised".
Numbers are shown with 6 significant digits, long lists cut short: enough to see the mistake, short enough to read.

A message that names the mistake itself, not only a wrong number, starts with `mistake(...)`'s marker: the grade
table shows such a failure before the others of its part (diffattn.grading.report). `refuses` marks its own: a call
that should have raised and did not is exactly the mistake. Mark the check that tells a concept apart (the test that
makes one head louder, not the one that compares values), so that a student reads the concept first.
tests/test_feedback.py checks that every assertion in a graded test carries a message and that these helpers fail
exactly when they should.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

from diffattn.grading.report import MISTAKE

SHOWN = 6  # list items shown before "…"


def mistake(what: str) -> str:
    """An assertion message that names the mistake (the grade table shows it first): `mistake("normalise over each
    head's 2d channels, not d_model; head 1, …")`."""
    return f"{MISTAKE}{what}"


def show(value: Any) -> str:
    """A compact rendering: floats to 6 significant digits, lists and tensors cut after a few items."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        items = ", ".join(show(v) for v in value[:SHOWN]) + (", …" if len(value) > SHOWN else "")
        return f"[{items}]" if isinstance(value, list) else f"({items})"
    if type(value).__name__ == "Tensor":
        flat = value.detach().flatten()[:SHOWN].tolist()
        return f"tensor of shape {tuple(value.shape)}, {str(value.dtype).replace('torch.', '')}, starting {show(flat)}"
    return repr(value)


def _place(index: tuple[int, ...], axes: Sequence[str]) -> str:
    """"query 1, key 5" with axes ("query", "key"); "index 1, 5" for the axes left unnamed."""
    named = [f"{name} {i}" for name, i in zip(axes, index)]
    rest = index[len(axes):]
    return ", ".join(named + ([f"index {', '.join(map(str, rest))}"] if rest else []))


def _leaves(value: Any, index: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], Any]]:
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _leaves(item, (*index, i))
    else:
        yield index, value


def _shape(value: Any) -> tuple[int, ...]:
    if type(value).__name__ == "Tensor":
        return tuple(value.shape)
    if isinstance(value, (list, tuple)):
        inner = {_shape(v) for v in value}
        return (len(value), *(inner.pop() if len(inner) == 1 else ()))
    return ()


def _far(got: float, want: float, tol: float, rel: float) -> bool:
    if math.isnan(want):
        return not math.isnan(got)
    if math.isinf(want) or math.isinf(got):
        return got != want
    return not abs(got - want) <= tol + rel * abs(want)  # `not <=` so that a NaN is far


def first_difference(got: Any, want: Any, tol: float = 0.0, rel: float = 0.0,
                     axes: Sequence[str] = ()) -> str | None:
    """None when `got` matches `want` (nested lists of numbers, or tensors) within tol + rel·|want| everywhere;
    else where and how they first differ: a shape, or the first entry, named by `axes` ("query", "key", ...)."""
    if _shape(got) != _shape(want):
        return f"expected shape {_shape(want)}, got shape {_shape(got)} ({show(got)})"
    if type(want).__name__ == "Tensor":
        got, want = got.detach().double().tolist(), want.detach().double().tolist()
    for (index, g), (_, w) in zip(_leaves(got), _leaves(want)):
        if _far(float(g), float(w), tol, rel):
            where = f"{_place(index, axes)}: " if index else ""
            bound = f"tolerance {tol:g}" + (f" + {rel:g}·|expected|" if rel else "")
            gap = f" (difference {abs(g - w):.3g} > {bound})" if math.isfinite(g - w) else ""
            return f"{where}expected {show(float(w))}, got {show(float(g))}{gap}"
    return None


def expect_close(got: Any, want: Any, what: str, tol: float = 0.0, rel: float = 0.0,
                 axes: Sequence[str] = ()) -> None:
    """Fail with "<what>: <first difference>" unless got matches want (see first_difference)."""
    difference = first_difference(got, want, tol, rel, axes)
    if difference is not None:
        raise AssertionError(f"{what}: {difference}")


@contextlib.contextmanager
def refuses(error: type[BaseException], case: str, mentioning: str | None = None) -> Iterator[None]:
    """Like pytest.raises(error), but a call that raises nothing fails with "mistake: <case>: must raise <error>;
    nothing was raised" (a mistake the table shows first), and with `mentioning` the error's message must contain
    that text. Any other exception propagates unchanged, so its own message reaches the student."""
    try:
        yield
    except error as raised:
        if mentioning is not None and mentioning not in str(raised):
            raise AssertionError(f"{case}: the {error.__name__} must say {mentioning!r}; it said {str(raised)!r}")
        return
    raise AssertionError(mistake(f"{case}: must raise {error.__name__}; nothing was raised"))
