"""The child process: grade ONE exercise of ONE implementation, report to the parent, exit.

Started by grader.py as `python -I -c <bootstrap>` inside a private copy of the grading tree (see grader.py), with
its settings as one JSON line on standard input. The order matters:

1. pytest collects the exercise's graded tests (public and hidden) and the child sends their list and points:
   nothing of the submission has run yet, so the list cannot be forged.
2. The reference functions the tests use were bound when the test modules were imported, before the submission.
   Tripwires go on the exercise's reference modules, the Guard records the grader's state, and only then is the
   submission imported, from its file, with every exception (SystemExit, KeyboardInterrupt too) caught.
3. The tests run; every call into the submission and every test end is checked (guard.py). Results stream to the
   parent as they come. A violation stops the session: the exercise scores 0.
4. `done`, then `os._exit`: no atexit hook or lingering thread of the submission runs after the report.
"""

from __future__ import annotations

import json
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest

from diffattn.grading.guard import Guard
from diffattn.grading.hooks import AFTER_CALL
from diffattn.grading.policy import Tripwires, findings, reference_modules
from diffattn.grading.protocol import MAX_TEXT, Channel

HIDDEN_PREFIX = "tests/hidden_"


HYPOTHESIS_ADVICE = ("Verbosity.verbose", "@reproduce_failure", "@seed(", "HYPOTHESIS_")
WIDTH = 500  # characters a line of feedback keeps (the table wraps them; pytest's re-evaluations are dropped anyway)
HYPOTHESIS_CASE = re.compile(r"^(Failing|Falsifying)( explicit)? (test case|example): ")


def failure_text(report: Any) -> str:
    """The assertion or exception lines of a failed test report (pytest's `E` lines, made compact), or the skip
    reason."""
    if report.skipped and isinstance(report.longrepr, tuple):
        return f"skipped: {report.longrepr[2]}"
    text = getattr(report, "longreprtext", "") or str(report.longrepr)
    lines = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    return (compact(lines) or text[-1500:])[:MAX_TEXT]


def compact(lines: list[str]) -> str:
    """What a student needs from pytest's `E` lines: an assertion's own message without pytest's re-evaluation of
    the asserted expression (the `assert …` and `+ where …` lines, which print every float of the lists compared),
    Hypothesis' failing example on one line without the `impl` argument, none of Hypothesis' advice to developers."""
    first = lines[0] if lines else ""
    messaged = first.startswith("AssertionError: ") and not first.startswith("AssertionError: assert ")
    kept: list[str] = []
    example: list[str] | None = None
    for line in lines:
        if HYPOTHESIS_CASE.match(line):
            example = []
        elif example is not None and line != ")":
            example += [] if line.startswith("impl=") else [line.rstrip(",")]
        elif example is not None:
            kept.append(f"failing case: {', '.join(example)}")
            example = None
        elif not (messaged and line.startswith(("assert ", "+"))) and not any(a in line for a in HYPOTHESIS_ADVICE):
            kept.append(line)
    if example:  # cut off before its closing parenthesis
        kept.append(f"failing case: {', '.join(example)}")
    return "\n".join(line if len(line) <= WIDTH else line[: WIDTH - 1] + "…" for line in kept[:12])


def exception_line(error: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(error), error)).strip().splitlines()[-1][:500]


