"""`make handout DEST=dir`: the student copy holds no solution, and its own grader gives the stubs 0 with clean reasons.

The handout is built from this checkout's HEAD (git archive), then graded by its own
`diffattn grade` (one child process per exercise), as a student would run `make grade` in it. Its
exercises/ are the canonical stubs (tests/grading/stubs/) whatever the checkout's exercises/ holds, committed or not.
"""

from __future__ import annotations

import ast
import re
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from diffattn.grading.handout import LEFT_OUT, STUBS, raises_not_implemented, solution_lines
from diffattn.grading.rubric import EXERCISES
from tests.conftest import HAS_TORCH

ROOT = Path(__file__).resolve().parents[1]
TEXT = {".py", ".md", ".ipynb", ".txt", ".toml", ".yml", ".json", ".sh", ""}
MODULES = sorted({module for _, module, _ in EXERCISES.values()})
SOLVED_SOFTMAX = ("import math\n\n\ndef softmax(logits):\n    instructor_solution_marker_x9 = max(logits)\n"
                  "    e = [math.exp(z - instructor_solution_marker_x9) for z in logits]\n    return [x / sum(e) for x in e]\n")


def clone(tmp_path: Path) -> Path:
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(checkout)], check=True, timeout=120)
    return checkout


def commit(checkout: Path, message: str) -> None:
    subprocess.run(["git", "-C", str(checkout), "-c", "user.name=instructor", "-c", "user.email=i@example.org",
                    "commit", "-qam", message], check=True, timeout=60)


def make_handout(checkout: Path, dest: Path, *args: str) -> subprocess.CompletedProcess:
    """What `make handout DEST=dest` runs, in `checkout`."""
    return subprocess.run([sys.executable, "-m", "diffattn.grading.handout", str(dest), *args], cwd=checkout,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(checkout / "code")})


@pytest.fixture(scope="module")
def handout(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("handout") / "course"
    run = subprocess.run([sys.executable, "-m", "diffattn.grading.handout", str(dest)], cwd=ROOT, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "code")}, timeout=300)
    assert run.returncode == 0, run.stderr
    return dest


def test_no_solution_line_is_left_anywhere(handout: Path):
    solutions = solution_lines(ROOT)
    assert all(solutions.values()), "every exercised function has distinctive lines to look for"
    leaks = []
    for path in handout.rglob("*"):
        if path.is_file() and path.suffix in TEXT:
            text = {line.split("  #")[0].strip() for line in path.read_text(encoding="utf-8").splitlines()}
            leaks += [f"{path.relative_to(handout)}: {name}" for name, lines in solutions.items() if lines & text]
    assert not leaks, leaks
    assert not any((handout / p.rstrip("/")).exists() for p in LEFT_OUT if p.endswith((".py", "/")))


def test_handout_grades_the_stubs_to_zero_with_clean_reasons(handout: Path):
    out = handout / "results.json"
    lessons = ["ex01", "ex02", "ex03", "ex04", "ex12"] + (["ex05", "ex07"] if HAS_TORCH else [])
    run = subprocess.run([sys.executable, "-m", "diffattn", "grade", "--only", *lessons, "--json", str(out)],
                         cwd=handout, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "PYTHONPATH": str(handout / "code")})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["score"] == 0 and report["max_score"] > 0
    unclean = [t["name"] for t in report["tests"] if "NotImplementedError: exercise" not in t["output"]]
    assert not unclean, unclean
    assert "policy" not in run.stdout and "grader error" not in run.stdout, run.stdout


def test_handout_reports_an_edited_test_instead_of_trusting_it(handout: Path, tmp_path):
    test_file = handout / "tests" / "test_01_softmax.py"
    original = test_file.read_text()
    test_file.write_text(original.replace("assert ", "assert True or "))
    try:
        run = subprocess.run([sys.executable, "-m", "diffattn", "grade", "--only", "ex01", "--json",
                              str(tmp_path / "r.json")], cwd=handout, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "PYTHONPATH": str(handout / "code")})
    finally:
        test_file.write_text(original)
    assert run.returncode == 0, run.stderr
    assert "tests/test_01_softmax.py differs from MANIFEST.sha256" in run.stdout


