"""In a student's handout, each reference function an exercise re-implements calls the student's own (its body is
`return solution("ex01_softmax", "softmax")(logits)`, written by diffattn.grading.handout): lessons, notebooks and the
rest of the package then run on the student's code, and until an exercise is written they stop with one line naming
it (diffattn.cli). The course's own checkout never calls this module."""

from __future__ import annotations

import importlib.util
import sys
import threading
from typing import Any, Callable

from diffattn.core.errors import ConfigError
from diffattn.core.paths import repo_root

_running = threading.local()


def solution(module: str, name: str) -> Callable[..., Any]:
    """exercises/<module>.py's `name`, loaded once from the checkout's exercises/ folder. A solution that calls the
    reference it replaces would call itself: that is refused with one line instead of a RecursionError."""
    loaded = sys.modules.get(f"_yours_{module}")
    if loaded is None:
        path = repo_root() / "exercises" / f"{module}.py"
        spec = importlib.util.spec_from_file_location(f"_yours_{module}", path)
        if spec is None or not path.is_file():
            raise ConfigError(f"exercises/{module}.py is missing: the handout's {name} runs your solution from it")
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = loaded
        spec.loader.exec_module(loaded)
    function = getattr(loaded, name)

    def yours(*args: Any, **kwargs: Any) -> Any:
        active = _running.__dict__.setdefault("names", set())
        if (module, name) in active:
            raise ConfigError(f"exercises/{module}.py: your {name} calls diffattn's {name}, which in the handout is "
                              f"yours: write it without it")
        active.add((module, name))
        try:
            return function(*args, **kwargs)
        finally:
            active.discard((module, name))

    return yours
