"""Lesson 08: whole runs on top of the loop: train into a private folder and swap it in, and the cache of finished
runs that `eval suite` evaluates (diffattn.eval.kinds; lessons 09-11 evaluate shipped checkpoints instead,
diffattn.training.shipped).

    train_fresh          a run from scratch that another process reading the same folder never sees half-written
    ensure_checkpoints   outputs/checkpoints/<preset>/<task>/<variant>[-seed<S>]/, trained when missing or stale
    train_missing        many runs, each trained only if its folder does not already hold it finished, in parallel
                         worker processes of one torch thread each (a one-thread run gives the same numbers in a
                         pool as alone)
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

from diffattn.training import checkpoint
from diffattn.config import (
    GPTConfig,
    TrainConfig,
    build_configs,
    default_out,
    run_config,
)
from diffattn.core.errors import ConfigError, one_line
from diffattn.pure.variants import VARIANTS
from diffattn.training.loop import train


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
                       progress: bool = False, seed: int = 0, settings: dict[str, Any] | None = None) -> dict[str, Path]:
    """outputs/checkpoints/<preset>/<task>/<variant>/ (…/<variant>-seed<S>/ for seed S > 0) for each variant, training
    the ones that are missing, stale (another config, e.g. other `settings`: steps, compile) or unfinished. `eval
    suite` and tests call this."""
    dirs = {}
    for variant in variants:
        model, c = build_configs(preset, variant, task=task, seed=seed, **(settings or {}))
        out = default_out(preset, task, variant, c.seed)
        if not _finished(out, run_config(preset, model, c)):
            train_fresh(preset, model, c, out, progress=progress)
        dirs[variant] = out
    return dirs


Job = tuple[str, GPTConfig, TrainConfig, Path]  # (preset, model config, train config, out)


def train_missing(jobs: list[Job], workers: int = 1, progress: bool = True) -> list[Path]:
    """Train every job whose `out` does not hold it finished (same config, last step reached); returns the outs.
    With workers > 1, runs go to a pool of spawned processes of one torch thread each; a run that fails does not stop
    the others, and the failures are reported together at the end (ConfigError naming each)."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    from diffattn.core.progress import Progress

    todo = [job for job in jobs if not finished(job)]
    failures = []
    with Progress(len(todo), f"training {len(todo)} of {len(jobs)} runs (the rest are done)", enabled=progress) as bar:
        if workers <= 1:
            from diffattn.nn.cpu import one_thread

            with one_thread():  # as in a pool's workers: a run's arithmetic is the same with one job or several
                for job in todo:
                    failures += _attempt(job)
                    bar.advance()
        else:
            with ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_one_thread) as pool:
                for future in as_completed([pool.submit(_attempt, job) for job in todo]):
                    failures += future.result()
                    bar.advance()
    if failures:
        raise ConfigError(f"{len(failures)} of {len(todo)} runs failed (the others finished): " + "; ".join(failures))
    return [job[3] for job in jobs]


def finished(job: Job) -> bool:
    preset, model, c, out = job
    return _finished(Path(out), run_config(preset, model, c))


def _attempt(job: Job) -> list[str]:
    """[] if the run finished, else one line naming it and its error (a worker must not die with the run)."""
    preset, model, c, out = job
    try:
        train_fresh(preset, model, c, out)
    except Exception as exc:  # noqa: BLE001  reported with the run's name, after the others
        return [f"{out}: {one_line(exc)}"]
    return []


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def _finished(out: Path, config: dict[str, Any]) -> bool:
    try:
        state = checkpoint.load_checkpoint(out)
    except ConfigError:
        return False
    return state["config"] == config and state["step"] == config["train"]["steps"]


def train_pass(jobs: list[Job], workers: int, progress: bool, log: Path, record: dict[str, Any],
               passes: list[dict]) -> bool:
    """`train_missing` for one pass of a declared study, its wall time and counts appended to `passes` (with `record`:
    the pass's stage or groups, and the machine) and written to `log` whatever happens (a pass some runs failed in, or
    an interrupt: the next pass trains only what is missing). False when interrupted."""
    import time

    from diffattn.core.results import write_json_atomic

    started = time.perf_counter()
    try:
        train_missing(jobs, workers=workers, progress=progress)
        return True
    except KeyboardInterrupt:
        print("interrupted: finished runs are kept and are not trained again next time")
        return False
    finally:
        passes.append({**record, "wall_s": time.perf_counter() - started, "runs_trained": len(jobs),
                       "runs_finished": sum(finished(job) for job in jobs), "jobs": workers})
        write_json_atomic(log, {"passes": passes})
