"""Lesson 08: what makes a resumed run equal the uninterrupted one, and what makes an interrupted one resumable.

    rng_state / restore_rng   the torch, CUDA and data-order generators, saved in every checkpoint
    check_resume              refuse --resume into a checkpoint trained with another config, naming what differs
    interrupt_as_exception    Ctrl-C and SIGTERM become KeyboardInterrupt, so the loop saves the last step and exits
"""

from __future__ import annotations

import contextlib
import signal
import threading
from pathlib import Path
from typing import Any, Iterator

import torch

from diffattn import checkpoint
from diffattn.errors import require


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


@contextlib.contextmanager
def interrupt_as_exception() -> Iterator[None]:
    """Ctrl-C (and the SIGTERM torchrun forwards) raise KeyboardInterrupt; the loop then saves the last completed step
    (with the data generator rewound to it) and exits."""
    install = (threading.current_thread() is threading.main_thread()  # only the main thread may set handlers
               and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None))
    if install:
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        if install:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
