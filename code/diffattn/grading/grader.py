"""`diffattn grade`: grade every exercise in its own child process and write results.json.

The parent never imports submission code. Per exercise (one exercises/exNN_*.py file, all its parts) it:

1. lays out a private grading tree in a temporary folder: the pristine package, tests, adapters and plugin (read
   into memory once, checked against MANIFEST.sha256 when the tree has one), hidden test folders under
   tests/hidden_<k>/, and a copy of the submission's .py files;
2. starts `python -I` on child.py there (children.py: scrubbed environment, own session, memory, CPU-time, file-size
   and core limits, a wall-clock timeout; stdout and stderr drained and capped), `--jobs` children at a time;
3. reads the child's signed report from a pipe (protocol.py); a child that exits, hangs, crashes, is killed, prints
   too much, reports garbage, or changes a file of the grading tree or of the checkout scores 0 for that exercise,
   with the reason, and the checkout is restored (a checkout change found while several ran is pinned on one by
   grading those again one at a time);
4. writes results.json itself, atomically, in Gradescope's format, and prints one row per exercise part with the
   failure that says most about what is wrong (report.py).

Exit status 0 when grading completed (whatever the score), 1 when the grader itself failed (a test file that does
not import, no graded tests), 2 for bad arguments, and 3 with --fail-below-full when some graded test failed (what
GitHub Classroom's command grader needs: it awards a rubric line's points on exit status 0).
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diffattn.core.errors import require
from diffattn.grading.children import Child, Outcome, default_jobs, run_children
from diffattn.grading.protocol import MAX_TEXT, ProtocolError, check_result, check_test
from diffattn.grading.report import details_text, hidden_summary, summary
from diffattn.grading.tree import (hidden_files, lay_out, manifest_problems, pristine_files, restore, snapshot,
                                   tree_changes)
from diffattn.core.results import write_json_atomic

EXERCISE_FILE = re.compile(r"^ex(\d\d)_\w+\.py$")
HYPOTHESIS_PLUGIN = "_hypothesis_pytestplugin"  # Hypothesis' pytest plugin module (entry point "hypothesis")


@dataclass
class Options:
    root: Path
    impl: str = "exercises"
    only: list[str] = field(default_factory=list)
    tests: list[Path] = field(default_factory=list)
    submission: Path | None = None
    json_path: Path | None = None
    timeout: float = 60.0
    memory_mb: int = 3072
    jobs: int = field(default_factory=default_jobs)  # children at a time
    forbid_reference_imports: bool = False
    fail_below_full: bool = False


@dataclass
class Verdict:
    """One exercise's outcome: per-test results, or a reason that zeroes the whole exercise."""

    exercise: str
    tests: list[dict[str, Any]] = field(default_factory=list)
    results: dict[str, tuple[bool, str]] = field(default_factory=dict)
    zero: str | None = None  # why the whole exercise scores 0
    policy: list[str] = field(default_factory=list)
    error: str | None = None  # the grader failed on this exercise


def test_files(files: dict[str, str | bytes], lesson: str) -> list[str]:
    """The public and hidden test files that can hold lesson `lesson`'s graded tests: test_NN_*.py that carry a grade
    marker, and hidden test files that do not name a lesson (the marker filter picks the right tests out of those).
    A lesson's ungraded test files stay out: importing them (PyTorch, trained models) would only slow grading."""
    chosen = []
    for path in sorted(files):
        name = path.rsplit("/", 1)[-1]
        lesson_file = re.match(r"^test_(\d\d)_", name)
        marked = "mark.grade(" in (files[path] if isinstance(files[path], str) else files[path].decode("utf-8", "replace"))
        public = path.count("/") == 1 and path.startswith("tests/") and marked
        hidden = path.startswith("tests/hidden_") and name.startswith("test_")
        if (public or hidden) and lesson_file and lesson_file.group(1) == lesson or (hidden and not lesson_file):
            chosen.append(path)
    return chosen


