"""One module per lesson. Each lesson module defines:

    TITLE: str
    REQUIRES: tuple[str, ...]                   third-party modules it needs ("torch"); () for the stdlib track
    run(progress: bool = True) -> dict          computes every number the lesson quotes (JSON-serialisable)
    report(results: dict) -> str                the text `python -m diffattn lesson NN` prints, from results alone
    figures(results: dict, outdir: Path) -> list[Path]   PNGs for the lesson (needs matplotlib)

`report` depends only on `results`, so lessons can quote it verbatim and tests can rebuild it from numbers.json.
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
}


def normalise(number: str) -> str:
    """'1' -> '01'; raises ConfigError for lessons that do not exist."""
    key = number.zfill(2)
    if key not in LESSONS:
        raise ConfigError(f"lesson must be one of {', '.join(LESSONS)} (got {number})")
    return key


def load(number: str) -> ModuleType:
    return importlib.import_module(LESSONS[normalise(number)])


def missing_requirements(module: ModuleType) -> list[str]:
    return [name for name in getattr(module, "REQUIRES", ()) if importlib.util.find_spec(name) is None]
