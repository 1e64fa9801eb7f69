"""Hostile submissions: each file in tests/grading/hostile/ is an ex01_softmax.py that attacks the grader.

Each is graded by the real command (`diffattn grade --only ex01 ex04 --jobs 2`) in a temporary copy of
this repository, next to a correct ex04 graded at the same time (so an attack on the checkout must be pinned on ex01
while both ran). ex01 must score 0 with the reason on the file's `# expect:` line, ex04 must keep
the clean run's score, results.json must be valid, the command must exit 0, and the copy must be unchanged. The limits
are short here (seconds); the defaults are for real use.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = sorted((ROOT / "tests" / "grading" / "hostile").glob("*.py"))
TIMEOUT, MEMORY = 15, 768  # seconds and MiB per exercise: ample for ex01/ex04 (3-4 s) even side by side
CORRECT = {
    "ex01_softmax.py": "from diffattn.pure.softmax import softmax\n",
    "ex04_accounting.py": "from diffattn.pure.accounting import attention_params, kv_cache_bytes_per_token\n",
}
IGNORED = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", "mutants"}


def copy_checkout(target: Path) -> Path:
    """This repository without caches, virtual environments or trained checkpoints (the grader needs none of them;
    outputs/checkpoints can hold hundreds of MB), with a correct ex01 and ex04 (re-exports)."""
    def ignore(folder: str, names: list[str]) -> set[str]:
        checkpoints = {"checkpoints"} if Path(folder) == ROOT / "outputs" else set()
        return {n for n in names if n in IGNORED | checkpoints or n == "results.json"}

    shutil.copytree(ROOT, target, ignore=ignore)
    for name, source in CORRECT.items():
        (target / "exercises" / name).write_text(source)
    return target


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not IGNORED & set(p.relative_to(root).parts)}


def grade(checkout: Path, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    command = [sys.executable, "-m", "diffattn", "grade", "--only", "ex01", "ex04", "--timeout", str(TIMEOUT),
               "--memory", str(MEMORY), "--jobs", "2", "--json", str(out), *extra]
    env = {**os.environ, "PYTHONPATH": str(checkout / "code")}
    run = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, timeout=8 * TIMEOUT)
    return run, json.loads(out.read_text())


def per_exercise(results: dict) -> dict[str, tuple[float, float, list[str]]]:
    totals: dict[str, tuple[float, float, list[str]]] = {}
    for test in results["tests"]:
        got, most, outputs = totals.get(test["tags"][1], (0.0, 0.0, []))
        totals[test["tags"][1]] = (got + test["score"], most + test["max_score"], outputs + [test["output"]])
    return totals


def assert_gradescope_shaped(results: dict) -> None:
    assert set(results) >= {"score", "max_score", "execution_time", "output", "tests"}
    for test in results["tests"]:
        assert set(test) >= {"name", "number", "score", "max_score", "status", "output", "visibility"}
        assert test["status"] in ("passed", "failed") and 0 <= test["score"] <= test["max_score"]
        assert test["visibility"] in ("visible", "hidden")
    assert results["score"] == sum(t["score"] for t in results["tests"])


@dataclass
class Graded:
    run: subprocess.CompletedProcess
    results: dict
    changed: list[str]  # files of the checkout that differ after grading


def grade_case(base: Path, scratch: Path, hostile: Path | None, *extra: str) -> Graded:
    """Grade a fresh copy of `base` with `hostile` as its ex01_softmax.py (None: the correct one)."""
    checkout = scratch / "repo"
    shutil.copytree(base, checkout)
    if hostile is not None:
        shutil.copy(hostile, checkout / "exercises" / "ex01_softmax.py")
    before = files(checkout)
    run, results = grade(checkout, scratch / "results.json", *extra)
    after = files(checkout)
    return Graded(run, results, sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k)))


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, Graded]:
    """Every case graded up front, one at a time: each grader run already uses two cores (ex01 beside ex04), and a
    second run beside it would leave a correct ex04 sharing two cores with two endless loops."""
    base = copy_checkout(tmp_path_factory.mktemp("hostile") / "base")
    cases = {"clean": (None,), "forbid": (None, "--forbid-reference-imports"), **{p.stem: (p,) for p in HOSTILE}}
    return {name: grade_case(base, tmp_path_factory.mktemp(name), *args) for name, args in cases.items()}


@pytest.fixture(scope="module")
def clean(graded: dict[str, Graded]) -> dict:
    run, totals = graded["clean"].run, per_exercise(graded["clean"].results)
    assert run.returncode == 0, run.stdout + run.stderr
    assert totals["ex01"][0] == totals["ex01"][1] > 0 and totals["ex04"][0] == totals["ex04"][1] > 0, run.stdout
    assert "ex01 policy: ex01_softmax.py: softmax is the reference diffattn.pure.softmax.softmax" in run.stdout
    return totals


@pytest.mark.parametrize("hostile", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_hostile_submission_scores_zero_and_harms_nothing_else(hostile: Path, graded: dict[str, Graded], clean: dict):
    expect = hostile.read_text().splitlines()[0].removeprefix("# expect: ")
    case = graded[hostile.stem]
    assert case.run.returncode == 0, case.run.stdout[-2000:] + case.run.stderr[-2000:]
    assert_gradescope_shaped(case.results)
    totals = per_exercise(case.results)
    got, most, outputs = totals["ex01"]
    assert got == 0 and most == clean["ex01"][1], case.run.stdout
    assert any(expect in output for output in outputs), f"expected {expect!r}; got {outputs[0]!r}"
    assert totals["ex04"] == clean["ex04"], case.run.stdout
    assert case.changed == [], f"the checkout changed: {case.changed}"
    assert case.results["execution_time"] <= 2 * TIMEOUT + 10  # within the sum of the per-exercise limits


def test_forbidding_reference_imports_zeroes_a_re_export(graded: dict[str, Graded]):
    totals = per_exercise(graded["forbid"].results)
    assert totals["ex01"][0] == 0 and "uses the reference solution" in totals["ex01"][2][0], graded["forbid"].run.stdout
    assert totals["ex04"][0] == 0  # ex04 re-exports its reference too
