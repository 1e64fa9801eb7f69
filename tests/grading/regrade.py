"""Grade several trusted implementations in one process: `python -m tests.grading.regrade JOBS.json`.

JOBS.json is a list of {"impl": ..., "exercise": "ex03", "out": ...}. Each job runs the grader's own pytest session
(diffattn.grading.child.GradingSession, without the integrity guard: these implementations are ours) and writes the
Gradescope results.json the grader would. tests/test_graders_reject_wrong.py uses it to grade every known-wrong
implementation without paying for a fresh interpreter (and a torch import) per implementation.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from diffattn.grading.child import GradingSession
from diffattn.grading.grader import Verdict, pytest_args, read_report, results_document, test_files
from diffattn.core.results import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]


class MemoryChannel:
    """The child's Channel, minus the pipe and the signature: messages are kept in a list."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def send(self, kind: str, **payload: Any) -> None:
        self.messages.append({"seq": len(self.messages), "kind": kind, **payload})


def grade(impl: str, exercise: str) -> dict[str, Any]:
    channel = MemoryChannel()
    session = GradingSession(channel, {"root": str(ROOT), "exercise": exercise, "impl": impl, "guard": False})
    chosen = test_files({p.relative_to(ROOT).as_posix(): p.read_bytes() for p in (ROOT / "tests").glob("test_*.py")},
                        exercise[2:])
    with contextlib.redirect_stdout(io.StringIO()):
        pytest.main(pytest_args(ROOT, exercise, impl, chosen), plugins=[session])
    session.finish(None)
    verdict = Verdict(exercise)
    read_report(verdict, channel.messages)
    return results_document([verdict], 0.0)


def main(jobs_file: str) -> int:
    for job in json.loads(Path(jobs_file).read_text()):
        write_json_atomic(Path(job["out"]), grade(job["impl"], job["exercise"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