def test_a_handout_from_a_checkout_with_done_exercises_ships_only_the_committed_stubs(tmp_path):
    """An instructor tries the exercises in their checkout, then runs `make handout`: the handout is built from HEAD,
    so neither their solution nor an edited reference reaches it, every exercised function is its stub, and the
    command says what it left out."""
    from diffattn.grading.handout import build_from_head, definitions, uncommitted

    checkout = clone(tmp_path)
    stub = (checkout / STUBS / "ex01_softmax.py").read_bytes()
    marker = "instructor_solution_marker_x9"
    (checkout / "exercises" / "ex01_softmax.py").write_text(SOLVED_SOFTMAX)
    reference = checkout / "code" / "diffattn" / "pure" / "softmax.py"
    reference.write_text(reference.read_text() + f"\n# {marker}\n")
    dest = tmp_path / "handout"
    build_from_head(checkout, dest)  # what `make handout` runs, on the instructor's checkout
    assert uncommitted(checkout) == ["code/diffattn/pure/softmax.py", "exercises/ex01_softmax.py"]
    assert (dest / "exercises" / "ex01_softmax.py").read_bytes() == stub
    assert not [p for p in dest.rglob("*") if p.is_file() and marker.encode() in p.read_bytes()]
    for name, (ref_file, ref_node, stub_file, stub_node) in definitions(dest, "exercises").items():
        # the stub's signature and docstring, then only the call to the student's function (diffattn.core.yours)
        assert ast.dump(ref_node.args) == ast.dump(stub_node.args), name
        assert ast.get_docstring(ref_node) == ast.get_docstring(stub_node), name
        body = [ast.unparse(statement) for statement in ref_node.body[1:]]
        assert body[0] == "from diffattn.core.yours import solution", (name, body)
        assert body[1:] == [f"return solution({stub_file.stem!r}, {name!r})"
                            f"({', '.join(a.arg for a in ref_node.args.args)})"], (name, body)


def test_in_the_handout_lessons_run_on_the_students_exercises(handout: Path, tmp_path):
    """What the handout's README promises: lesson 01 stops with one line naming exercise 01.1 until it is written,
    then runs on the student's own softmax."""
    copy = tmp_path / "course"
    shutil.copytree(handout, copy)
    assert "This is the student handout" in (copy / "README.md").read_text()

    def lesson_01() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "diffattn", "lesson", "01"], cwd=copy, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(copy / "code")}, timeout=300)

    waiting = lesson_01()
    assert waiting.returncode == 2 and waiting.stderr.count("\n") == 1, waiting.stderr
    assert waiting.stderr.startswith("error: lesson 01 runs on your exercise 01.1") and "EX=ex01" in waiting.stderr
    (copy / "exercises" / "ex01_softmax.py").write_text(
        "import math\n\n\ndef softmax(logits):\n    if not logits or any(math.isnan(z) or z == math.inf for z in logits):\n"
        "        raise ValueError('bad row')\n    top = max(logits)\n    if top == -math.inf:\n"
        "        raise ValueError('all masked')\n    e = [math.exp(z - top) for z in logits]\n"
        "    total = math.fsum(e)\n    return [x / total for x in e]\n")
    done = lesson_01()
    assert done.returncode == 0 and "softmax of a 128,000-token row" in done.stdout, done.stderr[-2000:]


def test_a_committed_solution_ships_as_its_stub(tmp_path):
    """An instructor solves ex01 in their checkout and commits it: `make handout` still ships the canonical stub,
    says that exercises/ differed, and with EXERCISES its Classroom workflow grades that assignment only."""
    checkout = clone(tmp_path)
    (checkout / "exercises" / "ex01_softmax.py").write_text(SOLVED_SOFTMAX)
    commit(checkout, "my solution of ex01")
    run = make_handout(checkout, tmp_path / "handout", "--exercises", "ex01")
    assert run.returncode == 0, run.stderr
    functions = {fn for _, _, fns in EXERCISES.values() for fn in fns}
    assert f"{len(functions)} reference functions replaced by their stubs" in run.stdout
    assert "differs from the stubs in exercises/ex01_softmax.py: the handout has the stubs" in run.stdout
    dest = tmp_path / "handout"
    assert (dest / "exercises" / "ex01_softmax.py").read_bytes() == (ROOT / STUBS / "ex01_softmax.py").read_bytes()
    assert not [p for p in dest.rglob("*") if p.is_file() and b"instructor_solution_marker_x9" in p.read_bytes()]
    workflow = (dest / ".github" / "workflows" / "classroom.yml").read_text()
    assert "--only ex01 " in workflow and "--only ex02 " not in workflow and "runners: ex01\n" in workflow


