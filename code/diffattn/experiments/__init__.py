"""One module per lesson. Each lesson module defines:

    TITLE: str
    run(progress: bool = True) -> dict          computes every number the lesson quotes (JSON-serialisable)
    report(results: dict) -> str                the text `python -m diffattn lesson NN` prints, from results alone
    figures(results: dict, outdir: Path) -> list[Path]   PNGs for the lesson (needs matplotlib)
    NUMBER_KINDS: dict (optional)               how far each result may move on another CPU (diffattn.numberkinds);
                                                results it does not name are Exact

`report` depends only on `results`, so lessons can quote it verbatim and tests can rebuild it from numbers.json.
REQUIRES lists the third-party packages a lesson needs, so a missing one is reported before anything is imported.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from diffattn.errors import ConfigError

LESSONS = {
    "01": "diffattn.experiments.lesson01_noise_floor",
    "02": "diffattn.experiments.lesson02_diff_attention",
    "03": "diffattn.experiments.lesson03_snr",
    "04": "diffattn.experiments.lesson04_accounting",
    "05": "diffattn.experiments.lesson05_diff_v1_torch",
    "06": "diffattn.experiments.lesson06_kernels",
    "07": "diffattn.experiments.lesson07_small_gpt",
    "08": "diffattn.experiments.lesson08_training",
    "09": "diffattn.experiments.lesson09_retrieval",
    "10": "diffattn.experiments.lesson10_outliers",
    "11": "diffattn.experiments.lesson11_lambda_sweep",
}
REQUIRES = {"05": ("torch",), "06": ("torch",), "07": ("torch",), "08": ("torch", "tqdm"), "09": ("torch", "tqdm"),
            "10": ("torch", "tqdm"), "11": ("torch", "tqdm")}


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
