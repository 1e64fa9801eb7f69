"""The one exception type for bad input, and interrupts as exceptions.

`ConfigError` is a `ValueError`, so library callers can catch either; the command line turns it into a one-line
message and exit code 2 (see `diffattn.cli`). A time limit's SIGTERM becomes KeyboardInterrupt like Ctrl-C
(`interrupt_as_exception`), so training saves its last step and `compare` / `eval suite` keep what finished.
"""

import contextlib
import signal
import threading
from pathlib import Path
from typing import Iterator


class ConfigError(ValueError):
    """A size, head count, λ or other setting that violates a stated constraint."""


def require(condition: bool, message: str) -> None:
    """Raise `ConfigError(message)` unless `condition` holds; `message` names the constraint."""
    if not condition:
        raise ConfigError(message)


def require_positive(**sizes: float) -> None:
    """Every keyword must be > 0, e.g. `require_positive(hidden=4096, heads=32)`."""
    for name, value in sizes.items():
        require(value > 0, f"{name} must be > 0 (got {value})")


def require_output_path(path: Path, flag: str, folder: bool) -> None:
    """`path`, given to `flag`, can become the file (or, with `folder`, the folder) a command writes: it is not already
    the other kind, and no existing part of it above is a file. Checked before the work, so a run does not fail at its
    end, nor leave half a folder behind."""
    want, other = ("a folder", "a file") if folder else ("a file", "a folder")
    try:
        if path.exists():
            require(path.is_dir() == folder, f"{flag} {path} is {other}; it must name {want} (give another path)")
        for parent in path.parents:
            if parent.exists():
                require(parent.is_dir(), f"{flag} {path}: {parent} is a file, so nothing can be written below it")
                break
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise ConfigError(f"{flag} {path}: {exc.strerror or exc}") from None


def one_line(exc: BaseException, limit: int = 300) -> str:
    """'TypeError: first line of the message' (a compiler's error can run to pages); a first line that ends in ':'
    ("backend='inductor' raised:") is continued by the next, which names the cause."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = " ".join(lines[:2]) if len(lines) > 1 and lines[0].endswith(":") else (lines[0] if lines else "")
    return f"{type(exc).__name__}: {text[:limit]}".rstrip(": ")


@contextlib.contextmanager
def interrupt_as_exception() -> Iterator[None]:
    """Ctrl-C and SIGTERM (a time limit's, or the one torchrun forwards) raise KeyboardInterrupt: the training loop
    then saves the last completed step (with the data generator rewound to it), a comparison keeps its finished
    variants. Installed only where SIGTERM still has its default action (nested uses keep the outer one)."""
    install = (threading.current_thread() is threading.main_thread()  # only the main thread may set handlers
               and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None))
    if install:
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        if install:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
