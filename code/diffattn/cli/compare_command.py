"""`diffattn compare --preset P [--seeds S]`: every variant with matched data and budget, tabulated and plotted
(lesson 08); `--lambda-init` is lesson 11's λ_init ablation (diffattn.training.ablation); `--overhead` times the
trainer's step against a bare loop. The preset and its overrides are resolved once, here (diffattn.config.matched)."""

from __future__ import annotations

import argparse
import statistics
import sys

from diffattn.cli import options
from diffattn.cli.options import require_torch
from diffattn.config import matched
from diffattn.core.errors import require
from diffattn.core.paths import outputs_dir
from diffattn.core.results import write_json_atomic

NAME = "compare"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help="train every variant with matched data and budget, tabulate and plot")
    options.add_compare_arguments(p)
    return p


def run(args: argparse.Namespace) -> int:
    require(args.seeds > 0, f"--seeds must be > 0 (got {args.seeds})")
    if args.lambda_init:
        return ablation(args)
    m = matched(args.preset, task=args.task, steps=args.steps, device=args.device, compile=args.compile,
                bf16=args.bf16)  # bad input fails here, before any training
    require_torch(NAME)
    if args.overhead:
        return overhead(args)
    from diffattn.training.compare import PARTIAL, compare, format_table, plot, save_results

    out = args.out or outputs_dir() / "compare" / f"{args.preset}-{args.task}"
    out.mkdir(parents=True, exist_ok=True)
    try:
        results = compare(m, tuple(range(args.seeds)), progress=not args.no_progress, partial=out / PARTIAL,
                          reuse=args.reuse)
    except KeyboardInterrupt:
        kept = f"the variants finished so far are in {out / PARTIAL}" if (out / PARTIAL).is_file() else "no variant finished"
        sys.stderr.write(f"interrupted: {kept}; the interrupted run kept its metrics and last checkpoint\n")
        return 130
    save_results(results, out, args.note, format_table, plot, "compare.png")
    (out / PARTIAL).unlink(missing_ok=True)
    for variant, error in results.get("failed", {}).items():
        sys.stderr.write(f"error: {variant} did not train ({error}); the other variants' results are in {out}\n")
    return 1 if "failed" in results else 0


def ablation(args: argparse.Namespace) -> int:
    """`compare --lambda-init SETTINGS`: DIFF V1 once per setting and seed."""
    require_torch(NAME)
    from diffattn.training import ablation as study

    settings = study.parse_settings(args.lambda_init)
    m = matched(args.preset, task=args.task, steps=args.steps)  # bad input fails before any training
    from diffattn.training.compare import save_results

    out = args.out or outputs_dir() / "compare" / f"{args.preset}-{args.task}-lambda-init"
    results = study.ablate(m, tuple(range(args.seeds)), settings, not args.no_progress, reuse=args.reuse)
    save_results(results, out, args.note, study.format_table, study.plot, "lambda-init.png")
    return 0


def overhead(args: argparse.Namespace) -> int:
    from diffattn.training.compare import overhead as measure

    result = measure(args.preset, steps=args.steps or 60)
    print(f"{result['preset']} {result['variant']}: trainer step {statistics.median(result['trainer_tokens_per_s']):,.0f}"
          f" tokens/s, bare loop {statistics.median(result['bare_tokens_per_s']):,.0f} tokens/s, "
          f"ratio {result['ratio']:.3f} (medians of {len(result['bare_tokens_per_s'])} alternating runs)")
    if args.note:
        result["machine"]["note"] = args.note
    if args.out:
        write_json_atomic(args.out / "overhead.json", result)
    return 0
