"""Integrity checks inside the child process: did the submission change anything the tests rely on?

A `Guard` is built after the tests are collected and before the submission is imported. It records the identity of
every function, class, method and module reachable from a module namespace (and the code objects of the Python
functions among them), plus interpreter state a submission could use to run code later (threads, trace hooks, import
hooks, signal handlers, PyTorch function modes, default dtype, grad mode). Then:

* after every call into the submission (tests/adapters.py calls `after_call`), the *focused* part is compared: the
  builtins and standard modules the tests compute with, pytest, Hypothesis, PyTorch's top level and its tensor
  methods, diffattn, the tests and this grader. A patch the tests would see must exist when the call returns, so a
  patch that restores itself after one use is still caught;
* after every test and at the end, *everything* recorded is compared.

Any difference is a violation: the exercise scores 0 with a one-line reason. This stops accidents and the cheap
attacks (monkeypatching math, diffattn, the adapters, pytest or this grader); it is not a sandbox against code that
hunts through the interpreter's memory (see tests/grading/README.md, "Threat model").
"""

from __future__ import annotations

import operator
import signal
import sys
import threading
import types
import warnings
from typing import Any, Callable

# Modules the tests compute and compare with, checked after every call into the submission: these exactly, and the
# packages in FOCUSED_PACKAGES with all their modules. Everything else (Hypothesis's engine, pytest's runner) is
# checked after every test.
FOCUSED = ("builtins", "math", "cmath", "operator", "functools", "itertools", "random", "copy", "numbers", "pytest",
           "_pytest.python_api", "_pytest.raises", "_pytest.outcomes", "_pytest.fixtures", "hypothesis",
           "hypothesis.core", "torch", "torch._C", "torch._tensor", "torch.testing", "torch.testing._comparison",
           "torch.nn.functional", "torch.functional")
FOCUSED_PACKAGES = ("diffattn", "tests", "conftest")
CODE_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type, types.ModuleType, classmethod,
              staticmethod, property, types.MethodDescriptorType, types.WrapperDescriptorType,
              types.GetSetDescriptorType, types.MemberDescriptorType, types.ClassMethodDescriptorType)
MISSING = object()
# Namespaces that change by design while tests run (pytest swaps warnings.showwarning around every test).
MUTABLE = ("warnings", "__main__")
# Allocation failures: Python's, and PyTorch's CPU allocator (a RuntimeError) when RLIMIT_AS is reached.
OUT_OF_MEMORY = ("can't allocate memory", "DefaultCPUAllocator: not enough memory")


class GradingViolation(Exception):
    """Raised into the running test when the submission broke the grader's integrity (the test fails at once)."""


def _is_focused(module: str) -> bool:
    return module in FOCUSED or any(module == p or module.startswith(p + ".") for p in FOCUSED_PACKAGES)


class _Record:
    """Identities in one module namespace and in the namespaces of the classes it defines.

    Compared with `map(id, ...)` in C: a replaced object has a new id (the old one is kept alive here, so its id is
    not reused), and no `__eq__` of the submission's gets a say.
    """

    def __init__(self, name: str, module: types.ModuleType):
        self.name = name
        self.module = module
        self.mappings: list[tuple[str, Any, tuple[str, ...], tuple[int, ...]]] = []
        self.kept_values: list[Any] = []  # keeps every recorded object alive, so no id is reused
        functions: list[types.FunctionType] = []
        self._add(name, vars(module), functions)
        for value in list(vars(module).values()):
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                self._add(f"{name}.{value.__qualname__}", value.__dict__, functions)
        self.functions = tuple(functions)
        self.kept = [(f, f.__code__, f.__defaults__, f.__kwdefaults__) for f in functions]
        self.fingerprint = self._function_ids()
        self.kwdefaults = [(f, dict(f.__kwdefaults__)) for f in functions if f.__kwdefaults__]

    def _add(self, label: str, mapping: Any, functions: list[types.FunctionType]) -> None:
        pairs = [(key, value) for key, value in list(mapping.items()) if isinstance(value, CODE_TYPES) or callable(value)]
        self.mappings.append((label, mapping, tuple(k for k, _ in pairs), tuple(id(v) for _, v in pairs)))
        self.kept_values += [v for _, v in pairs]
        functions += [v for _, v in pairs if isinstance(v, types.FunctionType)]

    def _function_ids(self) -> tuple[tuple[int, ...], ...]:
        return (tuple(map(id, map(_CODE, self.functions))), tuple(map(id, map(_DEFAULTS, self.functions))),
                tuple(map(id, map(_KWDEFAULTS, self.functions))))

    def problem(self) -> str | None:
        if sys.modules.get(self.name) is not self.module:
            return f"replaced the module {self.name} in sys.modules"
        for label, mapping, keys, ids in self.mappings:
            if tuple(map(id, map(mapping.get, keys))) != ids:
                key = next(k for k, i in zip(keys, ids) if id(mapping.get(k)) != i)
                return f"replaced or deleted {label}.{key}"
        if self._function_ids() != self.fingerprint or any(f.__kwdefaults__ != d for f, d in self.kwdefaults):
            changed = next(f for f, code, defaults, kw in self.kept
                           if (f.__code__, f.__defaults__, f.__kwdefaults__) != (code, defaults, kw)
                           or (kw and f.__kwdefaults__ != dict(kw)))
            return f"changed the code or defaults of {changed.__module__}.{changed.__qualname__}"
        return None


