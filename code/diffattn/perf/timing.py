"""Timing on a shared machine: medians of repeated calls, several steps timed in turn (lessons 06 and 12)."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


def time_call(fn: Callable[[], object], device: torch.device, warmup: int = 3, iters: int = 10) -> float:
    """Median seconds per call; CUDA work is synchronised before each clock read."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def round_robin(steps: dict[str, Callable[[], None]], repeats: int,
                sync: Callable[[], None] = lambda: None) -> dict[str, float]:
    """Median seconds per call of each step, timed in turn (a, b, c, a, b, c, ...) after one warm-up call each, so
    that a shared machine's load drift hits every variant alike instead of whichever ran last. `sync` waits for
    queued device work (torch.cuda.synchronize on a GPU, where a call returns before its kernels finish)."""
    for step in steps.values():
        step()
    sync()
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            started = time.perf_counter()
            step()
            sync()
            samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(times) for name, times in samples.items()}