def pytest_args(tree: Path, exercise: str, impl: str, chosen: list[str]) -> list[str]:
    """The child's pytest command line: quiet, output not captured (the parent counts it), no cache, no per-test
    timeout (the parent's clock rules), only `exercise`'s graded tests.

    No plugin is loaded from the installed packages' entry points but Hypothesis' own, named: pytest rewrites the
    asserts of every module of a distribution that declares a plugin, so autoloading made each child compile all of
    Hypothesis' ~90 modules afresh (`-B`, and a new tree each time: nothing is cached), about a second per exercise."""
    plugins = ["-p", HYPOTHESIS_PLUGIN] if importlib.util.find_spec(HYPOTHESIS_PLUGIN) else []
    return ["-q", "-s", "-p", "no:cacheprovider", "-p", "no:timeout", "--disable-plugin-autoload", *plugins,
            "-W", "ignore::pytest.PytestConfigWarning",
            "--rootdir", str(tree), "-c", str(tree / "pyproject.toml"), "--tb=short", "--no-header",
            "-m", f"graded and {exercise}", f"--impl={impl}", *[str(tree / p) for p in chosen]]


def read_report(verdict: Verdict, messages: list[dict[str, Any]]) -> None:
    """Fill `verdict` from the child's checked messages; raises ProtocolError on a report that makes no sense."""
    known: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for message in messages:
        kind = message["kind"]
        if kind == "collected":
            if known:
                raise ProtocolError("the tests were collected twice")
            verdict.tests = [check_test(t) for t in message["tests"]]
            known = {t["nodeid"]: t for t in verdict.tests}
        elif kind == "result":
            nodeid, passed, output = check_result(message, known, seen)
            verdict.results[nodeid] = (passed, output)
        elif kind == "violation":
            verdict.zero = str(message["reason"])[:MAX_TEXT]
        elif kind == "policy":
            verdict.policy = [str(f)[:500] for f in message["findings"]]
        elif kind == "error":
            verdict.error = f"{verdict.exercise}: {str(message['reason'])[:MAX_TEXT]}"


class Exercise:
    """One exercise's private grading tree (a temporary folder) and the child that grades it."""

    def __init__(self, exercise: str, files: dict[str, bytes], hidden: dict[str, bytes], submission: dict[str, bytes],
                 options: Options):
        self.exercise, self.pristine = exercise, {**files, **hidden}
        self.scratch = tempfile.TemporaryDirectory(prefix=f"diffattn-grade-{exercise}-")
        self.tree, work = Path(self.scratch.name) / "tree", Path(self.scratch.name) / "work"
        work.mkdir()
        lay_out(self.tree, files, submission, hidden)
        self.setup = {"root": str(self.tree), "workdir": str(work), "exercise": exercise, "impl": options.impl,
                      "pytest_args": pytest_args(self.tree, exercise, options.impl, test_files(self.pristine, exercise[2:]))}
        self.options = options

    def start(self) -> Child:
        try:
            return Child(self.tree, self.setup, self.options.timeout, self.options.memory_mb)
        except BaseException:
            self.scratch.cleanup()
            raise

    def changed(self) -> list[str]:
        """Once its child has ended: the grading files it changed, removed or added; then the tree is removed."""
        try:
            return tree_changes(self.tree, self.pristine)
        finally:
            self.scratch.cleanup()


