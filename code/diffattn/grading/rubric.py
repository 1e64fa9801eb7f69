"""The exercises' rubric, declared once: which graded part covers which functions, the reference each one
re-implements, the type each returns, and how a function name is found. The graded tests (through tests/adapters.py),
the grader's child process, the student handout and the Classroom workflow (tests/test_grading_assignment.py checks
its rubric against this one) all read it.

    EXERCISES  graded part "NN.k" → (title, exercise module in exercises/, functions it implements)
    REFERENCE  function → "module:function" of the course's own implementation
    RETURNS    function → the type its docstring promises (tests/adapters.py checks every call against it)

Adding an exercise (CONTRIBUTING.md, "Exercises and grading"): its lines here, its stub in tests/grading/stubs/, graded
tests marked `@pytest.mark.grade("NN.k")`, a known-wrong implementation in tests/wrong/ and a correct one in
tests/correct/ (`make new-lesson` writes the stub and the test file).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[3]  # the checkout, or the grader's private copy of it

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


def resolve(path: str) -> Callable[..., Any]:
    module, attr = path.split(":")
    loaded = exercise_module(module) if module.startswith("ex") else importlib.import_module(module)
    return getattr(loaded, attr)
