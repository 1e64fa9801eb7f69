"""Fixtures shared by the tests: the implementation under test, and skips for missing PyTorch.

Graded tests take `impl` and call `impl.<function>`; `--impl` (registered in the root conftest.py) chooses the
reference, the student's exercises/, or a known-wrong module from tests/wrong/ (see tests/adapters.py).
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from diffattn.grading.hooks import AFTER_CALL
from diffattn.grading.rubric import EXERCISES
from tests.adapters import Implementation

HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest) -> Implementation:
    return Implementation(request.config.getoption("--impl"), request.config.stash.get(AFTER_CALL, None))


def pytest_configure(config: pytest.Config) -> None:
    for lesson in sorted({exercise[:2] for exercise in EXERCISES}):  # exNN markers follow the rubric
        config.addinivalue_line("markers", f"ex{lesson}: lesson {lesson} exercises")


def pytest_collection_finish(session: pytest.Session) -> None:
    """One PyTorch thread for the tests run in this process (as in the grader's children and the tests' own
    subprocesses): their tensors are tiny, and a second thread only waits for a core, which costs a scheduler time
    slice per operation on a busy machine (lessons 05-07 and 11's tests: 18.7 s of CPU with two threads, 11.8 s with
    one, side by side on a loaded 2-core machine). Collection imported PyTorch if any test needs it."""
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        grade = item.get_closest_marker("grade")
        if grade is not None:
            exercise = grade.args[0]
            if exercise not in EXERCISES:
                raise pytest.UsageError(f"{item.nodeid}: unknown exercise {exercise!r} (see code/diffattn/grading/rubric.py)")
            item.add_marker(pytest.mark.graded)
            item.add_marker(getattr(pytest.mark, f"ex{exercise[:2]}"))
        if item.get_closest_marker("torch") and not HAS_TORCH:
            item.add_marker(pytest.mark.skip(reason="PyTorch is not installed"))