_CODE = operator.attrgetter("__code__")
_DEFAULTS = operator.attrgetter("__defaults__")
_KWDEFAULTS = operator.attrgetter("__kwdefaults__")


def _signal_handlers() -> dict[int, Any]:
    return {s: signal.getsignal(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)}


def _torch_state() -> tuple:
    torch = sys.modules.get("torch")
    if torch is None:
        return ()
    return (torch.get_default_dtype(), torch.is_grad_enabled(), torch._C._len_torch_function_stack(),
            torch._C._len_torch_dispatch_stack(), torch.are_deterministic_algorithms_enabled())


def _interpreter_state() -> dict[str, Any]:
    return {"trace hook": sys.gettrace(), "profile hook": sys.getprofile(), "sys.meta_path": tuple(sys.meta_path),
            "sys.path_hooks": tuple(sys.path_hooks), "sys.path": tuple(sys.path), "sys.excepthook": sys.excepthook,
            "PyTorch modes and defaults": _torch_state()}


class Guard:
    """Built before the submission is imported; `violation` holds the first problem found (None while intact)."""

    def __init__(self, on_violation: Callable[[str], None]):
        self.on_violation = on_violation
        self.violation: str | None = None
        with warnings.catch_warnings():  # reading some torch namespaces warns about deprecated names
            warnings.simplefilter("ignore")
            records = [_Record(name, module) for name, module in list(sys.modules.items())
                       if isinstance(module, types.ModuleType) and name not in MUTABLE]
        self.focused = [r for r in records if _is_focused(r.name)]
        self.everything = records
        self.threads = set(threading.enumerate())
        self.signals = _signal_handlers()
        self.interpreter = None  # taken by `settle`, once the submission's own imports have changed sys.path

    def settle(self) -> None:
        """Record the interpreter state the submission may leave behind after its import."""
        self.interpreter = _interpreter_state()

    def report(self, reason: str) -> str:
        if self.violation is None:
            self.violation = reason
            self.on_violation(reason)
        return reason

    def _state_problem(self) -> str | None:
        extra = [t.name for t in threading.enumerate() if t not in self.threads and t.is_alive()]
        if extra:
            return f"left a thread running ({extra[0]})"
        if _signal_handlers() != self.signals:
            return "installed a signal handler"
        if self.interpreter is not None:
            now = _interpreter_state()
            changed = next((name for name, value in now.items() if value != self.interpreter[name]), None)
            if changed:
                return f"changed the interpreter's {changed}"
        return None

    def check(self, records: list[_Record], when: str) -> str | None:
        if self.violation is not None:
            return self.violation
        problem = self._state_problem() or next((p for p in map(_Record.problem, records) if p), None)
        return self.report(f"the submission {problem} ({when})") if problem else None

    def after_call(self, name: str, error: BaseException | None) -> None:
        """tests/adapters.py calls this after every call into the submission."""
        if isinstance(error, MemoryError) or (isinstance(error, RuntimeError) and any(
                text in str(error) for text in OUT_OF_MEMORY)):
            self.report(f"memory limit exceeded in {name} ({type(error).__name__})")
        elif error is not None and not isinstance(error, Exception):
            self.report(f"{name} raised {type(error).__name__}, which stops the grader")
        if self.check(self.focused, f"in {name}") is not None:
            raise GradingViolation(self.violation)

    def after_test(self, nodeid: str) -> str | None:
        return self.check(self.everything, f"during {nodeid.split('::')[-1]}")
