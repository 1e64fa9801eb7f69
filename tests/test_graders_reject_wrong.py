"""The graded tests reject known-wrong implementations and accept independent correct ones.

Each tests/wrong/wNN_*.py replaces some reference functions (OVERRIDES) with a plausible mistake and names the
exercises that must then lose points (LOSES), and only those: the other exercises of its lessons keep full marks.
The grader's own pytest session (what `diffattn grade --impl tests.wrong.<module>` runs in its child
processes) grades each one on the exercises it should lose, all in one separate process (tests/grading/regrade.py),
and every case here reads its points back from the results.json it wrote. Each tests/correct/cNN_*.py, an
implementation of every part of lesson NN written from the docstrings alone, is graded the same way and must keep
full marks.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tests.correct
import tests.wrong
from diffattn import lessons as experiments
from diffattn.grading.rubric import EXERCISES, exercise_module, exercise_paths
from tests.conftest import HAS_TORCH
from tests.test_feedback import UNEXPLAINED

ROOT = Path(__file__).resolve().parents[1]
WRONG = sorted(f"tests.wrong.{m.name}" for m in pkgutil.iter_modules(tests.wrong.__path__))
CORRECT = sorted(f"tests.correct.{m.name}" for m in pkgutil.iter_modules(tests.correct.__path__))
TORCH_LESSONS = {n for n, needs in experiments.REQUIRES.items() if "torch" in needs}  # read from the lessons
# The module fixture regrades every module (about 120 jobs, 2-3 minutes on two idle cores) inside the first test that
# asks for it, so that test gets room for a loaded machine; a hang still ends.
pytestmark = pytest.mark.timeout(900)
BROKEN = re.compile(r"\b(NameError|UnboundLocalError|ImportError|ModuleNotFoundError|SyntaxError|NotImplementedError)\b")


def loses(module: str) -> tuple[str, ...]:
    return tuple(importlib.import_module(module).LOSES)


def covers(module: str) -> tuple[str, ...]:
    """The exercise parts a correct module implements (every function of each)."""
    names = set(importlib.import_module(module).OVERRIDES)
    return tuple(e for e, (_, _, functions) in EXERCISES.items() if set(functions) <= names)


def runnable(module: str) -> bool:
    parts = covers(module) if module.startswith("tests.correct.") else loses(module)
    return HAS_TORCH or not any(e[:2] in TORCH_LESSONS for e in parts)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """One results.json per (wrong module, exercise it should lose): folder / f"{module}.{exercise}.json".
    The jobs are split over two regrade processes that run side by side (CI has two cores)."""
    folder = tmp_path_factory.mktemp("grades")
    jobs = [{"impl": m, "exercise": f"ex{n}", "out": str(folder / f"{m}.ex{n}.json")}
            for m in WRONG if runnable(m) for n in sorted({e[:2] for e in loses(m)})]
    jobs += [{"impl": m, "exercise": f"ex{n}", "out": str(folder / f"{m}.ex{n}.json")}
             for m in CORRECT if runnable(m) for n in sorted({e[:2] for e in covers(m)})]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "code"), str(ROOT)]), "OMP_NUM_THREADS": "1"}
    runs = []
    for half in (0, 1):
        (folder / f"jobs{half}.json").write_text(json.dumps(jobs[half::2]))
        runs.append(subprocess.Popen([sys.executable, "-m", "tests.grading.regrade", str(folder / f"jobs{half}.json")],
                                     cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for run in runs:
        _, stderr = run.communicate(timeout=840)
        assert run.returncode == 0, stderr[-3000:]
    return folder


def points(tests: list[dict]) -> dict[str, list[float]]:
    """{exercise: [points earned, points possible]} from the tests of a Gradescope results.json."""
    totals: dict[str, list[float]] = {}
    for test in tests:
        got, most = totals.get(test["tags"][0], [0.0, 0.0])
        totals[test["tags"][0]] = [got + test["score"], most + test["max_score"]]
    return totals


def test_every_graded_exercise_has_a_known_wrong_implementation():
    covered = {e for m in WRONG for e in loses(m)}
    assert set(EXERCISES) <= covered, f"exercises no wrong implementation exercises: {set(EXERCISES) - covered}"


def test_each_wrong_module_declares_real_exercises_and_overrides():
    stubs = exercise_paths()
    for module in WRONG:
        mod = importlib.import_module(module)
        assert mod.LOSES and set(mod.LOSES) <= set(EXERCISES), module
        assert mod.OVERRIDES, module
        assert (mod.__doc__ or "").strip(), f"{module}: say in the docstring what mistake it makes"
        for name, function in mod.OVERRIDES.items():
            assert name in stubs, f"{module}: {name!r} is no exercise function (see tests/adapters.py)"
            if not runnable(module):
                continue  # the torch exercise stubs import torch
            stub_module, attr = stubs[name].split(":")
            stub = getattr(exercise_module(stub_module), attr)
            # the student's signature: a wrong function that a test cannot even call would lose points vacuously
            assert list(inspect.signature(function).parameters) == list(inspect.signature(stub).parameters), \
                f"{module}: {name} must take the stub's parameters"


@pytest.mark.parametrize("module", WRONG)
def test_wrong_implementation_loses_points(module: str, results: Path):
    if not runnable(module):
        pytest.skip("needs PyTorch")
    tests = [t for path in sorted(results.glob(f"{module}.ex*.json")) for t in json.loads(path.read_text())["tests"]]
    earned = points(tests)
    for exercise in loses(module):
        got, most = earned[exercise]
        assert most > 0 and got < most, f"{module} still gets {got}/{most} points on exercise {exercise}"
    # The points are lost for the declared mistake: the other exercises graded alongside keep full marks, and no
    # test failed because the wrong module itself is broken (a crash would "lose points" without testing anything).
    for exercise, (got, most) in earned.items():
        assert exercise in loses(module) or got == most, f"{module} also loses points on {exercise}: list it in LOSES"
    broken = [t["name"] for t in tests if t["status"] != "passed" and BROKEN.search(t["output"])]
    assert not broken, f"{module} crashes instead of computing a wrong answer: {broken}"
    # ... and each failure tells the student what was expected: a message, not pytest's bare `assert …`
    unexplained = [f"{t['name']}: {t['output'][:200]}" for t in tests
                   if t["status"] != "passed" and UNEXPLAINED.search(t["output"].splitlines()[0])]
    assert not unexplained, f"{module}: failures without a message (add one, see tests/feedback.py): {unexplained}"


@pytest.mark.parametrize("module, exercise, shown", [
    ("tests.wrong.w05_norm_whole_width", "ex05", "mistake: normalise over each head's 2d channels, not d_model"),
    ("tests.wrong.w01_softmax_nan_on_masked_row", "ex01", "mistake: softmax([-inf, -inf]): every logit is −inf"),
])
def test_the_table_shows_the_failure_that_names_the_mistake(module: str, exercise: str, shown: str, results: Path):
    """The table a student reads (results.json's output) shows, under each part, the failure whose message names
    the mistake, not the first value check that failed, wrapped, never cut (diffattn.grading.report)."""
    if not runnable(module):
        pytest.skip("needs PyTorch")
    table = json.loads((results / f"{module}.{exercise}.json").read_text())["output"]
    assert shown in " ".join(line.strip() for line in table.splitlines()), table
    assert "…" not in table and max(map(len, table.splitlines())) <= 118, table


def test_every_exercise_part_has_an_independent_correct_implementation():
    covered = {e for m in CORRECT for e in covers(m)}
    assert covered == set(EXERCISES), f"parts without a correct module in tests/correct/: {set(EXERCISES) - covered}"


@pytest.mark.parametrize("module", CORRECT)
def test_correct_implementation_keeps_full_marks(module: str, results: Path):
    """Written from the docstrings alone and unlike the reference where the docstring allows: a graded test that
    leans on the reference's incidental choices instead of the spec would take points from it."""
    if not runnable(module):
        pytest.skip("needs PyTorch")
    tests = [t for path in sorted(results.glob(f"{module}.ex*.json")) for t in json.loads(path.read_text())["tests"]]
    failed = [f"{t['name']}: {t['output'][:300]}" for t in tests if t["status"] != "passed"]
    assert tests and not failed, f"{module} loses points although it follows the docstrings: {failed}"
