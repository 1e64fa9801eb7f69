"""What a figure ran on: the CPU's model name, a GPU's datasheet peak, the torch.compile backend (stdlib only)."""

from __future__ import annotations

import os
import platform

# Dense bf16 datasheet peaks, the usual MFU denominator (perf-notes §1: H100 SXM and H200 SXM, 989 TFLOP/s);
# scripts/gpu_check.sh also reports MFU against the GEMM peak it measures on the same run (diffattn.bench.calibrate).
DATASHEET_BF16 = {"H100": 989e12, "H200": 989e12}


def datasheet_peak(gpu: str | None) -> float | None:
    """The dense bf16 FLOP/s of a GPU by its name, None for any other device (no MFU is invented for it)."""
    return next((flops for name, flops in DATASHEET_BF16.items() if gpu and name in gpu), None)


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (Linux), else whatever the platform module knows."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def compile_backend() -> str:
    """What torch.compile uses for training: Inductor, unless $DIFFATTN_COMPILE_BACKEND names another (the CPU
    rehearsal of scripts/gpu_check.sh sets aot_eager: Dynamo's graph capture and AOTAutograd, no code generation)."""
    return os.environ.get("DIFFATTN_COMPILE_BACKEND") or "inductor"


def load_average() -> list[float] | None:
    """1-, 5- and 15-minute load averages (os.getloadavg), None where the OS has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
