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

from diffattn import experiments
from diffattn.numberkinds import disagreements
from diffattn.results import load_numbers

ROOT = Path(__file__).resolve().parents[1]
TORCH_LESSONS = sorted(n for n, needs in experiments.REQUIRES.items() if "torch" in needs)
# Lesson 08 retrains four models (about 75 s under the portable kernels on 2 cores): `make test-slow` checks it, so
# `make test` stays within its time budget; its kinds were calibrated on both paths when they were declared.
SLOW_LESSONS = {"08"}
CASES = {
    "portable kernels (ATEN_CPU_CAPABILITY=default)": {"ATEN_CPU_CAPABILITY": "default"},
    "one thread": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
}

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


def test_the_portable_kernel_path_really_is_another_path():
    """Guards the test above against testing nothing: the variable must reach torch and change its kernels here."""
    torch = pytest.importorskip("torch")
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    shown = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "DEFAULT"
    if torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip("this CPU runs the portable kernels already; the case above compares two equal paths")