def judge(exercise: str, outcome: Outcome, changed: list[str], restored: list[str], kept: Path | None,
          options: Options) -> Verdict:
    """The verdict from a child's outcome, the grading files it changed and the checkout files it changed."""
    messages, output, reason = outcome
    verdict = Verdict(exercise)
    try:
        read_report(verdict, messages)
    except (ProtocolError, KeyError, TypeError, AttributeError) as error:
        verdict.tests, verdict.results = [], {}
        reason = reason or f"reported garbage ({error})"
    if not verdict.tests and verdict.error is None:
        verdict.error = f"{exercise}: the grader failed before importing the submission ({reason}): {output[-300:]}"
    reasons = [reason or verdict.zero,
               changed and f"changed the grader's files ({', '.join(changed[:3])})",
               restored and f"changed the checkout ({', '.join(restored[:3])}), which was restored; "
                            f"the changed files are kept in {kept} (saved a file while grading ran? copy it back)"]
    verdict.zero = "; ".join(r for r in reasons if r) or None
    missing = [t["nodeid"] for t in verdict.tests if t["nodeid"] not in verdict.results]
    if not verdict.zero and missing:
        verdict.zero = f"reported no result for {len(missing)} test(s), e.g. {missing[0]}"
    if not verdict.zero and options.forbid_reference_imports and verdict.policy:
        verdict.zero = f"uses the reference solution ({verdict.policy[0]})"
    return verdict


def grade_exercises(exercises: list[str], files: dict[str, bytes], submission: dict[str, bytes],
                    hidden: dict[str, bytes], options: Options, checkout: dict[str, bytes], skip: set[Path],
                    jobs: int) -> dict[str, Verdict]:
    """Grade `exercises`, `jobs` children at a time; every verdict is the one a one-at-a-time run gives.

    The checkout is compared with `checkout` (and restored) as each child ends. A change found while others ran
    cannot be pinned on one of them, so the children that were running then are all graded again, one at a time,
    where each change is its own child's."""
    trees: dict[str, Exercise] = {}

    def starter(exercise: str) -> Child:
        trees[exercise] = Exercise(exercise, files, hidden, submission, options)
        return trees[exercise].start()

    verdicts: dict[str, Verdict] = {}
    again: set[str] = set()
    for exercise, outcome, running in run_children({e: functools.partial(starter, e) for e in exercises}, jobs):
        changed = trees.pop(exercise).changed()
        restored, kept = restore(options.root, checkout, skip)
        if restored and running:
            again |= {exercise, *running}
            print(f"grading: the checkout changed ({', '.join(restored[:3])}) while {exercise} and "
                  f"{', '.join(running)} ran side by side; it was restored (the changed files are kept in {kept}); "
                  f"those exercises are graded again one at a time", file=sys.stderr)
        verdicts[exercise] = judge(exercise, outcome, changed, restored, kept, options)
    if again:
        verdicts.update(grade_exercises([e for e in exercises if e in again], files, submission, hidden, options,
                                        checkout, skip, jobs=1))
    return verdicts


# ---------------------------------------------------------------------------------------------------- all of it


def discover(root: Path) -> list[str]:
    """Exercises are the exNN_*.py files of the grading tree's exercises/ folder: ex01, ex02, ..."""
    folder = root / "exercises"
    return sorted({f"ex{m.group(1)}" for p in folder.glob("ex*.py") if (m := EXERCISE_FILE.match(p.name))})


def submission_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.py")) if p.is_file()}


def check_options(options: Options, known: list[str]) -> list[str]:
    """The exercises to grade; ConfigError (one line, exit 2) for anything that cannot be graded as asked."""
    require(options.timeout > 0, f"--timeout must be > 0 seconds (got {options.timeout:g})")
    require(options.memory_mb >= 256, f"--memory must be at least 256 MiB (got {options.memory_mb})")
    require(options.jobs >= 1, f"--jobs must be at least 1 (got {options.jobs})")
    named = [e.strip() for item in options.only for e in item.split(",") if e.strip()]  # EX="ex01 ex02" or ex01,ex02
    wanted = [e if e.startswith("ex") else f"ex{e}" for e in named] or known
    unknown = [e for e in wanted if e not in known]
    require(not unknown, f"unknown exercise {', '.join(unknown)} (known: {', '.join(known)})")
    for folder in options.tests:
        require(folder.is_dir(), f"--tests {folder}: no such folder")
    if options.submission is not None:
        require(options.submission.is_dir(), f"--submission {options.submission}: no such folder")
    if options.impl not in ("exercises", "reference"):
        module = options.root.joinpath(*options.impl.split(".")).with_suffix(".py")
        require(re.fullmatch(r"[A-Za-z_][\w.]*", options.impl) is not None and module.is_file(),
                f"--impl {options.impl}: expected exercises, reference or a module such as tests.wrong.w01_softmax_in_place")
    return list(dict.fromkeys(wanted))


