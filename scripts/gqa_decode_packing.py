"""Lesson 12's A/B of packed GQA decode: every variant's decode step with the group's query heads packed into one
single-head SDPA call per KV head (`diffattn.nn.kernels`, the default) and unpacked (`unpacked_decode`, SDPA's
enable_gqa), timed side by side in one run on the preallocated cache (`diffattn.perf.decode.packing_ab`).

    PYTHONPATH=code python scripts/gqa_decode_packing.py [--quick] [--threads 1] [--out DIR]

Writes DIR/packing.json (default outputs/bench/gqa-packing-<cpu>-<path>-<threads>t-<date>/): the machine, the load
average before and after, one row per (variant, batch, context) with both medians, and the summary lesson 12 quotes:
per variant the median speedup unpacked / packed, and its step time over the baseline's, unpacked and packed, beside
the byte ratio a bandwidth-bound step would show. A cache that does not fit in memory is an error row, not a crash
(exit 1 then). Bad sizes: one line, exit 2.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "code") not in sys.path:
    sys.path.insert(0, str(ROOT / "code"))

from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.core.hardware import cpu_name  # noqa: E402
from diffattn.pure.variants import LABELS, VARIANTS  # noqa: E402


def default_out(threads: int) -> Path:
    from diffattn.nn.cpu import native_path

    cpu = re.sub(r"[^a-z0-9]+", "-", cpu_name().lower().replace("(r)", "")).strip("-")
    name = f"gqa-packing-{cpu}-{native_path()}-{threads}t-{datetime.date.today().isoformat()}"
    return ROOT / "outputs" / "bench" / name


def measure(quick: bool, threads: int) -> dict:
    import torch

    from diffattn.nn.cpu import threads as torch_threads
    from diffattn.perf import ceilings, decode, suite

    grid = ({"model": suite.QUICK_MODEL, "batches": (1, 2), "contexts": (16, 32), "repeats": 2} if quick else
            {"model": decode.DECODE_MODEL, "batches": decode.BATCHES, "contexts": decode.CONTEXTS, "repeats": 5})
    info = {"machine": suite.machine(threads), "quick": quick, "load_average": {"start": ceilings.load_average()},
            "decode_model": {k: v for k, v in vars(grid["model"]).items() if isinstance(v, (int, float, str))},
            "batches": list(grid["batches"]), "contexts": list(grid["contexts"]), "repeats": grid["repeats"]}
    from tqdm import tqdm

    total = len(VARIANTS) * len(grid["batches"]) * len(grid["contexts"])
    with torch_threads(threads), tqdm(total=total, desc="packed vs unpacked", file=sys.stderr, leave=False) as bar:
        info["rows"] = decode.packing_ab(grid["model"], VARIANTS, grid["batches"], grid["contexts"], grid["repeats"],
                                         lambda: bar.update(1))
    info["load_average"]["end"] = ceilings.load_average()
    info["summary"] = decode.packing_summary(info["rows"])
    info["torch_threads"] = torch.get_num_threads()
    return info


def report(info: dict) -> str:
    m = info["machine"]
    lines = [f"{m['date']} · {m['cpu']} ({m['kernel_path']}) · {m['threads']} thread(s) · torch {m['torch']} · load "
             f"average {info['load_average']['start'][0]:.2f} → {info['load_average']['end'][0]:.2f}",
             f"{'variant':<12}{'speedup (unpacked/packed)':>27}{'vs baseline: unpacked':>23}{'packed':>8}{'bytes':>7}"]
    for variant, s in info["summary"]["variants"].items():
        ratios = (f"{s['unpacked_time_ratio']:>23.2f}{s['packed_time_ratio']:>8.2f}{s['bytes_ratio']:>7.2f}"
                  if "packed_time_ratio" in s else "")
        spread = f"{s['speedup_median']:.2f} ({s['speedup_min']:.2f}–{s['speedup_max']:.2f})"
        lines.append(f"{LABELS[variant]:<12}{spread:>27}{ratios}")
    lines += [f"  failed: {r['variant']} B {r['batch']} S {r['context']}: {r['error']}"
              for r in info["rows"] if "error" in r]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tiny model and grid (seconds)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as lesson 12's runs)")
    parser.add_argument("--out", type=Path, default=None, help="folder for packing.json")
    args = parser.parse_args(argv)
    try:
        if args.threads < 1:
            raise ConfigError(f"--threads must be >= 1 (got {args.threads})")
        info = measure(args.quick, args.threads)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from diffattn.core.results import write_json_atomic

    path = (args.out or default_out(args.threads)) / "packing.json"
    write_json_atomic(path, info)
    print(report(info))
    print(f"wrote {os.path.relpath(path)}")
    return 1 if info["summary"]["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
