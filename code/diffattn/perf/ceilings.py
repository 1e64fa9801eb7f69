"""This machine's ceilings, measured in the run that uses them (lesson 12).

GEMM: C = A·B with n × n random matrices (never zeros: some units run faster on them), 2n³ FLOPs per call, the
median of `repeats` timed calls after a warm-up, per dtype; the BLAS library and thread count are named.

Memory bandwidth, STREAM's way (J. D. McCalpin, STREAM benchmark, stream.c: "copy" c = a, "triad" a = b + s·c, float64
arrays): bytes are counted as the kernel's reads and writes, copy 2 × 8 = 16 B and triad 3 × 8 = 24 B per element.
A cached write first reads the line it writes (write-allocate), a hidden read STREAM does not count, so the figures
are what a program can count, not what the bus carries. Each array must be much larger than the last-level cache
(STREAM's rule: at least 4× the total cache), or the caches are measured instead of memory.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Callable

import torch

from diffattn.perf.timing import time_call
from diffattn.core.hardware import load_average  # noqa: F401  (ceilings.load_average, as the scripts call it)
from diffattn.core.errors import require

STREAM_BYTES_PER_ELEMENT = {"copy": 16, "triad": 24}  # float64: reads + writes the kernel names
TRIAD_SCALAR = 3.0


def blas_library() -> str:
    """What torch's CPU matmuls call, read off `torch.__config__.show()` (BLAS_INFO=mkl, openblas, ...)."""
    found = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    return found.group(1) if found else "unknown"


def last_level_cache_bytes() -> int | None:
    """The largest CPU cache Linux reports (/sys/devices/system/cpu/cpu0/cache), None where it cannot be read."""
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = entry.read_text().strip()
        number = re.match(r"(\d+)([KMG]?)", text)
        if number:
            sizes.append(int(number.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[number.group(2)])
    return max(sizes) if sizes else None


def stream_elements(cache_bytes: int | None, floor: int = 1 << 24) -> int:
    """Float64 elements per array: 4× the last-level cache (STREAM's rule), and at least `floor` (128 MiB)."""
    return max(floor, 4 * (cache_bytes or 0) // 8)


def _timed(fn: Callable[[], object], device: torch.device, repeats: int) -> list[float]:
    """`repeats` single-call timings (seconds) after one warm-up call."""
    fn()
    return [time_call(fn, device, warmup=0, iters=1) for _ in range(repeats)]


def _summary(samples: list[float], work: float, unit_scale: float) -> dict:
    """Median and best rate of `work` per second, in units of `unit_scale` (1e9: G…/s), with every sample's rate."""
    rates = [work / s / unit_scale for s in samples]
    return {"median": statistics.median(rates), "best": max(rates), "samples": rates}


def gemm(n: int, dtype: torch.dtype, device: torch.device, repeats: int = 5) -> dict:
    """GFLOP/s of an n × n × n matmul in `dtype`: median and best of `repeats` calls."""
    require(n >= 1 and repeats >= 1, f"n and repeats must be >= 1 (got {n}, {repeats})")
    g = torch.Generator(device="cpu").manual_seed(0)
    a, b = (torch.randn(n, n, generator=g).to(device=device, dtype=dtype) for _ in range(2))
    return {"dtype": str(dtype).removeprefix("torch."), "n": n, "flops_per_call": 2 * n**3,
            "gflops": _summary(_timed(lambda: a @ b, device, repeats), 2 * n**3, 1e9)}


def stream(elements: int, device: torch.device, repeats: int = 5) -> dict:
    """GB/s of STREAM's copy and triad on float64 arrays of `elements` each (bytes counted as STREAM does)."""
    require(elements >= 1 and repeats >= 1, f"elements and repeats must be >= 1 (got {elements}, {repeats})")
    a = torch.rand(elements, dtype=torch.float64, device=device)
    b, c = torch.rand_like(a), torch.rand_like(a)
    kernels = {"copy": lambda: c.copy_(a), "triad": lambda: torch.add(b, c, alpha=TRIAD_SCALAR, out=a)}
    out = {"elements": elements, "array_bytes": 8 * elements, "bytes_per_element": STREAM_BYTES_PER_ELEMENT}
    for name, fn in kernels.items():
        work = STREAM_BYTES_PER_ELEMENT[name] * elements
        out[name] = _summary(_timed(fn, device, repeats), work, 1e9)
    return out


def default_gemm_sizes(device: torch.device) -> dict[torch.dtype, int]:
    """n per dtype. GPU: 8192 in bf16, fp16, fp32. CPU: fp32 2048 (the dtype the CPU lessons run), fp64 1024, and bf16
    only 256: a CPU without bf16 units (AVX2) runs it on a slow fallback (under 1 GFLOP/s in the committed lesson 12
    runs, outputs/bench/roofline-*)."""
    if device.type == "cuda":
        return {torch.bfloat16: 8192, torch.float16: 8192, torch.float32: 8192}
    return {torch.float32: 2048, torch.float64: 1024, torch.bfloat16: 256}


def measure(device: torch.device, gemm_sizes: dict[torch.dtype, int] | None = None, stream_n: int | None = None,
            repeats: int = 5, advance: Callable[[], None] = lambda: None) -> dict:
    """GEMM per dtype and STREAM copy/triad, with what they ran on; `advance()` after each measurement.

    Sizes: `default_gemm_sizes`; STREAM arrays 4× the last-level cache (CPU) or 1 GiB (GPU).
    """
    cuda = device.type == "cuda"
    cache = None if cuda else last_level_cache_bytes()
    stream_n = stream_n or ((1 << 27) if cuda else stream_elements(cache))
    result = {"device": str(device), "threads": torch.get_num_threads(), "blas": "cuBLAS" if cuda else blas_library(),
              "last_level_cache_bytes": cache, "repeats": repeats, "gemm": []}
    for dtype, n in (gemm_sizes or default_gemm_sizes(device)).items():
        result["gemm"].append(gemm(n, dtype, device, repeats))
        advance()
    result["stream"] = stream(stream_n, device, repeats)
    advance()
    return result


def peak_gflops(ceilings: dict, dtype: str) -> float:
    """The measured GEMM ceiling (median GFLOP/s) for `dtype`."""
    rows = [row for row in ceilings["gemm"] if row["dtype"] == dtype]
    require(bool(rows), f"no GEMM was measured in {dtype} (measured: {[r['dtype'] for r in ceilings['gemm']]})")
    return rows[0]["gflops"]["median"]


def bandwidth_gbps(ceilings: dict, kernel: str = "copy") -> float:
    """The measured STREAM bandwidth (median GB/s) of `kernel` (copy or triad)."""
    require(kernel in STREAM_BYTES_PER_ELEMENT, f"kernel must be copy or triad (got {kernel!r})")
    return ceilings["stream"][kernel]["median"]
