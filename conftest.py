"""Root pytest plugin: the grading options and report (loaded before any argument is parsed).

`pytest -m graded --impl=exercises --results-json=results.json` is `make grade`: it prints points per exercise and
writes a Gradescope results.json (tests[] with score/max_score/status/output). The implementation switch itself is
the `impl` fixture in tests/conftest.py; the rubric is tests/adapters.py.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
for extra in (ROOT / "code", ROOT / "exercises", ROOT):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from tests.adapters import EXERCISES  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("diffattn grading")
    group.addoption("--impl", default=os.environ.get("DIFFATTN_IMPL", "reference"),
                    help="reference | exercises | tests.wrong.<module> (see tests/adapters.py)")
    group.addoption("--results-json", default=None, help="write a Gradescope results.json here")


def pytest_configure(config: pytest.Config) -> None:
    config._gradebook = GradeBook()  # type: ignore[attr-defined]
    try:
        from hypothesis import HealthCheck, Phase, settings
    except ImportError:
        return
    # Same examples on every run (no flaky CI); a failing submission is reported, not shrunk (that takes minutes).
    settings.register_profile("course", derandomize=True, database=None, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("grading", parent=settings.get_profile("course"),
                              phases=[Phase.explicit, Phase.reuse, Phase.generate])
    settings.load_profile("course" if config.getoption("--impl") == "reference" else "grading")


class GradeBook:
    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}
        self.started = time.time()

    def record(self, item: pytest.Item, report: pytest.TestReport) -> None:
        grade = item.get_closest_marker("grade")
        if grade is None:
            return
        row = self.rows.setdefault(item.nodeid, {
            "exercise": grade.args[0],
            "points": float(grade.kwargs.get("points", 1)),
            "passed": True,
            "output": "",
        })
        if report.failed or (report.skipped and report.when == "call"):
            row["passed"] = False
            row["output"] = _short(report)

    def totals(self) -> dict[str, list[float]]:
        per: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for row in self.rows.values():
            per[row["exercise"]][1] += row["points"]
            per[row["exercise"]][0] += row["points"] if row["passed"] else 0.0
        return dict(sorted(per.items()))

    def gradescope(self) -> dict:
        tests = []
        for nodeid, row in self.rows.items():
            title = EXERCISES[row["exercise"]][0]
            tests.append({
                "name": f"{row['exercise']} {title}: {nodeid.split('::')[-1]}",
                "score": row["points"] if row["passed"] else 0.0,
                "max_score": row["points"],
                "status": "passed" if row["passed"] else "failed",
                "output": row["output"],
                "tags": [row["exercise"]],
                "visibility": "visible",
            })
        score = sum(t["score"] for t in tests)
        return {"score": score, "execution_time": round(time.time() - self.started, 2),
                "output": self.summary(), "visibility": "visible", "tests": tests}

    def summary(self) -> str:
        lines = [f"{'exercise':<8} {'title':<44} {'points':>12}"]
        got_all = max_all = 0.0
        for exercise, (got, most) in self.totals().items():
            lines.append(f"{exercise:<8} {EXERCISES[exercise][0]:<44} {got:>5g} / {most:<5g}")
            got_all, max_all = got_all + got, max_all + most
        lines.append(f"{'total':<53} {got_all:>5g} / {max_all:<5g}")
        return "\n".join(lines)


def _short(report: pytest.TestReport) -> str:
    text = getattr(report, "longreprtext", "") or str(report.longrepr)
    lines = [ln for ln in text.splitlines() if ln.startswith("E ") or "NotImplementedError" in ln]
    return "\n".join(lines[-6:]) or text[-600:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    item.config._gradebook.record(item, outcome.get_result())  # type: ignore[attr-defined]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write results.json here, not in the terminal summary, so it exists even when output is suppressed."""
    target = session.config.getoption("--results-json")
    if not target:
        return
    book: GradeBook = session.config._gradebook  # type: ignore[attr-defined]
    report = book.gradescope() if book.rows else {"score": 0, "output": "no graded tests ran", "tests": []}
    Path(target).write_text(json.dumps(report, indent=1, ensure_ascii=False))


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    book: GradeBook = config._gradebook  # type: ignore[attr-defined]
    target = config.getoption("--results-json")
    if book.rows and (config.getoption("--impl") != "reference" or target):
        terminalreporter.write_sep("=", f"grade report (--impl {config.getoption('--impl')})")
        terminalreporter.write_line(book.summary())
        if target:
            terminalreporter.write_line(f"wrote {target}")
        if any(not row["passed"] for row in book.rows.values()):
            terminalreporter.write_line(f'details of one lesson\'s failures: python -m pytest -m "graded and ex01" '
                                        f'--impl={config.getoption("--impl")} (replace 01 with the lesson)')
