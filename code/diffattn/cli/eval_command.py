"""`diffattn eval KIND --ckpt DIR [--json PATH]`: one evaluation of lessons 09-11 on one checkpoint.

    retrieval, allocation, outliers, quantize, lambda-sweep: diffattn.eval.kinds says what each measures
    suite         every kind above on the `needles` checkpoints of --preset (trained when missing), JSON per variant and
                  kind in --out (default outputs/eval/<preset>/); with --seeds S also retrieval on seeds 1…S-1; then
                  summary.json (machine, wall time, 4-6-needle accuracy per seed): what `make train-small` and
                  scripts/gpu_check.sh run

Bad input (a missing, truncated or foreign checkpoint, a context longer than the model's, bits outside 2-16, a V2
coefficient outside (0, 1), a baseline given to lambda-sweep) is one `error:` line and exit code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from diffattn.cli.options import require_torch
from diffattn.core.errors import require
from diffattn.eval import kinds

NAME = "eval"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help="evaluate a checkpoint: retrieval, allocation, outliers, quantize, lambda-sweep")
    p.add_argument("kind", choices=kinds.KINDS + ("suite",), help="which evaluation")
    p.add_argument("--ckpt", type=Path, default=None, help="checkpoint directory written by `diffattn train`")
    p.add_argument("--preset", default=None, help="suite: the preset whose needles checkpoints to evaluate")
    p.add_argument("--out", type=Path, default=None, help="suite: where the JSON files go")
    p.add_argument("--steps", type=int, default=None, help="suite: training steps of missing checkpoints (default: "
                                                          "the preset's; another value is another checkpoint)")
    p.add_argument("--warmup-steps", type=int, default=None, help="suite: their warmup (default: the preset's)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="suite: torch.compile while training (default: the preset's)")
    p.add_argument("--seeds", type=int, default=1,
                   help="suite: training seeds 0…S-1; seeds after 0 get retrieval only, for the seed spread (default 1)")
    p.add_argument("--lengths", default=None, help="comma-separated context lengths (default: max_seq_len/2 and max)")
    p.add_argument("--samples", type=int, default=8, help="examples per (layout, length, depth) cell (default 8)")
    p.add_argument("--seed", type=int, default=0, help="seed of the evaluation examples (default 0)")
    p.add_argument("--bits", default="16,8,6,4", help="quantize: comma-separated bit widths, 2-16 (default 16,8,6,4)")
    p.add_argument("--mode", default=None,
                   help="lambda-sweep: V1 scale|fixed (default scale), V2 fixed|offset (default fixed)")
    p.add_argument("--values", default=None, help="lambda-sweep: comma-separated settings (default depends on mode)")
    p.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    return p


def options(args: argparse.Namespace) -> kinds.EvalOptions:
    """The options, resolved once: nothing below reads `args`."""
    return kinds.EvalOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(kinds.EvalOptions)})


def run(args: argparse.Namespace) -> int:
    require_torch(NAME)
    from diffattn.training.checkpoint import load_model
    from diffattn.core.results import write_json_atomic

    if args.kind == "suite":
        return kinds.suite(options(args))
    require(args.ckpt is not None, f"eval {args.kind} needs --ckpt DIR")
    model, config = load_model(args.ckpt)
    results = kinds.evaluate(args.kind, model, config, options(args))
    print(f"{args.kind} on {args.ckpt} ({model.config.attention}):")
    print(kinds.summary(args.kind, results))
    if args.json:
        write_json_atomic(args.json, results)
    return 0
