"""Where the course's folders are: the repository root holds code/, lessons/, outputs/."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The checkout this package lives in (code/diffattn -> repo), or $DIFFATTN_ROOT, or the working directory."""
    if "DIFFATTN_ROOT" in os.environ:
        return Path(os.environ["DIFFATTN_ROOT"])
    here = Path(__file__).resolve().parents[3]
    return here if (here / "lessons").is_dir() else Path.cwd()


def outputs_dir() -> Path:
    return repo_root() / "outputs"


def checkpoints_dir() -> Path:
    """Where training runs go: $DIFFATTN_CHECKPOINTS (scripts/gpu_check.sh keeps its runs apart), else
    outputs/checkpoints/ (ignored by git)."""
    override = os.environ.get("DIFFATTN_CHECKPOINTS")
    return Path(override) if override else outputs_dir() / "checkpoints"


def lessons_dir() -> Path:
    return repo_root() / "lessons"
