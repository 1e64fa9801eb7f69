"""Lesson 08: what makes a resumed run equal the uninterrupted one (an interrupted one saves its last step:
diffattn.core.errors.interrupt_as_exception turns SIGTERM into KeyboardInterrupt, which the loop catches).

    rng_state / restore_rng   the torch, CUDA and data-order generators, saved in every checkpoint
    check_resume              refuse --resume into a checkpoint trained with another config, naming what differs
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from diffattn.training import checkpoint
from diffattn.core.errors import require


def rng_state(data_rng: torch.Generator) -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "data": data_rng.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any], data_rng: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    data_rng.set_state(state["data"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def check_resume(out: Path, config: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint in `out`, if its config is this command's; else a ConfigError naming what differs."""
    require(checkpoint.has_checkpoint(out), f"--resume: no checkpoint in {out}")
    state = checkpoint.load_checkpoint(out)
    saved = state["config"]
    differs = [f"{part}.{k}" for part in ("model", "train", "task") for k in sorted(
        set(saved.get(part, {})) | set(config[part])) if saved.get(part, {}).get(k) != config[part].get(k)]
    require(not differs, f"--resume: the checkpoint in {out} was trained with a different config "
                         f"({', '.join(differs[:4])}); start a new --out or repeat the original command")
    return state
