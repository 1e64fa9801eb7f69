"""Lesson 12, the packing A/B: what packing each GQA group's decode queries into one SDPA call per KV head changed
(`diffattn.nn.kernels`, `diffattn.perf.decode.packing_ab`). Read back from the committed runs of
scripts/gqa_decode_packing.py (outputs/bench/<run>/packing.json), never re-measured by `make course`."""

from __future__ import annotations

import json
from typing import Callable

from diffattn.pure.variants import REFERENCE, LABELS, VARIANTS
from diffattn.core.paths import outputs_dir

# Two runs of the script, one after the other, on the course machine of 2026-12-03 (AVX-512 Intel Xeon, 1 thread)
RUNS = {"ab1": "gqa-packing-intel-xeon-processor-avx512-1t-2026-12-03-run1",
        "ab2": "gqa-packing-intel-xeon-processor-avx512-1t-2026-12-03-run2"}


def summary(info: dict) -> dict:
    """One run: its machine and load, and per variant the median speedup and the ratios to the baseline."""
    m, loads = info["machine"], [x[0] for x in info["load_average"].values()]
    return {"machine": {k: m[k] for k in ("cpu", "kernel_path", "threads", "torch", "date")},
            "load_min": min(loads), "load_max": max(loads), "points": len(info["rows"]),
            "errors": info["summary"]["errors"], "variants": info["summary"]["variants"]}


def run() -> dict:
    return {name: summary(json.loads((outputs_dir() / "bench" / folder / "packing.json").read_text()))
            for name, folder in RUNS.items()}


def joined(runs: dict) -> Callable[[Callable[[dict], str]], str]:
    """`both(f)`: f of every run, joined "run1 / run2", as lesson 12 prints runs side by side."""
    return lambda f: " / ".join(f(run) for run in runs.values())


def load_range(run: dict) -> str:
    return f"{run['load_min']:.1f}–{run['load_max']:.1f}"


def report(runs: dict) -> list[str]:
    names = list(runs)
    first = runs[names[0]]
    both = joined(runs)  # ab1 / ab2
    m = first["machine"]
    lines = ["", f"Packed GQA decode, A/B ({' / '.join(names)}; scripts/gqa_decode_packing.py): {m['cpu']} "
             f"({m['kernel_path']}), {m['threads']} torch thread, {m['date']}, load average "
             + both(load_range) + f"; {first['points']} points per run "
             "(4 variants × 4 batches × 3 contexts), both modes timed in turn",
             f"  {'variant':<12}{'unpacked / packed step':>24}{'step / baseline, unpacked':>28}{'packed':>14}"
             f"{'bytes':>7}"]
    for variant in VARIANTS:
        ratios = both(lambda r, v=variant: f"{r['variants'][v]['speedup_median']:.2f}")
        if variant == REFERENCE:
            lines.append(f"  {LABELS[variant]:<12}{ratios:>24}")
            continue
        lines.append(f"  {LABELS[variant]:<12}{ratios:>24}"
                     + both(lambda r, v=variant: f"{r['variants'][v]['unpacked_time_ratio']:.2f}").rjust(28)
                     + both(lambda r, v=variant: f"{r['variants'][v]['packed_time_ratio']:.2f}").rjust(14)
                     + f"{first['variants'][variant]['bytes_ratio']:>7.2f}")
    lines.append("  (medians over the grid; step / baseline at the same batch and context; bytes: the step's byte "
                 "ratio, packing reads the same bytes)")
    return lines
