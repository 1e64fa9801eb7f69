"""The seam between graded tests and an implementation (the CS336 adapter pattern).

Graded tests never import the reference or the exercises directly: they call `impl.<name>(...)`, where `impl` is
chosen with `pytest --impl` (or `diffattn grade --impl`):

    --impl reference           diffattn's own implementation (the default: `make test`)
    --impl exercises           the student's files in exercises/ (`make grade`)
    --impl tests.wrong.<mod>   a known-wrong implementation: the module's OVERRIDES replace some reference functions;
                               tests/test_graders_reject_wrong.py proves each one loses the points it should.

The rubric (EXERCISES, REFERENCE, RETURNS) is declared in diffattn.grading.rubric; RETURNS is the type each function's
docstring promises, and every call is checked against it (exact built-in types, exactly
torch.Tensor, or exactly diffattn's DecodeStep of two ints, so a returned object cannot carry code that makes a
comparison pass).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any, Callable

from diffattn.grading.hooks import AfterCall
from diffattn.grading.rubric import REFERENCE, RETURNS, exercise_paths, resolve


def _is_float(x: Any) -> bool:
    return type(x) is float


def _is_int(x: Any) -> bool:
    return type(x) is int


def _is_number(x: Any) -> bool:
    return type(x) in (int, float)


def _list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda x: type(x) is list and all(check(e) for e in x)


def _is_decode_step(x: Any) -> bool:
    """diffattn.pure.accounting.DecodeStep itself (a named pair of exact ints), never a look-alike."""
    accounting = sys.modules.get("diffattn.pure.accounting")
    return accounting is not None and type(x) is accounting.DecodeStep and all(type(v) is int for v in x)


def _is_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and type(x) is torch.Tensor


CHECKS: dict[str, Callable[[Any], bool]] = {
    "float": _is_float,
    "int": _is_int,
    "number": _is_number,
    "number|None": lambda x: x is None or _is_number(x),
    "float|None": lambda x: x is None or _is_float(x),
    "list[float]": _list_of(_is_float),
    "list[int]": _list_of(_is_int),
    "list[number]": _list_of(_is_number),
    "list[list[float]]": _list_of(_list_of(_is_float)),
    "tensor": _is_tensor,
    "DecodeStep": _is_decode_step,
}


def _describe(x: Any) -> str:
    if type(x) is list:
        inner = sorted({_describe(e) for e in x[:50]})
        return f"list[{' | '.join(inner)}]" if inner else "list[]"
    return type(x).__qualname__


class Implementation:
    """Resolves names lazily, so a stdlib-only test run never imports torch; checks what every call returns."""

    def __init__(self, spec: str, after_call: AfterCall | None = None):
        self.spec = spec
        self._after_call = after_call
        self._overrides: dict[str, Callable[..., Any]] = {}
        self._paths = dict(REFERENCE)
        self._resolved: dict[str, Callable[..., Any]] = {}
        if spec == "exercises":
            self._paths.update(exercise_paths())
        elif spec != "reference":
            self._overrides = dict(importlib.import_module(spec).OVERRIDES)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._overrides and name not in self._paths:
            raise AttributeError(f"no adapter for {name!r}: add it to the rubric, diffattn/grading/rubric.py")
        if name not in self._resolved:
            self._resolved[name] = self._overrides.get(name) or resolve(self._paths[name])
        function, promise, after_call = self._resolved[name], RETURNS.get(name), self._after_call

        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                result = function(*args, **kwargs)
            except BaseException as error:
                if after_call is not None:
                    after_call(name, error)
                raise
            if after_call is not None:
                after_call(name, None)
            if promise is not None and not CHECKS[promise](result):
                raise TypeError(f"{name} returned {_describe(result)}; its docstring promises {promise}")
            return result

        return checked

    def __repr__(self) -> str:
        return f"Implementation({self.spec!r})"
