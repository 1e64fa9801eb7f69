"""The grading kit: stubs are complete specs, the reference scores full marks through the real grader (one child
process per exercise), results.json is Gradescope-shaped, hidden tests are graded and hidden, bad arguments give one
line and exit 2, and the GitHub Classroom rubric carries the same points as the tests.

Untouched stubs scoring 0 is checked on the student handout (tests/test_handout.py); hostile submissions in
tests/test_grading_hostile.py.
"""

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

from diffattn import lessons as experiments
from diffattn.grading.rubric import EXERCISES, REFERENCE, exercise_module, exercise_paths
from tests.conftest import HAS_TORCH

ROOT = Path(__file__).resolve().parents[1]
TORCH_LESSONS = {n for n, needs in experiments.REQUIRES.items() if "torch" in needs}  # read from the lessons
LESSONS = sorted({e[:2] for e in EXERCISES if HAS_TORCH or e[:2] not in TORCH_LESSONS})
HIDDEN_TEST = '''
import pytest


@pytest.mark.grade("01.1", points=1)
def test_two_equal_logits_split_evenly(impl):
    assert impl.softmax([3.0, 3.0]) == [0.5, 0.5]
'''


def run_grader(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd / "code")}
    return subprocess.run([sys.executable, "-m", "diffattn", "grade", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.fixture(scope="module")
def reference_report(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    """The reference graded like a submission, on every exercise this machine can run, plus one hidden test."""
    hidden = tmp_path_factory.mktemp("hidden")
    (hidden / "test_01_hidden.py").write_text(HIDDEN_TEST)
    out = tmp_path_factory.mktemp("grade") / "results.json"
    run = run_grader("--impl", "reference", "--only", *[f"ex{n}" for n in LESSONS], "--tests", str(hidden),
                     "--json", str(out))
    return run, json.loads(out.read_text())


def _signature(path: str) -> inspect.Signature:
    module, attr = path.split(":")
    loaded = exercise_module(module) if module.startswith("ex") else importlib.import_module(module)
    return inspect.signature(getattr(loaded, attr))


@pytest.mark.parametrize("name", sorted(exercise_paths()))
def test_stub_matches_the_reference_signature_and_documents_the_spec(name: str):
    if REFERENCE[name].startswith("diffattn.nn") and not HAS_TORCH:
        pytest.skip("torch exercise")
    stub_module, attr = exercise_paths()[name].split(":")
    stub = getattr(exercise_module(stub_module), attr)
    assert len((stub.__doc__ or "").strip().splitlines()) >= 4, f"{name}: the docstring is the spec; write it out"
    stub_params = list(_signature(exercise_paths()[name]).parameters)
    reference = _signature(REFERENCE[name]).parameters
    ref_params = list(reference)
    assert stub_params == ref_params[: len(stub_params)], f"{name}: stub {stub_params} vs reference {ref_params}"
    extra = [p for p in ref_params[len(stub_params):] if reference[p].default is inspect.Parameter.empty]
    assert not extra, f"{name}: the reference needs {extra}, which the stub does not take"


def test_reference_scores_full_marks_and_results_json_is_gradescope_shaped(reference_report):
    run, report = reference_report
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert report["tests"], "no graded tests ran"
    for test in report["tests"]:
        assert set(test) >= {"name", "number", "score", "max_score", "status", "output", "tags", "visibility"}
        assert test["status"] == "passed" and test["score"] == test["max_score"] > 0, test["name"]
        assert re.fullmatch(r"\d\d\.\d+\.\d+", test["number"]), test["number"]
    assert report["score"] == report["max_score"] == sum(t["max_score"] for t in report["tests"])
    graded = [t["tags"][1][2:] for t in report["tests"]]
    assert graded == sorted(graded) and set(graded) == set(LESSONS), "exercises in order, whichever child ended first"
    assert set(report) >= {"score", "max_score", "execution_time", "output", "tests"}
    assert "total" in report["output"] and report["output"] in run.stdout


def test_hidden_tests_are_graded_and_hidden(reference_report):
    _, report = reference_report
    hidden = [t for t in report["tests"] if t["visibility"] == "hidden"]
    assert [t["name"] for t in hidden] == ["01.1 stable softmax: test_two_equal_logits_split_evenly"]
    assert hidden[0]["status"] == "passed"
    assert all(t["visibility"] == "visible" for t in report["tests"] if t not in hidden)


SECRET_TESTS = '''
import pytest


@pytest.mark.grade("01.1", points=2)
def test_secret_case_that_fails(impl):
    assert impl.softmax([0.0, 1.0]) == [0.5, 0.5], "SECRET expected 0.5/0.5"


@pytest.mark.grade("01.1", points=3)
def test_secret_case_that_passes(impl):
    assert len(impl.softmax([1.0, 2.0, 3.0])) == 3
'''


def test_nothing_of_a_hidden_test_reaches_what_students_see(tmp_path):
    """A failing and a passing hidden test: their names, messages and points appear in no student-visible field
    (results.json's top-level output, the visible tests' entries); the instructor reads them on stdout (which
    Gradescope shows to instructors only) and in their own hidden entries."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_01_secret.py").write_text(SECRET_TESTS)
    out = tmp_path / "results.json"
    run = run_grader("--impl", "reference", "--only", "ex01", "--tests", str(hidden), "--json", str(out), "--details")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    report = json.loads(out.read_text())
    secret = [t for t in report["tests"] if t["visibility"] == "hidden"]
    assert sorted(t["status"] for t in secret) == ["failed", "passed"]
    visible = {"output": report["output"], "tests": [t for t in report["tests"] if t["visibility"] == "visible"]}
    shown = json.dumps(visible)
    for leak in ("secret", "SECRET", "hidden"):
        assert leak not in shown, leak
    total = report["output"].splitlines()[-1]  # the whole grade, as results.json has it, hidden tests included
    assert total.split()[-3:] == [f"{report['score']:g}", "/", f"{report['max_score']:g}"] and "not shown" in total
    assert "hidden tests (not in the students' output): 3 / 5 points, 1 of 2 failed" in run.stdout
    assert "SECRET expected 0.5/0.5" in run.stdout  # --details, for the instructor


def test_classroom_rubric_matches_the_graded_points(reference_report):
    """.github/workflows/classroom.yml gives each lesson exactly the points its public graded tests carry."""
    text = (ROOT / ".github" / "workflows" / "classroom.yml").read_text()
    rubric = {n: float(p) for n, p in re.findall(r"--only ex(\d\d) --fail-below-full.*?max-score: (\d+)", text, re.DOTALL)}
    points: dict[str, float] = defaultdict(float)
    for test in reference_report[1]["tests"]:
        if test["visibility"] == "visible":
            points[test["tags"][1][2:]] += test["max_score"]
    assert {n: rubric[n] for n in LESSONS} == dict(points)
    assert set(rubric) == {e[:2] for e in EXERCISES}, "one rubric line per lesson with exercises"


@pytest.mark.parametrize("args, message", [
    (["--only", "ex99"], "unknown exercise ex99"),
    (["--timeout", "0"], "--timeout must be > 0"),
    (["--memory", "10"], "--memory must be at least 256 MiB"),
    (["--jobs", "0"], "--jobs must be 1 to 64"),
    (["--tests", "/no/such/folder"], "--tests /no/such/folder: no such folder"),
    (["--impl", "tests.wrong.nothing_here"], "--impl tests.wrong.nothing_here: expected"),
    (["--submission", "/no/such/folder"], "--submission /no/such/folder: no such folder"),
])
def test_bad_arguments_give_one_line_and_exit_2(args, message, tmp_path):
    run = run_grader(*args, "--json", str(tmp_path / "r.json"))
    assert run.returncode == 2 and run.stderr.startswith(f"error: {message}"), run.stderr
    assert run.stderr.count("\n") == 1 and not (tmp_path / "r.json").exists()


def test_fail_below_full_exits_3_only_when_points_are_missing(tmp_path):
    """What the Classroom workflow relies on: exit 0 at full marks, 3 below; both write results.json."""
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "ex01_softmax.py").write_text("from diffattn.pure.softmax import softmax\n")
    full = run_grader("--only", "ex01", "--submission", str(submission), "--fail-below-full", "--json", str(tmp_path / "a.json"))
    assert full.returncode == 0, full.stdout + full.stderr
    (submission / "ex01_softmax.py").write_text("def softmax(logits):\n    return [1.0 / len(logits)] * len(logits)\n")
    partial = run_grader("--only", "ex01", "--submission", str(submission), "--fail-below-full", "--json", str(tmp_path / "b.json"))
    assert partial.returncode == 3, partial.stdout + partial.stderr
    assert 0 < json.loads((tmp_path / "b.json").read_text())["score"] < json.loads((tmp_path / "a.json").read_text())["score"]


def test_a_missing_file_is_not_submitted_and_the_hint_names_the_exercise_graded(tmp_path):
    """`EX=ex01,ex04` grades both; an exercise whose file is absent scores 0 as "not submitted" (not a cut-off
    ModuleNotFoundError); the --details hint names an exercise that failed, not a fixed one."""
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "ex01_softmax.py").write_text("def softmax(logits):\n    return [1.0 / len(logits)] * len(logits)\n")
    run = run_grader("--only", "ex01,ex04", "--submission", str(submission), "--json", str(tmp_path / "r.json"))
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert {t["tags"][1] for t in report["tests"]} == {"ex01", "ex04"}
    ex04 = [t for t in report["tests"] if t["tags"][1] == "ex04"]
    assert all(t["output"] == "ex04 scores 0: not submitted: the submission has no ex04_accounting.py" for t in ex04)
    assert "make grade EX=ex01 DETAILS=1" in run.stdout and "EX=ex03" not in run.stdout


def test_restoring_the_checkout_keeps_what_was_changed(tmp_path):
    """A student who saves a file while grading runs gets it restored (the grader cannot tell their edit from a
    submission's), and finds the changed version in the folder the reason names."""
    from diffattn.grading.tree import restore, snapshot
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "ex01_softmax.py").write_text("before")
    before = snapshot(tmp_path, set())
    (tmp_path / "exercises" / "ex01_softmax.py").write_text("saved while grading")
    (tmp_path / "new.py").write_text("added")
    changed, kept = restore(tmp_path, before, set())
    assert changed == ["exercises/ex01_softmax.py", "new.py"]
    assert (tmp_path / "exercises" / "ex01_softmax.py").read_text() == "before" and not (tmp_path / "new.py").exists()
    assert (kept / "exercises" / "ex01_softmax.py").read_text() == "saved while grading"
    assert (kept / "new.py").read_text() == "added"
    assert restore(tmp_path, before, set()) == ([], None)


def test_the_course_s_own_runs_are_not_restored(tmp_path):
    """A training run in the background (lesson 08's trainer, a rehearsal) keeps appending to its folders while
    grading runs; restoring them would roll its metrics back, so the snapshot leaves them out."""
    from diffattn.grading.tree import UNWATCHED_PATHS, restore, snapshot
    for folder in sorted(UNWATCHED_PATHS):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "metrics.jsonl").write_text("step 1\n")
    before = snapshot(tmp_path, set())
    for folder in UNWATCHED_PATHS:
        (tmp_path / folder / "metrics.jsonl").write_text("step 1\nstep 2\n")
    assert before == {} and restore(tmp_path, before, set()) == ([], None)
    assert all((tmp_path / f / "metrics.jsonl").read_text() == "step 1\nstep 2\n" for f in UNWATCHED_PATHS)


def test_grading_collects_only_the_lessons_files_that_hold_graded_tests():
    """A lesson's ungraded test files (PyTorch benchmarks beside a stdlib exercise) are never imported by its grade;
    hidden files are always collected (the marker filter picks their tests)."""
    from diffattn.grading.grader import test_files

    files = {"tests/test_12_roofline.py": b'@pytest.mark.grade("12.1", points=1)\n',
             "tests/test_12_bench.py": b"import torch\n",
             "tests/test_04_accounting.py": b'@pytest.mark.grade("04.1", points=1)\n',
             "tests/hidden_x/test_extra.py": b"", "tests/hidden_x/test_12_more.py": b""}
    assert test_files(files, "12") == ["tests/hidden_x/test_12_more.py", "tests/hidden_x/test_extra.py",
                                       "tests/test_12_roofline.py"]
    actual = {p.relative_to(ROOT).as_posix(): p.read_bytes() for p in (ROOT / "tests").glob("test_[0-9][0-9]_*.py")}
    for lesson in sorted({e[:2] for e in EXERCISES}):
        chosen = test_files(actual, lesson)
        graded = {path for path in chosen if f'grade("{lesson}.' in actual[path].decode()}
        assert chosen and set(chosen) == graded, f"lesson {lesson}: {chosen}"
