"""Lesson 08: whole runs on top of the loop: train into a private folder and swap it in, and the cache of finished
runs that `eval suite` evaluates (diffattn.eval.command; lessons 09-11 evaluate shipped checkpoints instead,
diffattn.shipped).

    train_fresh          a run from scratch that another process reading the same folder never sees half-written
    ensure_checkpoints   outputs/checkpoints/<preset>/<task>/<variant>[-seed<S>]/, trained when missing or stale
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

from diffattn import checkpoint
from diffattn.config import (
    GPTConfig,
    TrainConfig,
    build_configs,
    default_out,
    run_config,
)
from diffattn.errors import ConfigError
from diffattn.names import VARIANTS
from diffattn.train import train


def train_fresh(preset: str, model_config: GPTConfig, c: TrainConfig, out: str | Path,
                progress: bool = False) -> dict[str, Any]:
    """Train from scratch into a private sibling of `out`, then swap it in: another process reading or training the
    same `out` (a test, another lesson) never sees a half-written run. An interrupted run is swapped in too (its
    metrics and its last checkpoint, which `--resume` continues and ensure_checkpoints sees as unfinished)."""
    out = Path(out)
    private = out.with_name(f".{out.name}.{os.getpid()}")
    try:
        last = train(preset, model_config, c, private, overwrite=True, progress=progress)
        _swap_in(private, out)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (a time limit): keep what was done, metrics and last checkpoint
        if private.is_dir():
            _swap_in(private, out)
        raise
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return last


def _swap_in(private: Path, out: Path) -> None:
    for _ in range(3):  # another process may put its copy back between the two calls
        shutil.rmtree(out, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.replace(private, out)
            return
    raise ConfigError(f"could not replace {out}: another process keeps writing it")


def ensure_checkpoints(preset: str = "cpu-tiny", task: str = "text", variants: tuple[str, ...] = VARIANTS,
                       progress: bool = False, seed: int = 0) -> dict[str, Path]:
    """outputs/checkpoints/<preset>/<task>/<variant>/ (…/<variant>-seed<S>/ for seed S > 0) for each variant, training
    the ones that are missing, stale (another config) or unfinished. Lessons 09-11 and their tests call this."""
    dirs = {}
    for variant in variants:
        model, c = build_configs(preset, variant, task=task, seed=seed)
        out = default_out(preset, task, variant, c.seed)
        if not _finished(out, run_config(preset, model, c)):
            train_fresh(preset, model, c, out, progress=progress)
        dirs[variant] = out
    return dirs


def _finished(out: Path, config: dict[str, Any]) -> bool:
    try:
        state = checkpoint.load_checkpoint(out)
    except ConfigError:
        return False
    return state["config"] == config and state["step"] == config["train"]["steps"]
