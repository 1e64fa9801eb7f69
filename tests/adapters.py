"""The seam between graded tests and an implementation (the CS336 adapter pattern).

Graded tests never import the reference or the exercises directly: they call `impl.<name>(...)`, where `impl` is
chosen with `pytest --impl` (or `python -m diffattn grade --impl`):

    --impl reference           diffattn's own implementation (the default: `make test`)
    --impl exercises           the student's files in exercises/ (`make grade`)
    --impl tests.wrong.<mod>   a known-wrong implementation: the module's OVERRIDES replace some reference functions;
                               tests/test_graders_reject_wrong.py proves each one loses the points it should.

EXERCISES is the rubric: exercise id -> (title, exercise module, functions the exercise implements). RETURNS is the
type each function's docstring promises; every call is checked against it (exact built-in types, exactly
torch.Tensor, or exactly diffattn's DecodeStep of two ints, so a returned object cannot carry code that makes a
comparison pass).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]

EXERCISES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "01.1": ("stable softmax", "ex01_softmax", ("softmax",)),
    "02.1": ("differential attention weights (V1)", "ex02_diff_attention", ("diff_weights_v1",)),
    "02.2": ("differential attention output (V1 and V2)", "ex02_diff_attention", ("diff_attention_v1", "diff_attention_v2")),
    "03.1": ("SNR measure", "ex03_snr", ("signal_to_noise",)),
    "03.2": ("noise crossover finder", "ex03_snr", ("noise_crossover",)),
    "03.3": ("λ sweep", "ex03_snr", ("lambda_sweep", "best_lambda")),
    "04.1": ("V1/V2 parameter accounting", "ex04_accounting", ("attention_params",)),
    "04.2": ("GQA + V2 KV cache", "ex04_accounting", ("kv_cache_bytes_per_token",)),
    "05.1": ("λ re-parameterisation", "ex05_diff_v1", ("reparameterized_lambda",)),
    "05.2": ("λ_init(depth)", "ex05_diff_v1", ("lambda_init",)),
    "05.3": ("per-head RMSNorm and (1 − λ_init) scale", "ex05_diff_v1", ("headwise_norm",)),
    "07.1": ("DIFF V2 with GQA (8 KV / 32 heads)", "ex07_v2_gqa", ("diff_v2_gqa_attention", "query_head_groups")),
    "11.1": ("V1 layer with λ replaced", "ex11_lambda_sweep", ("v1_forward",)),
    "11.2": ("V2 layer with σ(λ) replaced", "ex11_lambda_sweep", ("v2_forward",)),
    "11.3": ("λ sweep: patch, evaluate, restore", "ex11_lambda_sweep", ("sweep_model",)),
    "11.4": ("pick the best setting", "ex11_lambda_sweep", ("best_value",)),
    "12.1": ("decode step FLOPs and bytes per variant", "ex12_roofline", ("decode_step",)),
    "12.2": ("crossover batch B*", "ex12_roofline", ("roofline_crossover",)),
}

REFERENCE: dict[str, str] = {
    "softmax": "diffattn.pure.softmax:softmax",
    "diff_weights_v1": "diffattn.pure.attention:diff_weights_v1",
    "diff_attention_v1": "diffattn.pure.attention:diff_attention_v1",
    "diff_attention_v2": "diffattn.pure.attention:diff_attention_v2",
    "signal_to_noise": "diffattn.pure.snr:signal_to_noise",
    "noise_crossover": "diffattn.pure.snr:noise_crossover",
    "lambda_sweep": "diffattn.pure.snr:lambda_sweep",
    "best_lambda": "diffattn.pure.snr:best_lambda",
    "attention_params": "diffattn.pure.accounting:attention_params",
    "kv_cache_bytes_per_token": "diffattn.pure.accounting:kv_cache_bytes_per_token",
    "reparameterized_lambda": "diffattn.nn.functional:reparameterized_lambda",
    "lambda_init": "diffattn.nn.functional:lambda_init",
    "headwise_norm": "diffattn.nn.functional:headwise_norm",
    "diff_v2_gqa_attention": "diffattn.nn.kernels:diff_v2_gqa_attention",
    "query_head_groups": "diffattn.nn.functional:query_head_groups",
    "v1_forward": "diffattn.eval.lambda_sweep:v1_forward",
    "v2_forward": "diffattn.eval.lambda_sweep:v2_forward",
    "sweep_model": "diffattn.eval.lambda_sweep:sweep_model",
    "best_value": "diffattn.eval.lambda_sweep:best_value",
    "decode_step": "diffattn.pure.roofline:decode_step",
    "roofline_crossover": "diffattn.pure.roofline:roofline_crossover",
}

# What each docstring promises to return. "number" is an int or a float (an element of the caller's grid, say).
RETURNS: dict[str, str] = {
    "softmax": "list[float]",
    "diff_weights_v1": "list[list[float]]",
    "diff_attention_v1": "list[list[float]]",
    "diff_attention_v2": "list[list[float]]",
    "signal_to_noise": "float",
    "noise_crossover": "number|None",
    "lambda_sweep": "list[number]",
    "best_lambda": "number",
    "attention_params": "int",
    "kv_cache_bytes_per_token": "int",
    "reparameterized_lambda": "tensor",
    "lambda_init": "float",
    "headwise_norm": "tensor",
    "diff_v2_gqa_attention": "tensor",
    "query_head_groups": "list[int]",
    "v1_forward": "tensor",
    "v2_forward": "tensor",
    "sweep_model": "list[float]",
    "best_value": "number",
    "decode_step": "DecodeStep",
    "roofline_crossover": "float|None",
}

# Called after every call into the implementation with (function name, the exception it raised or None); the grader's
# child process puts one in config.stash[AFTER_CALL] to check that the call left the grader intact.
AfterCall = Callable[[str, "BaseException | None"], None]
AFTER_CALL = pytest.StashKey[AfterCall]()


def exercise_paths() -> dict[str, str]:
    """function name -> 'exNN_module:function' for every graded function."""
    return {fn: f"{module}:{fn}" for _, module, fns in EXERCISES.values() for fn in fns}


def exercise_module(name: str) -> Any:
    """The student's exercises/<name>.py, loaded from that file (never found through sys.path, so a file in
    exercises/ cannot stand in for a library module); its folder is appended to sys.path for its own imports."""
    if name in sys.modules:
        return sys.modules[name]
    path = ROOT / "exercises" / f"{name}.py"
    if not path.is_file():
        raise ModuleNotFoundError(f"exercises/{name}.py does not exist")
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _resolve(path: str) -> Callable[..., Any]:
    module, attr = path.split(":")
    loaded = exercise_module(module) if module.startswith("ex") else importlib.import_module(module)
    return getattr(loaded, attr)


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
            raise AttributeError(f"no adapter for {name!r}: add it to tests/adapters.py")
        if name not in self._resolved:
            self._resolved[name] = self._overrides.get(name) or _resolve(self._paths[name])
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
