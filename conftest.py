"""Root pytest plugin: the `--impl` option and the Hypothesis profiles (loaded before any argument is parsed).

Grading itself is `diffattn grade` (`make grade`): it runs these same tests once per exercise, in a child
process, and writes results.json (see diffattn/grading/). `pytest -m graded --impl=exercises` still runs the graded
tests on exercises/ in this process, without that isolation: handy while developing a test.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
for extra in (ROOT / "code", ROOT):  # exercises/ is not on the path: tests/adapters.py loads those files by name
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("diffattn grading")
    group.addoption("--impl", default=os.environ.get("DIFFATTN_IMPL", "reference"),
                    help="reference | exercises | tests.wrong.<module> (see tests/adapters.py)")


def pytest_configure(config: pytest.Config) -> None:
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
