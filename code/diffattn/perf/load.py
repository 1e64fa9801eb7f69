"""What else ran during a benchmark: load samples that name the run's own busy threads, a core kept busy on purpose, and
the settings a benchmark runs under (threads, idle or one core busy). Stdlib only: lessons read the settings' names.

A 1-minute load average counts every runnable thread, the benchmark's own included, and trails by about a minute. So
each sample records `own`: the most threads the run itself kept busy in the minute before it (its torch threads, plus
the spinner of `one_core_busy`). `core.hardware.reliability` then tells the run's own load from other work's.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Iterator

from diffattn.core.hardware import load_average

TRAIL_S = 60.0  # the 1-minute load average still carries the threads of a phase that ended this long ago


class LoadLog:
    """Writes `info["load_average"][part]` and `info["load_own"][part]`; `phase(own)` says how many threads the run
    keeps busy from now on."""

    def __init__(self, info: dict, own: int = 1) -> None:
        self.info = info
        info.setdefault("load_average", {})
        info.setdefault("load_own", {})
        self.phases: list[tuple[float | None, int]] = [(None, own)]  # (ended at, threads); None: still running

    def phase(self, own: int) -> None:
        now = time.monotonic()
        self.phases = [(now if ended is None else ended, n) for ended, n in self.phases
                       if ended is None or now - ended < TRAIL_S] + [(None, own)]

    def sample(self, part: str) -> None:
        now = time.monotonic()
        self.info["load_average"][part] = load_average()
        self.info["load_own"][part] = max(n for ended, n in self.phases if ended is None or now - ended < TRAIL_S)


@contextlib.contextmanager
def one_core_busy(settle_s: float = 1.0) -> Iterator[subprocess.Popen]:
    """Another process spins on one core for the duration of the block (then is killed, even on an error): the
    laptop whose browser or build holds a core while torch's threads wait for each other at every parallel region."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(settle_s)  # let the scheduler give it a core before the timing starts
        yield spinner
    finally:
        spinner.kill()
        spinner.wait()


@dataclass(frozen=True)
class Setting:
    threads: int
    busy: bool  # another process spins on one core throughout

    @property
    def name(self) -> str:  # "1t", "2t", "2t_busy": keys of the JSON and of the lesson's tags
        return f"{self.threads}t" + ("_busy" if self.busy else "")

    @property
    def label(self) -> str:
        return f"{self.threads} thread{'s' * (self.threads > 1)}, " + ("one core busy" if self.busy else "idle")


def settings(cores: int) -> list[Setting]:
    """1, 2 and all usable cores, idle; then all of them with one core busy (a machine of one core: 1 thread only)."""
    idle = [Setting(n, False) for n in sorted({1, min(2, cores), cores})]
    return idle + ([Setting(cores, True)] if cores > 1 else [])
