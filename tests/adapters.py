"""The seam between graded tests and an implementation (the CS336 adapter pattern).

Graded tests never import the reference or the exercises directly: they call `impl.<name>(...)`, where `impl` is
chosen with `pytest --impl`:

    --impl reference           diffattn's own implementation (the default: `make test`)
    --impl exercises           the student's stubs in exercises/ (`make grade`)
    --impl tests.wrong.<mod>   a known-wrong implementation: the module's OVERRIDES replace some reference functions;
                               tests/test_graders_reject_wrong.py proves each one loses the points it should.

EXERCISES is the rubric: exercise id -> (title, exercise module, functions the exercise implements).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

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
    "diff_v2_gqa_attention": "diffattn.nn.functional:diff_v2_gqa_attention",
    "query_head_groups": "diffattn.nn.functional:query_head_groups",
    "v1_forward": "diffattn.eval.lambda_sweep:v1_forward",
    "v2_forward": "diffattn.eval.lambda_sweep:v2_forward",
    "sweep_model": "diffattn.eval.lambda_sweep:sweep_model",
    "best_value": "diffattn.eval.lambda_sweep:best_value",
}


def _resolve(path: str) -> Callable[..., Any]:
    module, attr = path.split(":")
    return getattr(importlib.import_module(module), attr)


def exercise_paths() -> dict[str, str]:
    """function name -> 'exNN_module:function' for every graded function."""
    return {fn: f"{module}:{fn}" for _, module, fns in EXERCISES.values() for fn in fns}


class Implementation:
    """Resolves names lazily, so a stdlib-only test run never imports torch."""

    def __init__(self, spec: str):
        self.spec = spec
        self._overrides: dict[str, Callable[..., Any]] = {}
        self._paths = dict(REFERENCE)
        if spec == "exercises":
            self._paths.update(exercise_paths())
        elif spec != "reference":
            self._overrides = dict(importlib.import_module(spec).OVERRIDES)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._overrides:
            return self._overrides[name]
        if name not in self._paths:
            raise AttributeError(f"no adapter for {name!r}: add it to tests/adapters.py")
        return _resolve(self._paths[name])

    def __repr__(self) -> str:
        return f"Implementation({self.spec!r})"
