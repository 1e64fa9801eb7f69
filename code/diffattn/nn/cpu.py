"""The CPU's two sources of last-digit differences, under control: thread count and kernel path.

PyTorch splits a reduction over its threads, and it picks one set of vectorised kernels at start-up from the processor
(`ATEN_CPU_CAPABILITY`: default, avx2, avx512 on x86). Both change the order of float additions, so both change the
last digits of a result. Lessons pin the first (`threads`), and the portability checks vary the second
(`kernel_paths`, one fresh process per path: the variable is read once, when torch loads).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from diffattn import LIBRARY_CAPS  # the oneDNN cap that goes with a lowered path (why: there)

# x86's paths from the portable one up; a CPU offers every path up to its own
X86_PATHS = ("default", "avx2", "avx512")


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """Run torch on `n` CPU threads, then restore the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def one_thread() -> contextlib.AbstractContextManager[None]:
    """One thread: the numbers then do not depend on how many cores the machine has."""
    return threads(1)


def native_path() -> str:
    """The kernel path torch chose in this process, lower-case as ATEN_CPU_CAPABILITY spells it (e.g. 'avx512')."""
    return torch.backends.cpu.get_cpu_capability().lower()


def kernel_paths() -> tuple[str, ...]:
    """Every ATEN_CPU_CAPABILITY value this CPU can run, portable first: on an AVX-512 machine default, avx2, avx512."""
    native = native_path()
    if native in X86_PATHS:
        return X86_PATHS[: X86_PATHS.index(native) + 1]
    return ("default",) if native == "default" else ("default", native)


def kernel_path_env(path: str) -> dict[str, str]:
    """The environment variables that make a fresh process compute like a CPU whose best path is `path` (diffattn's
    import adds the library caps by itself; a child that never imports diffattn needs them spelled out)."""
    return {"ATEN_CPU_CAPABILITY": path, **LIBRARY_CAPS.get(path, {})}
