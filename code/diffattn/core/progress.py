"""A dependency-free progress bar on stderr, so stdout stays clean for reports and --json."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """`with Progress(total, "noise sweep") as bar: ... bar.advance()`; draws in place on a terminal, else one line at the end."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None, enabled: bool = True):
        self.total, self.label, self.done = max(total, 1), label, 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.live = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.started = time.perf_counter()

    def advance(self, n: int = 1) -> None:
        self.done = min(self.done + n, self.total)
        if self.live:
            filled = int(30 * self.done / self.total)
            self.stream.write(f"\r  {self.label:<28} [{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total}")
            self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.started
        prefix = "\r" if self.live else ""
        self.stream.write(f"{prefix}  {self.label:<28} done in {elapsed:.1f} s{' ' * 30}\n")
        self.stream.flush()
