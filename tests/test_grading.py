"""The grading kit: stubs are complete specs that score 0, the reference scores full marks, results.json is valid."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.adapters import EXERCISES, REFERENCE, exercise_paths
from tests.conftest import HAS_TORCH

ROOT = Path(__file__).resolve().parents[1]
STDLIB_EXERCISES = [e for e in EXERCISES if e[:2] in {"01", "02", "03", "04"}]


def _run_grader(impl: str, out: Path) -> dict:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
               "graded and (ex01 or ex02 or ex03 or ex04)", f"--impl={impl}", f"--results-json={out}",
               *sorted(str(p.relative_to(ROOT)) for n in "1234" for p in (ROOT / "tests").glob(f"test_0{n}_*.py"))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "code"), str(ROOT)])}
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert "grade report" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    return json.loads(out.read_text())


def _signature(path: str) -> inspect.Signature:
    module, attr = path.split(":")
    return inspect.signature(getattr(importlib.import_module(module), attr))


@pytest.mark.parametrize("name", sorted(exercise_paths()))
def test_stub_matches_the_reference_signature_and_documents_the_spec(name: str):
    if name in {"reparameterized_lambda", "headwise_norm", "diff_v2_gqa_attention", "query_head_groups",
                "lambda_init"} and not HAS_TORCH:
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


def test_reference_scores_full_marks_and_results_json_is_gradescope_shaped(tmp_path):
    report = _run_grader("reference", tmp_path / "ref.json")
    assert report["tests"], "no graded tests ran"
    for test in report["tests"]:
        assert set(test) >= {"name", "score", "max_score", "status", "output", "tags", "visibility"}
        assert test["status"] == "passed" and test["score"] == test["max_score"] > 0, test["name"]
    assert report["score"] == sum(t["max_score"] for t in report["tests"])
    assert {t["tags"][0] for t in report["tests"]} == set(STDLIB_EXERCISES)


def test_untouched_stubs_score_zero_and_say_not_implemented(tmp_path):
    """Run against exercises/ as shipped; this test is skipped once a student has started implementing."""
    report = _run_grader("exercises", tmp_path / "stubs.json")
    if any(t["score"] > 0 for t in report["tests"]):
        pytest.skip("exercises/ has been worked on")
    assert report["score"] == 0
    assert all("NotImplementedError" in t["output"] for t in report["tests"]), "a stub failed for another reason"
