"""`diffattn bench [attention|decode|train|roofline]`: timings, reported and never asserted (lessons 06 and 12)."""

from __future__ import annotations

import argparse
from pathlib import Path

from diffattn.cli.options import require_torch

NAME = "bench"


def add_parser(sub) -> argparse.ArgumentParser:
    bench = sub.add_parser(NAME, help="attention: time attention ops (our V1 vs HF DiffLlama on CPU); decode, train, "
                           "roofline: this machine's ceilings and each variant against them (lesson 12); needs torch")
    bench.add_argument("what", nargs="?", default="attention", choices=["attention", "decode", "train", "roofline"])
    bench.add_argument("--device", default="auto", help="auto (cuda when present), cpu or cuda")
    bench.add_argument("--quick", action="store_true", help="small sizes, few repeats (seconds)")
    bench.add_argument("--no-hf", action="store_true", help="leave transformers' DiffLlama out of the V1 module comparison")
    bench.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own count)")
    bench.add_argument("--no-figures", action="store_true", help="decode|train|roofline: skip the PNG figures")
    bench.add_argument("--out", type=Path, default=None, help="attention: JSON file; others: folder (default "
                       "outputs/bench/<what>-<cpu>-<threads>t-<date>/)")
    return bench


def run(args: argparse.Namespace) -> int:
    require_torch(NAME)
    if args.what != "attention":
        from diffattn.perf import suite

        return suite.main(args)
    from diffattn.perf import bench

    return bench.main(args)
