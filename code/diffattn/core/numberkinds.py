"""How far each number in outputs/numbers.json may move on another machine, declared once per lesson.

A lesson module declares `NUMBER_KINDS = {pattern: kind}`; a pattern is an fnmatch pattern over the dotted key inside
the lesson's results ('training.*.loss_last', 'seed.weights.*'); the first pattern that matches wins, and a number that
no pattern matches is Exact. Three kinds:

    Exact()                        integers, strings, booleans, and floats from pure-Python arithmetic: the same
                                   everywhere (floats to 1e-9 relative, the most a platform's libm moves our sums)
    Stable(abs=…, rel=…)           a float that moves between CPU kernel paths, thread counts and torch builds by at
                                   most max(abs, rel·|x|); a lesson may quote only digits that survive that move
                                   (an integer, e.g. a count of right answers, moves by whole steps)
    Bound(below=…) / Bound(at_least=…)
                                   rounding-level: an fp32 error of 1e-7, a cached-vs-full gap, a count decided by
                                   near-ties. Its value is never quoted; lessons quote the bound, which the code asserts

One rule set serves the freshness test, the cross-kernel test, `lessons check|sync` and `make course`, which keeps the
saved results when every fresh number agrees with them under its kind, so a run on another CPU rewrites nothing.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Union

EXACT_FLOAT_REL = 1e-9


@dataclass(frozen=True)
class Exact:
    def agrees(self, fresh: Any, saved: Any) -> bool:
        if isinstance(fresh, float) and isinstance(saved, (int, float)) and not isinstance(saved, bool):
            return math.isclose(fresh, saved, rel_tol=EXACT_FLOAT_REL, abs_tol=1e-300)
        return type(fresh) is type(saved) and fresh == saved

    def describe(self) -> str:
        return "exact"


@dataclass(frozen=True)
class Stable:
    abs: float = 0.0
    rel: float = 0.0

    def __post_init__(self) -> None:
        if self.abs < 0 or self.rel < 0 or self.abs == self.rel == 0:
            raise ValueError("Stable needs a positive abs or rel tolerance")

    def tolerance(self, value: float) -> float:
        return max(self.abs, self.rel * abs(value))

    def agrees(self, fresh: Any, saved: Any) -> bool:
        return _is_real(fresh) and _is_real(saved) and abs(fresh - saved) <= self.tolerance(saved)

    def describe(self) -> str:
        parts = ([f"±{self.abs:g}"] if self.abs else []) + ([f"±{self.rel:g} relative"] if self.rel else [])
        return "stable to " + " or ".join(parts)


@dataclass(frozen=True)
class Bound:
    below: float | None = None
    at_least: float | None = None

    def __post_init__(self) -> None:
        if (self.below is None) == (self.at_least is None):
            raise ValueError("Bound takes exactly one of below= or at_least=")

    @property
    def limit(self) -> float:
        return self.below if self.below is not None else self.at_least  # type: ignore[return-value]

    def holds(self, value: Any) -> bool:
        if not _is_real(value):
            return False
        return value < self.below if self.below is not None else value >= self.at_least  # type: ignore[operator]

    def agrees(self, fresh: Any, saved: Any) -> bool:
        return self.holds(fresh) and self.holds(saved)

    def describe(self) -> str:
        return f"below {self.below:g}" if self.below is not None else f"at least {self.at_least:g}"


Kind = Union[Exact, Stable, Bound]
EXACT = Exact()


def _is_real(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def kind_of(kinds: Mapping[str, Kind], key: str) -> Kind:
    """The kind of `key` ('training.baseline.loss_last', without the lesson number)."""
    return next((kind for pattern, kind in kinds.items() if fnmatch.fnmatchcase(key, pattern)), EXACT)


def leaves(tree: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) for every number, string or boolean in a results tree; list items are numbered."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            yield from leaves(v, f"{prefix}.{i}" if prefix else str(i))
    else:
        yield prefix, tree


def _shape(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _shape(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_shape(v) for v in tree]
    return None


def disagreements(fresh: Any, saved: Any, kinds: Mapping[str, Kind], lesson: str = "") -> list[str]:
    """Every number of `fresh` that `saved` does not match under its kind, as readable lines (empty: they agree)."""
    where = f"{lesson}." if lesson else ""
    if _shape(fresh) != _shape(saved):
        return [f"{lesson or 'results'}: the results have different keys or list lengths than the saved ones"]
    problems = []
    saved_leaves = dict(leaves(saved))
    for key, value in leaves(fresh):
        kind = kind_of(kinds, key)
        if not kind.agrees(value, saved_leaves[key]):
            problems.append(f"{where}{key}: {value!r} now vs {saved_leaves[key]!r} saved ({kind.describe()})")
    return problems


def keep_saved_if_agreeing(fresh: Any, saved: Any, kinds: Mapping[str, Kind]) -> Any:
    """`saved` when every fresh number agrees with it under its kind (another CPU's last digits change no file),
    else `fresh`."""
    if saved is not None and not disagreements(fresh, saved, kinds):
        return saved
    return fresh


def edge_cases(results: Any, kinds: Mapping[str, Kind]) -> Iterator[Any]:
    """Copies of `results` with every non-exact number moved to the edges its kind allows (all up, all down).

    A report or a quoted digit that reads the same on every copy reads the same on every CPU the kinds describe.
    """
    for direction in (+1, -1):
        yield _moved(results, kinds, direction, "")


def _moved(tree: Any, kinds: Mapping[str, Kind], direction: int, prefix: str) -> Any:
    if isinstance(tree, dict):
        return {k: _moved(v, kinds, direction, f"{prefix}.{k}" if prefix else str(k)) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_moved(v, kinds, direction, f"{prefix}.{i}" if prefix else str(i)) for i, v in enumerate(tree)]
    kind = kind_of(kinds, prefix)
    if isinstance(kind, Stable) and _is_real(tree):
        if isinstance(tree, int):  # a count moves by whole steps and stays an int
            return tree + direction * math.floor(kind.tolerance(tree))
        return tree + direction * kind.tolerance(tree) * (1 - 1e-9)
    if isinstance(kind, Bound) and _is_real(tree):
        if kind.below is not None:  # anywhere in [0, below) for an error; 0 or just under the bound
            return kind.below * (1 - 1e-6) if direction > 0 else 0.0
        return kind.at_least if direction < 0 else tree
    return tree


def quoted_text(kind: Kind, text: str, saved: Any, formatter: Callable[[float], str]) -> tuple[str, str | None]:
    """What a tagged number must read as in a lesson, and a complaint when its form cannot be right.

    `formatter(value)` formats a value the way `text` is written. Exact and Stable numbers quote the saved value;
    a Stable one must quote only digits that survive its tolerance. A Bound number quotes the bound.
    """
    if isinstance(kind, Bound):
        return formatter(kind.limit), None
    expected = formatter(saved)
    if isinstance(kind, Stable) and _is_real(saved):
        tol = kind.tolerance(saved)
        if {formatter(saved - tol), formatter(saved + tol)} != {expected}:
            return expected, f"quotes digits that move on another CPU ({kind.describe()}): quote fewer"
    return expected, None
