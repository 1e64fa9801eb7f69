"""The one hook between the graded tests and the grader: after every call into an implementation, tests/adapters.py
calls the function stored under AFTER_CALL in pytest's config stash, with the function's name and the exception it
raised (or None). The grader's child process stores its Guard's check there (diffattn.grading.guard), to see that the
call left the grader intact."""

from __future__ import annotations

from typing import Callable

import pytest

AfterCall = Callable[[str, "BaseException | None"], None]
AFTER_CALL = pytest.StashKey[AfterCall]()
