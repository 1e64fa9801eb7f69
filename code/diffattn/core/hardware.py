"""What a figure ran on (the CPU model, a GPU's datasheet peak, the torch.compile backend, the usable cores), and whether
a measured run can be believed (`reliability`); stdlib only."""

from __future__ import annotations

import os
import platform

# Dense bf16 datasheet peaks, the usual MFU denominator (NVIDIA's H100 SXM and H200 SXM specifications: 989 TFLOP/s);
# scripts/gpu_check.sh also reports MFU against the GEMM peak it measures on the same run (diffattn.perf.bench.calibrate).
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


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask, where the OS has one), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# ------------------------------------------------------------------------------------ is a measured run believable?
#
# A benchmark cannot beat its own machine: a point faster than the roofline its run measured, an MFU above 100 %, or
# a kernel far faster than the run's own calibration GEMM means a ceiling was mismeasured (a GEMM slowed by other
# work, or one so small it times the call overhead), and every ratio built on it is suspect. A 1-minute load average
# at or above the cores the run could use means other work shared them while it ran; a run that records the threads
# it kept busy itself (`"load_own"` per sample: threads on every core, a deliberate spinner) may reach those plus
# less than one core. Such a run is marked `"reliable": false` with its reasons, and no lesson or plan quotes it.

ROOFLINE_SLACK = 1.05  # ceilings are medians of a few calls: a point within 5 % above one is timing noise
FAR_BELOW = 2.0  # a kernel at twice the run's own GEMM rate: the GEMM did not measure the machine
POINT_KEYS = ("decode", "prefill", "train")


def _cores(info: dict, cores: int | None) -> int | None:
    machine = info.get("machine") if isinstance(info.get("machine"), dict) else {}
    for found in (cores, machine.get("usable_cores"), machine.get("cores"), info.get("usable_cores"), info.get("cores")):
        if isinstance(found, int) and not isinstance(found, bool) and found >= 1:
            return found
    return None


def _load_reasons(info: dict, cores: int | None) -> list[str]:
    loads = info.get("load_average")
    if not isinstance(loads, dict):
        return []
    own = info.get("load_own") if isinstance(info.get("load_own"), dict) else {}
    usable = _cores(info, cores)
    reasons = []
    for part, values in loads.items():
        if not isinstance(values, (list, tuple)) or not values:
            continue
        mine = own.get(part)
        # a part that names the threads the run kept busy itself (a multi-thread bench, a deliberate spinner) may
        # show them plus less than one core of other work; one that names none is judged against the cores alone
        allowed = max(usable or 1, mine + 1) if isinstance(mine, int) and mine > 1 else usable or 1
        if values[0] >= allowed:
            reasons.append((values[0], part, mine if allowed > (usable or 1) else None))
    if not reasons:
        return []
    load, part, mine = max(reasons, key=lambda reason: reason[0])
    beside = f" beside the run's own {mine} busy threads" if mine else ""
    if usable is None:
        return [f"1-minute load average {load:.2f} (at '{part}') and no core count recorded: at or above one core"
                f"{beside}, other work may have shared the cores while it ran"]
    return [f"1-minute load average {load:.2f} (at '{part}') with {usable} usable core(s){beside}: other work shared "
            "the cores while it ran"]


def _points(info: dict) -> list[dict]:
    return [row | {"_phase": key} for key in POINT_KEYS for row in info.get(key) or []
            if isinstance(row, dict) and isinstance(row.get("of_roofline"), (int, float))]


def _where(row: dict) -> str:
    name = f"{row['preset']}:{row.get('variant')}" if row.get("preset") else row.get("variant")
    return f"{row['_phase']} {name} batch {row.get('batch')} context {row.get('context')}"


def _roofline_reasons(info: dict) -> list[str]:
    reasons = []
    points = _points(info)
    above = [r for r in points if r["of_roofline"] > ROOFLINE_SLACK]
    if above:
        worst = max(above, key=lambda r: r["of_roofline"])
        reasons.append(f"{len(above)} point(s) above their own roofline, up to {worst['of_roofline']:.2f}× it "
                       f"({_where(worst)}): the run's measured ceilings do not bound its own points")
    for key, peak in (("mfu_measured_peak", "measured"), ("mfu_datasheet_peak", "datasheet")):
        over = [r for r in points if isinstance(r.get(key), (int, float)) and r[key] > 1]
        if over:
            worst = max(over, key=lambda r: r[key])
            reasons.append(f"MFU {worst[key]:.1%} against the {peak} peak ({_where(worst)}): above 100%")
    roof = info.get("roofline") if isinstance(info.get("roofline"), dict) else {}
    peak_gflops = roof.get("peak_GFLOPs")
    rates = [r["achieved_GFLOPs"] for r in points if isinstance(r.get("achieved_GFLOPs"), (int, float))]
    if isinstance(peak_gflops, (int, float)) and rates and max(rates) > FAR_BELOW * peak_gflops:
        reasons.append(f"calibration GEMM {peak_gflops:.3g} GFLOP/s ({roof.get('peak_dtype', '?')}) is below "
                       f"1/{FAR_BELOW:g} of the run's fastest point ({max(rates):.3g} GFLOP/s): the GEMM did not "
                       "measure the machine")
    return reasons


def _calibration_reasons(info: dict) -> list[str]:
    """`bench attention`: its calibration GEMM against the attention kernels it timed (executed FLOPs)."""
    calibration = info.get("calibration") if isinstance(info.get("calibration"), dict) else {}
    gemm = calibration.get("gemm_tflops")
    rates = [(r["fwd_executed_tflops"], r.get("op")) for r in info.get("attention_ops") or []
             if isinstance(r, dict) and isinstance(r.get("fwd_executed_tflops"), (int, float))]
    if not isinstance(gemm, (int, float)) or not rates:
        return []
    rate, op = max(rates, key=lambda pair: pair[0])
    if rate <= FAR_BELOW * gemm:
        return []
    return [f"calibration GEMM {gemm * 1e3:.3g} GFLOP/s ({calibration.get('gemm', '?')}) is below 1/{FAR_BELOW:g} of "
            f"the run's fastest attention kernel ({rate * 1e3:.3g} GFLOP/s, {op}): the GEMM did not measure the machine"]


def reliability(info: dict, cores: int | None = None) -> dict:
    """{"reliable": bool, "reasons": [one line each]} of a benchmark's result dict (`bench attention`, `bench
    decode|train|roofline`, or any run with a load_average): every check that applies to what the dict holds.
    `cores` overrides the usable cores the run recorded (old runs recorded none)."""
    reasons = _load_reasons(info, cores) + _roofline_reasons(info) + _calibration_reasons(info)
    return {"reliable": not reasons, "reasons": reasons}


def warning_line(verdict: dict) -> str | None:
    """The line a report prints above an unreliable run, None for a reliable one."""
    if verdict["reliable"]:
        return None
    return "WARNING: unreliable run, quote none of its numbers: " + "; ".join(verdict["reasons"])
