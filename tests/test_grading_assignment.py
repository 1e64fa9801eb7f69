"""One assignment graded as one (diffattn.grading.assignment): `make gradescope-zip EXERCISES=...` and the handout's
Classroom workflow count only the assignment's exercises, and the totals agree with the points they grade.

Graded against every exercise, a lesson-01 submission read 12.5 / 208 with 17 "not submitted" rows, and with hidden
tests results.json said /213 while the table said /208.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from diffattn.core.errors import ConfigError
from diffattn.grading.assignment import WORKFLOW, classroom_workflow, exercise_names

ROOT = Path(__file__).resolve().parents[1]
MAKE_ZIP = ROOT / "tests" / "grading" / "gradescope" / "make_autograder.sh"
HIDDEN_TEST = '''
import pytest


@pytest.mark.grade("01.1", points=1)
def test_two_equal_logits_split_evenly(impl):
    assert impl.softmax([3.0, 3.0]) == [0.5, 0.5], "two equal logits: [0.5, 0.5]"
'''
HALF_RIGHT = "def softmax(logits):\n    return [1.0 / len(logits)] * len(logits)\n"  # uniform: some tests pass


def rubric(text: str) -> dict[str, float]:
    return {f"ex{n}": float(p) for n, p in re.findall(r"--only ex(\d\d) --fail-below-full.*?max-score: (\d+)", text,
                                                       re.DOTALL)}


def test_the_classroom_workflow_of_an_assignment_has_only_its_rubric_lines():
    full = (ROOT / WORKFLOW).read_text()
    text = classroom_workflow(full, ["ex01", "ex12"])
    assert rubric(text) == {e: rubric(full)[e] for e in ("ex01", "ex12")}  # points as the course's, tested there
    assert re.findall(r"EX(\d\d)_RESULTS", text) == ["01", "12"] and "runners: ex01,ex12\n" in text
    assert re.findall(r"^      - (.*)$", text, re.M) == ["uses: actions/checkout@v4", "uses: actions/setup-python@v5",
                                                        "name: Install", "id: ex01", "id: ex12",
                                                        "name: Autograding Reporter"]
    with pytest.raises(ConfigError, match="no rubric step for ex13"):
        classroom_workflow(full, ["ex13"])


def test_exercise_names_are_checked_and_put_in_course_order():
    known = ["ex01", "ex02", "ex12"]
    assert exercise_names(["ex12 01,ex01"], known) == ["ex01", "ex12"]
    for names, message in (([], "at least one"), (["ex13"], "unknown exercise ex13")):
        with pytest.raises(ConfigError, match=message):
            exercise_names(names, known)


def build_zip(tmp_path: Path, exercises: str, *hidden: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(MAKE_ZIP), *hidden], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "EXERCISES": exercises, "AUTOGRADER_ZIP": str(tmp_path / "autograder.zip")})


@pytest.mark.skipif(shutil.which("zip") is None, reason="make gradescope-zip needs zip")
def test_an_assignment_zip_grades_only_its_exercises_with_totals_that_agree(tmp_path):
    """`make gradescope-zip EXERCISES=ex01 HIDDEN=dir`, unpacked and run as Gradescope runs it (AUTOGRADER points
    run_autograder at another root), on a lesson-01 submission: only ex01's parts, no "not submitted" row, and the
    table's total is results.json's, the hidden point included."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_01_hidden.py").write_text(HIDDEN_TEST)
    build = build_zip(tmp_path, "ex01", str(hidden))
    assert build.returncode == 0 and "grades ex01 only" in build.stdout, build.stderr
    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        archive.extractall(root / "source")
    assert (root / "source" / "EXERCISES").read_text() == "ex01\n"
    (root / "submission").mkdir()
    (root / "submission" / "ex01_softmax.py").write_text(HALF_RIGHT)
    (root / "venv" / "bin").mkdir(parents=True)  # Gradescope's venv: here, this Python
    (root / "venv" / "bin" / "python").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    (root / "venv" / "bin" / "python").chmod(0o755)
    run = subprocess.run(["bash", str(root / "source" / "run_autograder")], capture_output=True, text=True,
                         timeout=600, env={**os.environ, "AUTOGRADER": str(root),
                                           "PYTHONPATH": str(root / "source" / "code")})
    report = json.loads((root / "results" / "results.json").read_text())
    assert {t["tags"][1] for t in report["tests"]} == {"ex01"}, (root / "results" / "grader.log").read_text()[-2000:]
    assert "not submitted" not in json.dumps(report)
    assert [t["visibility"] for t in report["tests"]].count("hidden") == 1
    assert 0 < report["score"] < report["max_score"] == sum(t["max_score"] for t in report["tests"])
    total = report["output"].splitlines()[-1]
    assert total.split()[-3:] == [f"{report['score']:g}", "/", f"{report['max_score']:g}"], report["output"]


def test_an_unknown_exercise_stops_the_zip_with_one_line(tmp_path):
    build = build_zip(tmp_path, "ex01 ex13")
    assert build.returncode == 2 and build.stderr.count("\n") == 1, build.stderr
    assert build.stderr.startswith("error: unknown exercise ex13") and not (tmp_path / "autograder.zip").exists()
