"""The grading kit: stubs are complete specs that score 0, the reference scores full marks, results.json is
Gradescope-shaped, and the GitHub Classroom rubric carries the same points as the tests."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.adapters import EXERCISES, REFERENCE, exercise_paths
from tests.conftest import HAS_TORCH

ROOT = Path(__file__).resolve().parents[1]
TORCH_LESSONS = {"05", "06", "07"}
LESSONS = sorted({e[:2] for e in EXERCISES if HAS_TORCH or e[:2] not in TORCH_LESSONS})


def run_grader(impl: str, out: Path) -> dict:
    """`make grade` with another --impl, on every lesson that can run here; returns results.json."""
    files = sorted(str(p.relative_to(ROOT)) for n in LESSONS for p in (ROOT / "tests").glob(f"test_{n}_*.py"))
    marker = "graded and (" + " or ".join(f"ex{n}" for n in LESSONS) + ")"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker, f"--impl={impl}",
               f"--results-json={out}", *files]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "code"), str(ROOT)])}
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert "grade report" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def reference_report(tmp_path_factory) -> dict:
    return run_grader("reference", tmp_path_factory.mktemp("grade") / "reference.json")


def _signature(path: str) -> inspect.Signature:
    module, attr = path.split(":")
    return inspect.signature(getattr(importlib.import_module(module), attr))


@pytest.mark.parametrize("name", sorted(exercise_paths()))
def test_stub_matches_the_reference_signature_and_documents_the_spec(name: str):
    if REFERENCE[name].startswith("diffattn.nn") and not HAS_TORCH:
        pytest.skip("torch exercise")
    stub_module, attr = exercise_paths()[name].split(":")
    stub = getattr(importlib.import_module(stub_module), attr)
    assert len((stub.__doc__ or "").strip().splitlines()) >= 4, f"{name}: the docstring is the spec; write it out"
    stub_params = list(_signature(exercise_paths()[name]).parameters)
    reference = _signature(REFERENCE[name]).parameters
    ref_params = list(reference)
    assert stub_params == ref_params[: len(stub_params)], f"{name}: stub {stub_params} vs reference {ref_params}"
    extra = [p for p in ref_params[len(stub_params):] if reference[p].default is inspect.Parameter.empty]
    assert not extra, f"{name}: the reference needs {extra}, which the stub does not take"


def test_reference_scores_full_marks_and_results_json_is_gradescope_shaped(reference_report: dict):
    assert reference_report["tests"], "no graded tests ran"
    for test in reference_report["tests"]:
        assert set(test) >= {"name", "score", "max_score", "status", "output", "tags", "visibility"}
        assert test["status"] == "passed" and test["score"] == test["max_score"] > 0, test["name"]
    assert reference_report["score"] == sum(t["max_score"] for t in reference_report["tests"])
    assert {t["tags"][0][:2] for t in reference_report["tests"]} == set(LESSONS)


def test_classroom_rubric_matches_the_graded_points(reference_report: dict):
    """.github/workflows/classroom.yml gives each lesson exactly the points its graded tests carry."""
    text = (ROOT / ".github" / "workflows" / "classroom.yml").read_text()
    rubric = {n: float(p) for n, p in re.findall(r'-m "graded and ex(\d\d)".*?max-score: (\d+)', text, re.DOTALL)}
    points: dict[str, float] = defaultdict(float)
    for test in reference_report["tests"]:
        points[test["tags"][0][:2]] += test["max_score"]
    assert {n: rubric[n] for n in LESSONS} == dict(points)
    assert set(rubric) == {e[:2] for e in EXERCISES}, "one rubric line per lesson with exercises"


def test_untouched_stubs_score_zero_and_say_not_implemented(tmp_path):
    """Run against exercises/ as shipped; this test is skipped once a student has started implementing."""
    report = run_grader("exercises", tmp_path / "stubs.json")
    if any(t["score"] > 0 for t in report["tests"]):
        pytest.skip("exercises/ has been worked on")
    assert report["score"] == 0
    assert all("NotImplementedError" in t["output"] for t in report["tests"]), "a stub failed for another reason"