def grade(options: Options) -> tuple[dict[str, Any], list[Verdict]]:
    """Grade the exercises; returns the results.json document and the verdicts."""
    started = time.monotonic()
    root = options.root
    exercises = check_options(options, discover(root))
    files = pristine_files(root)
    problems = manifest_problems(root, files)
    submission = submission_files(options.submission or root / "exercises")
    hidden = hidden_files(options.tests)
    skip = {options.json_path.resolve()} if options.json_path else set()
    checkout = snapshot(root, skip)
    graded = grade_exercises(exercises, files, submission, hidden, options, checkout, skip, options.jobs)
    verdicts = [graded[exercise] for exercise in exercises]  # the command's order, whichever child ended first
    for verdict in verdicts:
        exercise = verdict.exercise
        untrusted = [problem for path, problem in problems.items()
                     if not re.match(r"^tests/test_\d\d_", path) or path.startswith(f"tests/test_{exercise[2:]}_")]
        if untrusted and verdict.tests:
            verdict.zero = f"not graded: {untrusted[0]}"
        expected = sorted(p.name for p in (root / "exercises").glob(f"{exercise}_*.py"))
        if options.impl == "exercises" and expected and expected[0] not in submission:
            verdict.zero = f"not submitted: the submission has no {expected[0]}"
    return results_document(verdicts, time.monotonic() - started), verdicts


def results_document(verdicts: list[Verdict], seconds: float) -> dict[str, Any]:
    """Gradescope's results.json: per-test score, max_score, status, output, visibility; the table as `output`."""
    tests = []
    for verdict in verdicts:
        numbers: dict[str, int] = {}
        for test in verdict.tests:
            passed, output = verdict.results.get(test["nodeid"], (False, "did not run"))
            if verdict.zero:
                passed, output = False, f"{verdict.exercise} scores 0: {verdict.zero}"
            numbers[test["part"]] = numbers.get(test["part"], 0) + 1
            tests.append({
                "name": f"{test['part']} {test['title']}: {test['nodeid'].split('::')[-1]}",
                "number": f"{test['part']}.{numbers[test['part']]}",
                "score": test["points"] if passed else 0.0,
                "max_score": test["points"],
                "status": "passed" if passed else "failed",
                "output": output,
                "tags": [test["part"], verdict.exercise],
                "visibility": test["visibility"],
            })
    return {"score": sum(t["score"] for t in tests), "max_score": sum(t["max_score"] for t in tests),
            "execution_time": round(seconds, 2), "output": summary(verdicts, tests), "visibility": "visible",
            "tests": tests}


def main(options: Options, details: bool = False) -> int:
    document, verdicts = grade(options)
    if options.json_path:
        write_json_atomic(options.json_path, document)
    print(document["output"])
    if hidden_summary(document["tests"]):
        print(hidden_summary(document["tests"]))
    if details and details_text(document["tests"]):
        print(f"\n{details_text(document['tests'])}")
    else:
        failing = next((t["tags"][1] for t in document["tests"] if t["status"] == "failed"
                        and t["visibility"] == "visible"), None)
        if failing:
            print(f"every failing test's message in full: add --details (make grade EX={failing} DETAILS=1)")
    if options.json_path:
        print(f"wrote {options.json_path} in {document['execution_time']:g} s")
    if any(v.error for v in verdicts):
        return 1
    return 3 if options.fail_below_full and document["score"] < document["max_score"] else 0
