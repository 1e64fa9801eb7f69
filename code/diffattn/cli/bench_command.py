"""`diffattn bench [attention|decode|train|roofline]`: timings, reported and never asserted (lessons 06 and 12)."""

from __future__ import annotations

import argparse
from pathlib import Path

from diffattn.cli.options import require_torch
from diffattn.core.errors import require
from diffattn.core.results import write_json_atomic

NAME = "bench"


def add_parser(sub) -> argparse.ArgumentParser:
    bench = sub.add_parser(NAME, help="attention: time attention ops, and our V1 module vs transformers' DiffLlama "
                           "at 1, 2 and all CPU threads, idle and with one core busy; decode, train, roofline: this "
                           "machine's ceilings and each variant against them (lesson 12); needs torch")
    bench.add_argument("what", nargs="?", default="attention", choices=["attention", "decode", "train", "roofline"])
    bench.add_argument("--device", default="auto", help="auto (cuda when present), cpu or cuda")
    bench.add_argument("--quick", action="store_true", help="small sizes, few repeats (seconds)")
    bench.add_argument("--no-hf", action="store_true", help="leave transformers' DiffLlama out of the V1 module comparison")
    bench.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own count); "
                       "attention: for the ops, the V1 module runs at 1, 2 and all threads whatever this says")
    bench.add_argument("--no-figures", action="store_true", help="decode|train|roofline: skip the PNG figures")
    bench.add_argument("--out", type=Path, default=None, help="attention: JSON file; others: folder (default "
                       "outputs/bench/<what>-<cpu>-<threads>t-<date>/)")
    return bench


def run(args: argparse.Namespace) -> int:
    torch = require_torch(NAME)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    require(args.threads is None or args.threads >= 1, f"--threads must be >= 1 (got {args.threads})")
    if args.what != "attention":  # the suite checks the device itself, naming what it needs
        return roofline(args, device, torch)
    require(device in ("cpu", "cuda") and (device == "cpu" or torch.cuda.is_available()),
            f"--device must be auto, cpu or cuda with a CUDA GPU present (got {args.device})")
    return attention(args, device)


def attention(args: argparse.Namespace, device: str) -> int:
    """`bench attention`: the rows (written after every op, so that a time limit keeps the rows that finished),
    then exit 1 if any op failed."""
    import torch

    from diffattn.nn.cpu import threads
    from diffattn.perf import bench

    with threads(args.threads or torch.get_num_threads()):
        info = bench.run(device, quick=args.quick, hf=not args.no_hf,
                         saved=(lambda partial: write_json_atomic(args.out, partial)) if args.out else (lambda partial: None))
    print(bench.format_report(info))
    failed = any("error" in r for r in info["attention_ops"]) or "error" in info.get("calibration", {})
    return 1 if failed else 0


def roofline(args: argparse.Namespace, device: str, torch) -> int:
    """`bench decode|train|roofline`: run, write <out>/<what>.json after every part and the figures at the end, print
    the report. Exit 1 if a point failed (it is in the JSON with its error)."""
    from diffattn.perf import plots, suite

    n_threads = torch.get_num_threads() if args.threads is None else args.threads
    out = args.out or suite.default_out(args.what, n_threads)
    path = out / f"{args.what}.json"
    info = suite.run(args.what, quick=args.quick, n_threads=n_threads,
                     saved=lambda partial: write_json_atomic(path, partial), device=device)
    figures = [] if args.no_figures else [plots.roofline(info, out / "roofline.png")]
    if not args.no_figures and "decode" in info:
        figures.append(plots.decode_latency(info, out / "decode.png"))
    print(suite.format_report(info))
    print(f"wrote {path}" + "".join(f", {f}" for f in figures))
    return 1 if any("error" in r for key in ("decode", "prefill", "train") for r in info.get(key, [])) else 0
