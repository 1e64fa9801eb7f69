"""The graded tests reject known-wrong implementations.

Each tests/wrong/wNN_*.py replaces some reference functions (OVERRIDES) with a plausible mistake and names the
exercises that must then lose points (LOSES). This test runs the real grader (`pytest -m graded --impl ...
--results-json`, i.e. `make grade`) with each one and reads the points from results.json.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import tests.wrong
from tests.adapters import EXERCISES

ROOT = Path(__file__).resolve().parents[1]
WRONG = sorted(f"tests.wrong.{m.name}" for m in pkgutil.iter_modules(tests.wrong.__path__))
TORCH_LESSONS = {"05", "06", "07"}


def _needs_torch(module: str) -> bool:
    return any(exercise[:2] in TORCH_LESSONS for exercise in importlib.import_module(module).LOSES)


def grade(impl: str, exercises: tuple[str, ...], out: Path) -> dict:
    """Run the grader on the graded tests of `exercises`' lessons; return {exercise: (points, max)}."""
    lessons = sorted({e[:2] for e in exercises})
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
               "graded and (" + " or ".join(f"ex{n}" for n in lessons) + ")",
               "--impl", impl, "--results-json", str(out), "tests"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "code"), str(ROOT)])}
    subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    report = json.loads(out.read_text())
    points: dict[str, list[float]] = {}
    for test in report["tests"]:
        got, most = points.setdefault(test["tags"][0], [0.0, 0.0])
        points[test["tags"][0]] = [got + test["score"], most + test["max_score"]]
    return points


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict:
    from tests.conftest import HAS_TORCH

    runnable = [m for m in WRONG if HAS_TORCH or not _needs_torch(m)]
    folder = tmp_path_factory.mktemp("grades")

    def one(module: str):
        loses = tuple(importlib.import_module(module).LOSES)
        return module, loses, grade(module, loses, folder / f"{module}.json")

    with ThreadPoolExecutor(max_workers=2) as pool:
        return {module: (loses, points) for module, loses, points in pool.map(one, runnable)}


def test_every_graded_exercise_has_a_known_wrong_implementation():
    covered = {e for m in WRONG for e in importlib.import_module(m).LOSES}
    assert set(EXERCISES) <= covered, f"exercises no wrong implementation exercises: {set(EXERCISES) - covered}"


def test_each_wrong_module_declares_real_exercises_and_overrides():
    for module in WRONG:
        mod = importlib.import_module(module)
        assert mod.LOSES and set(mod.LOSES) <= set(EXERCISES), module
        assert mod.OVERRIDES, module
        assert (mod.__doc__ or "").strip(), f"{module}: say in the docstring what mistake it makes"


@pytest.mark.parametrize("module", WRONG)
def test_wrong_implementation_loses_points(module: str, verdicts: dict):
    if module not in verdicts:
        pytest.skip("needs PyTorch")
    loses, points = verdicts[module]
    for exercise in loses:
        got, most = points[exercise]
        assert most > 0 and got < most, f"{module} still gets {got}/{most} points on exercise {exercise}"
