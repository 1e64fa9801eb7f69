"""The torch lessons' numbers come out the same, under their declared kinds, on other CPU kernel paths and thread
counts: what a learner's laptop computes agrees with outputs/numbers.json (issue: a red first `make test`).

PyTorch picks its CPU kernels at start-up from the processor (ATEN_CPU_CAPABILITY: default, avx2, avx512, ...) and
splits reductions by thread count; both change the last digits of float results. Each case re-runs every torch lesson
in a fresh process with one of them changed and compares with the same rules as test_lessons.py's freshness test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diffattn import lessons as experiments
from diffattn.core.numberkinds import disagreements
from diffattn.core.results import load_numbers

ROOT = Path(__file__).resolve().parents[1]
TORCH_LESSONS = sorted(n for n, needs in experiments.REQUIRES.items() if "torch" in needs)
# Lesson 08 retrains four models (about 75 s under the portable kernels on 2 cores): `make test-slow` checks it, so
# `make test` stays within its time budget; its kinds were calibrated on every path when they were declared.
SLOW_LESSONS = {"08"}


def kernel_path_cases() -> dict[str, dict[str, str]]:
    """One case per kernel path this CPU offers besides the one torch picks by itself (that one is the freshness
    test's run): on an AVX-512 machine default and avx2, on an AVX2 machine default."""
    try:
        from diffattn.nn.cpu import kernel_path_env, kernel_paths, native_path
    except ImportError:  # no torch: every case skips below
        return {}
    return {f"kernel path {path} (ATEN_CPU_CAPABILITY={path})": kernel_path_env(path)
            for path in kernel_paths() if path != native_path()}


CASES = {**kernel_path_cases(), "one thread": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}}

pytestmark = pytest.mark.torch


def run_lesson_elsewhere(number: str, env_changes: dict[str, str]) -> dict:
    env = {**os.environ, **env_changes, "PYTHONPATH": str(ROOT / "code")}
    done = subprocess.run([sys.executable, "-m", "diffattn", "lesson", number, "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("number", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_LESSONS else n
                                    for n in TORCH_LESSONS])
def test_lesson_numbers_survive_another_cpu_path(number: str, case: str):
    pytest.importorskip("torch")
    if CASES[case].get("OMP_NUM_THREADS") and getattr(experiments.load(number), "RUNS_IN_ONE_THREAD", False):
        pytest.skip(f"lesson {number} pins its float work to one thread: this case would rerun the same computation")
    fresh = run_lesson_elsewhere(number, CASES[case])
    problems = disagreements(fresh, load_numbers()[number], experiments.number_kinds(number), number)
    assert not problems, f"{case}: numbers moved beyond their declared kinds:\n" + "\n".join(problems[:20])


def test_every_kernel_path_case_really_runs_on_its_path():
    """Guards the test above against testing nothing: each case's variable must reach torch and select its path."""
    pytest.importorskip("torch")
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    paths = [env["ATEN_CPU_CAPABILITY"] for env in CASES.values() if "ATEN_CPU_CAPABILITY" in env]
    if not paths:
        pytest.skip("this CPU runs the portable kernels already: there is no other path to compare with")
    assert "default" in paths
    for path in paths:
        env = {**os.environ, **CASES[f"kernel path {path} (ATEN_CPU_CAPABILITY={path})"]}
        shown = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
        assert shown.stdout.strip().lower() == path


def test_bf16_attention_runs_on_every_emulated_path():
    """torch 2.13 on an AVX-512 CPU with only ATEN_CPU_CAPABILITY lowered fails in bf16 SDPA (oneDNN still sees
    AVX-512 and asks for AVX-512 packing). Importing diffattn caps oneDNN to match, so a learner who sets the
    variable alone (ATEN_CPU_CAPABILITY=default make course) gets a working run, as does every case above."""
    pytest.importorskip("torch")
    sdpa = ("q = torch.randn(1, 2, 64, 32, dtype=torch.bfloat16); "
            "torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True); print('ok')")
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_MAX_CPU_ISA"}
    env["PYTHONPATH"] = str(ROOT / "code")
    for case, env_changes in CASES.items():
        for changes in (env_changes, {k: v for k, v in env_changes.items() if k != "ONEDNN_MAX_CPU_ISA"}):
            done = subprocess.run([sys.executable, "-c", "import diffattn, torch; " + sdpa],
                                  env={**env, **changes}, capture_output=True, text=True)
            assert done.returncode == 0 and done.stdout.strip() == "ok", f"{case}, {changes}: {done.stderr[-300:]}"


def test_kernel_paths_list_every_path_up_to_the_native_one():
    pytest.importorskip("torch")
    from diffattn.nn.cpu import X86_PATHS, kernel_paths, native_path

    paths = kernel_paths()
    assert paths[0] == "default" and paths[-1] == native_path()
    if native_path() in X86_PATHS:
        assert paths == X86_PATHS[: X86_PATHS.index(native_path()) + 1]