class GradingSession:
    """The pytest plugin that runs inside the child."""

    def __init__(self, channel: Channel, setup: dict[str, Any]):
        self.channel = channel
        self.root = Path(setup["root"])
        self.exercise = setup["exercise"]
        self.impl = setup["impl"]
        self.guarded = setup.get("guard", True)  # False only for trusted implementations graded in one process
        self.tests: dict[str, dict[str, Any]] = {}
        self.outcome: dict[str, list] = {}  # nodeid -> [passed so far, ran its body, first failure]
        self.errors: list[str] = []
        self.abort: str | None = None
        self.guard: Guard | None = None
        self.tripwires: Tripwires | None = None
        self.policy: list[str] = []
        self.source: Path | None = None
        self.skips: list[str] = []
        self.session: pytest.Session | None = None

    # -- collection: the list of tests is sent before any submission code runs --------------------------------

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.errors.append(f"{report.nodeid or 'collection'}: {failure_text(report)}")
        elif report.skipped:  # a whole test module skipped, e.g. pytest.importorskip("torch") without PyTorch
            self.skips.append(f"{report.nodeid} {failure_text(report)}")

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from diffattn.grading.rubric import EXERCISES

        self.session = session
        for item in session.items:
            part = item.get_closest_marker("grade").args[0]
            self.tests[item.nodeid] = {
                "nodeid": item.nodeid, "part": part, "title": EXERCISES[part][0],
                "points": float(item.get_closest_marker("grade").kwargs.get("points", 1)),
                "visibility": "hidden" if item.nodeid.startswith(HIDDEN_PREFIX) else "visible",
            }
        if self.errors or not self.tests:
            why = "; ".join(self.errors or self.skips) or "no test carries its marker"
            self.channel.send("error", reason=f"no graded test of {self.exercise} could run: {why}"[:MAX_TEXT])
            self.abort = "the grader could not collect the tests"
            return
        self.channel.send("collected", tests=list(self.tests.values()))
        self.prepare(session.config)

    def prepare(self, config: pytest.Config) -> None:
        from diffattn.grading.rubric import EXERCISES, REFERENCE, exercise_module, resolve

        functions = [fn for part, (_, module, fns) in EXERCISES.items() if part.startswith(self.exercise[2:] + ".")
                     for fn in fns]
        module_name = EXERCISES[next(p for p in EXERCISES if p.startswith(self.exercise[2:] + "."))][1]
        paths = {fn: REFERENCE[fn] for fn in functions}
        references = {fn: resolve(path) for fn, path in paths.items()}
        self.source = source = self.root / "exercises" / f"{module_name}.py"
        modules = reference_modules(references, paths)
        if self.impl == "exercises":
            self.tripwires = Tripwires(modules, str(source))
        if self.guarded:
            settle_torch_lazy_imports()
            self.guard = Guard(self.stop)
            config.stash[AFTER_CALL] = self.guard.after_call
        try:
            if self.impl == "exercises":
                loaded = exercise_module(module_name)
            elif self.impl != "reference":
                loaded = __import__(self.impl, fromlist=["OVERRIDES"])
        except BaseException as error:  # SystemExit and KeyboardInterrupt included: the import is the submission's
            shown = f"exercises/{module_name}.py" if self.impl == "exercises" else self.impl
            self.abort = f"importing {shown} raised {exception_line(error)}"
            return
        if self.guard is not None:
            self.guard.settle()
            if self.guard.check(self.guard.everything, "while being imported"):
                return
        if self.impl == "exercises":
            self.policy = findings(loaded, source, functions, references, modules, self.tripwires)

    # -- running ------------------------------------------------------------------------------------------------

    def stop(self, reason: str) -> None:
        if self.session is not None:
            self.session.shouldstop = reason

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        if self.abort or (self.guard and self.guard.violation):
            return True  # nothing runs: every test is reported failed with the reason
        return None

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo) -> None:
        if self.guard is not None:
            self.guard.report(f"the session was interrupted by {excinfo.typename}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        state = self.outcome.setdefault(report.nodeid, [True, False, ""])
        if report.when == "call":
            state[1] = True
        if report.failed or report.skipped:
            state[0] = False
            state[2] = state[2] or failure_text(report)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        passed, ran, output = self.outcome.get(nodeid, [False, False, "did not run"])
        violation = self.guard.after_test(nodeid) if self.guard else None
        self.channel.send("result", nodeid=nodeid, passed=passed and ran and violation is None, output=output)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.guard is not None and self.abort is None:  # before pytest unwinds its own import hooks
            self.guard.check(self.guard.everything, "by the end of the session")

    def finish(self, crash: str | None) -> None:
        if self.tripwires is not None:
            self.policy += [f"{self.source.name} called the reference {label}" for label in self.tripwires.calls]
        reason = crash or self.abort or (self.guard.violation if self.guard else None)
        if reason and self.tests:
            self.channel.send("violation", reason=reason[:MAX_TEXT])
        self.channel.send("policy", findings=self.policy)
        self.channel.send("done")


def settle_torch_lazy_imports() -> None:
    """Import what PyTorch would import on first use, before the guard records the interpreter.

    The first optimizer step (any `torch._disable_dynamo` function) imports torch._dynamo, which wraps
    `torch.manual_seed` and friends; a test that trains a model in a fixture would otherwise look like a submission
    that replaced them."""
    if "torch" in sys.modules:
        import torch._dynamo  # noqa: F401


def main() -> None:
    setup = json.loads(sys.stdin.readline())
    key = bytes.fromhex(setup.pop("key"))
    channel = Channel(os.fdopen(setup["report_fd"], "wb", buffering=0), key)
    del key
    os.chdir(setup["workdir"])
    import diffattn

    if not Path(diffattn.__file__).is_relative_to(Path(setup["root"])):  # the pristine copy, not an installed one
        channel.send("error", reason=f"diffattn was imported from {diffattn.__file__}, not from the grading copy")
        os._exit(0)
    plugin = GradingSession(channel, setup)
    crash = None
    try:
        pytest.main(setup["pytest_args"], plugins=[plugin])
    except BaseException as error:  # the session itself died (a KeyboardInterrupt raised outside any test, say)
        memory = " (memory limit exceeded)" if isinstance(error, MemoryError) else ""
        crash = f"the grading session stopped: {exception_line(error)}{memory}"
    plugin.finish(crash)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
