"""Does an exercise file use the reference solution it is meant to rebuild?

The reference modules of an exercise are those that define its functions' reference implementations
(the rubric's REFERENCE, e.g. diffattn.pure.snr for ex03). Other diffattn modules are allowed helpers (ex02 may
call diffattn.pure.softmax.softmax; ex07 may call diffattn.nn.kernels.attention). Four findings, each one line:

* the file imports a reference module, or a name from one (read from its source);
* a name in the loaded module *is* a reference function (a re-export);
* the submission called a reference function directly while being graded (`Tripwires`, installed before the import);
* a function's body is the reference's body, statement for statement (a pasted copy).

Findings are reported in the grade's output; `--forbid-reference-imports` turns any of them into 0 points.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import sys
import textwrap
import types
from pathlib import Path
from typing import Any, Callable


def reference_modules(functions: dict[str, Callable[..., Any]], paths: dict[str, str]) -> set[str]:
    """Modules holding the reference of each function: where REFERENCE points, and where the function is defined."""
    named = {path.split(":")[0] for path in paths.values()}
    return named | {function.__module__ for function in functions.values()}


class Tripwires:
    """Wraps every function of the reference modules so that a call coming straight from `submission_file` is noted."""

    def __init__(self, modules: set[str], submission_file: str):
        self.calls: list[str] = []
        self.originals: dict[int, str] = {}
        for name in sorted(modules):
            module = importlib.import_module(name)
            for attr, value in list(vars(module).items()):
                if isinstance(value, types.FunctionType) and value.__module__ == name:
                    setattr(module, attr, self._wrap(value, f"{name}.{attr}", submission_file))
                    self.originals[id(value)] = f"{name}.{attr}"

    def _wrap(self, function: types.FunctionType, label: str, submission_file: str) -> Callable[..., Any]:
        calls, caller = self.calls, sys._getframe

        @functools.wraps(function)
        def tripwire(*args: Any, **kwargs: Any) -> Any:
            if caller(1).f_code.co_filename == submission_file and label not in calls:
                calls.append(label)
            return function(*args, **kwargs)

        tripwire.__tripwire_label__ = label  # type: ignore[attr-defined]
        self.originals[id(tripwire)] = label
        return tripwire

    def label(self, value: Any) -> str | None:
        return self.originals.get(id(value))


def imported_references(source: str, modules: set[str]) -> list[str]:
    """`import M` / `from M import n` lines of `source` that reach a reference module (or a function defined there)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module, name in names:
            target = _target_module(module, name)
            if target in modules:
                what = f"{module}.{name}" if name else module
                found.append(f"line {node.lineno} imports {what} (reference module {target})")
    return found


def _target_module(module: str, name: str | None) -> str | None:
    """The module an import statement really reaches: M itself, M.name when that is a module, or where name is defined."""
    if name is None:
        return module
    try:
        value = getattr(importlib.import_module(module), name, None)
    except Exception:  # an import that fails in the submission fails there too; nothing to report here
        return None
    if isinstance(value, types.ModuleType):
        return value.__name__
    return getattr(value, "__module__", module)


def _body_dump(function: Callable[..., Any]) -> str | None:
    """The function's statements without its docstring, as an AST dump (comments and layout do not count)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    definition = tree.body[0]
    if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    body = definition.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) == 1 and isinstance(body[0], ast.Raise):
        return None  # a stub (the handout's "reference" is one): nothing to copy
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def findings(module: types.ModuleType, source_path: Path, functions: list[str],
             references: dict[str, Callable[..., Any]], modules: set[str], tripwires: Tripwires) -> list[str]:
    """What the loaded module's source and names reveal, as one-line findings (the calls come from `tripwires`)."""
    name = source_path.name
    found = [f"{name} {line}" for line in imported_references(source_path.read_text(encoding="utf-8"), modules)]
    for attr, value in vars(module).items():
        label = tripwires.label(value) or (
            f"{value.__module__}.{value.__qualname__}" if isinstance(value, types.FunctionType)
            and value.__module__ in modules else None)
        if label:
            found.append(f"{name}: {attr} is the reference {label}")
        elif isinstance(value, types.ModuleType) and value.__name__ in modules:
            found.append(f"{name}: {attr} is the reference module {value.__name__}")
    for function_name in functions:
        mine, theirs = getattr(module, function_name, None), references.get(function_name)
        if callable(mine) and theirs is not None and _body_dump(inspect.unwrap(mine)) == _body_dump(theirs) is not None:
            found.append(f"{name}: {function_name} is a copy of the reference's code")
    return found
