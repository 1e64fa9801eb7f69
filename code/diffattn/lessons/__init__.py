"""One module per lesson. Each lesson module defines:

    TITLE: str
    run(progress: bool = True) -> dict          computes every number the lesson quotes (JSON-serialisable)
    report(results: dict) -> str                the text `diffattn lesson NN` prints, from results alone
    figures(results: dict, outdir: Path) -> list[Path]   PNGs for the lesson (needs matplotlib)
    NUMBER_KINDS: dict (optional)               how far each result may move on another CPU (diffattn.core.numberkinds);
                                                results it does not name are Exact
    REQUIRES: tuple (optional)                  third-party packages the lesson needs; read from the source, so a
                                                missing one is reported before anything is imported

`report` depends only on `results`, so lessons can quote it verbatim and tests can rebuild it from numbers.json.
Lessons are found by file name (lessonNN_slug.py); nothing else lists them.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from diffattn.core.errors import ConfigError

HERE = Path(__file__).parent
LESSON_FILE = re.compile(r"^lesson(\d\d)_\w+\.py$")


def _discover() -> dict[str, str]:
    """{"NN": module} for every lessons/lessonNN_*.py: a new lesson's file is all it takes."""
    found = {}
    for path in sorted(HERE.glob("lesson*.py")):
        match = LESSON_FILE.match(path.name)
        if match:
            found[match.group(1)] = f"{__name__}.{path.stem}"
    return found


def _requirements(module: str) -> tuple[str, ...]:
    """The module's `REQUIRES = (...)` constant, read from its source without importing it (importing is what a
    missing package would break)."""
    tree = ast.parse((HERE / f"{module.rsplit('.', 1)[1]}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "REQUIRES" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


LESSONS = _discover()
REQUIRES = {number: needs for number, module in LESSONS.items() if (needs := _requirements(module))}


def normalise(number: str) -> str:
    """'1' -> '01'; raises ConfigError for lessons that do not exist."""
    key = number.zfill(2)
    if key not in LESSONS:
        raise ConfigError(f"lesson must be one of {', '.join(LESSONS)} (got {number})")
    return key


def missing_requirements(number: str) -> list[str]:
    """Third-party packages lesson `number` needs that are not installed (none for the stdlib lessons 01-04)."""
    return [name for name in REQUIRES.get(normalise(number), ()) if not _installed(name)]


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # an import hook that refuses the package counts as "not installed"
        return False


def number_kinds(number: str) -> dict:
    """Lesson `number`'s NUMBER_KINDS (ConfigError when the lesson cannot be loaded here, e.g. no torch)."""
    return getattr(load(number), "NUMBER_KINDS", {})


def load(number: str) -> ModuleType:
    """The lesson's module; ConfigError (one line, not a traceback) when a package it needs is missing."""
    key = normalise(number)
    missing = missing_requirements(key)
    if missing:
        raise ConfigError(f"lesson {key} needs {', '.join(missing)}: run `make course` (installs it)")
    return importlib.import_module(LESSONS[key])


def figures(module: ModuleType, results: dict, figures_dir: Path) -> list[Path]:
    """`module.figures(...)`, or none (said on stderr) where matplotlib is not installed: the numbers still count."""
    if not _installed("matplotlib"):
        print("  (matplotlib not installed: figures skipped)", file=sys.stderr)
        return []
    from diffattn.lessons import diagrams

    return module.figures(results, figures_dir) + diagrams.draw(module.__name__.split(".")[-1][6:8], figures_dir)


def device_note(lessons: list[str]) -> str:
    """Lesson numbers are computed on CPU so that they are the same everywhere; a GPU gets its own run."""
    if not any(REQUIRES.get(n) for n in lessons):
        return "stdlib lessons only: no third-party package was needed."
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed: the torch lessons were skipped (`make course` installs it)."
    if torch.cuda.is_available():
        return (f"GPU found ({torch.cuda.get_device_name()}): lesson numbers stay on CPU for reproducibility; "
                "run `bash scripts/gpu_check.sh` for the GPU checks and benchmarks.")
    return "no GPU found: everything ran on CPU (GPU-only checks live in scripts/gpu_check.sh)."