def test_a_stub_that_is_a_solution_stops_the_build_with_one_line(tmp_path):
    """The check behind it: every exercise function of the handout must raise NotImplementedError. A solution
    committed over a canonical stub is refused, and nothing is left in DEST."""
    checkout = clone(tmp_path)
    (checkout / STUBS / "ex01_softmax.py").write_text(SOLVED_SOFTMAX)
    commit(checkout, "a solution where the stub belongs")
    run = make_handout(checkout, tmp_path / "handout")
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and run.stdout == "", run.stderr
    assert run.stderr == ("error: the handout would ship a solution: exercises/ex01_softmax.py: softmax does not raise "
                          "NotImplementedError (its body is not the stub's)\n")
    assert not (tmp_path / "handout").exists()


@pytest.mark.parametrize("module", MODULES)
def test_each_exercise_has_one_canonical_stub_and_exercises_is_a_copy_of_it(module):
    """tests/grading/stubs/ declares each exercise once; exercises/ is the working copy that starts as it. An
    unsolved exercises/ file that differs from its stub is a spec edited in the wrong place."""
    stub = ROOT / STUBS / f"{module}.py"
    assert stub.is_file(), f"{STUBS}/{module}.py is missing: copy the unsolved exercises/{module}.py there"
    functions = {fn for _, m, fns in EXERCISES.values() if m == module for fn in fns}
    defined = {n.name: n for n in ast.parse(stub.read_text()).body if isinstance(n, ast.FunctionDef)}
    assert functions <= set(defined) and all(raises_not_implemented(defined[fn]) for fn in functions), module
    working = ROOT / "exercises" / f"{module}.py"
    tree = ast.parse(working.read_text())
    mine = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if all(fn in mine and raises_not_implemented(mine[fn]) for fn in functions):
        assert working.read_bytes() == stub.read_bytes(), f"exercises/{module}.py differs from {STUBS}/{module}.py: " \
                                                          f"edit the stub (the handout ships it), then copy it"


def test_an_instructor_can_keep_the_answers(tmp_path):
    """`make handout NO_ANSWERS=1`: lessons/answers/ stays with the instructor and the lessons' links to it become
    words, so no link in the handout points at a missing file; by default the answers ship."""
    from diffattn.grading.handout import build_from_head

    checkout = clone(tmp_path)
    (checkout / "lessons" / "answers").mkdir(exist_ok=True)
    (checkout / "lessons" / "answers" / "01.md").write_text("# 01 · answers\n\n1. Because.\n")
    lesson = next((checkout / "lessons").glob("01-*.md"))
    lesson.write_text(lesson.read_text() + "\nAnswers: [answers/01.md](answers/01.md).\n")
    subprocess.run(["git", "-C", str(checkout), "add", "lessons"], check=True, timeout=60)
    commit(checkout, "answers for lesson 01")
    kept, shipped = tmp_path / "kept", tmp_path / "shipped"
    build_from_head(checkout, kept, answers=False)
    build_from_head(checkout, shipped)
    assert not (kept / "lessons" / "answers").exists() and (shipped / "lessons" / "answers" / "01.md").is_file()
    assert not (kept / "lessons" / "src" / "answers").exists()
    text = next((kept / "lessons").glob("01-*.md")).read_text()
    assert "(answers/01.md)" not in text and "answers (from your instructor)" in text
    linked = [p.name for p in (checkout / "lessons").rglob("*.md") if "](../tests/wrong/" in p.read_text()
              or "](../../tests/wrong/" in p.read_text()]
    assert linked, "no lesson links a known-wrong answer: this check would check nothing"
    for name in linked:  # links into what a handout leaves out become their words
        assert not [p for p in kept.rglob(name) if "tests/wrong/)" in p.read_text()
                    or re.search(r"\]\([./]*tests/wrong/", p.read_text())], name
