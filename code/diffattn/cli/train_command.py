"""`diffattn train --preset P --variant V [...]`: train one variant on one task (lesson 08); works under torchrun.

The preset, the variant and the overrides are resolved here, once, into a GPTConfig and a TrainConfig
(diffattn.config.build_configs); the trainer (diffattn.training.loop.train) takes those objects."""

from __future__ import annotations

import argparse
import os
import sys

from diffattn.cli import options
from diffattn.cli.options import require_torch
from diffattn.config import GPTConfig, TrainConfig, build_configs, default_out, parse_task_options
from diffattn.pure.variants import LABELS

NAME = "train"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help="train one variant on one task (lesson 08); works under torchrun")
    options.add_train_arguments(p)
    return p


def configs(args: argparse.Namespace) -> tuple[GPTConfig, TrainConfig]:
    overrides = dict(task=args.task, data=args.data, seed=args.seed, steps=args.steps, batch_size=args.batch_size,
                     grad_accum=args.grad_accum, seq_len=args.seq_len, lr=args.lr, device=args.device,
                     eval_every=args.eval_every, checkpoint_every=args.checkpoint_every,
                     compile=args.compile, warmup_steps=args.warmup_steps,
                     task_options=parse_task_options(args.task_option) if args.task_option else None)
    if args.device == "cpu":
        overrides["bf16"] = False
    return build_configs(args.preset, args.variant, lambda_init=args.lambda_init, **overrides)


def run(args: argparse.Namespace) -> int:
    model, c = configs(args)  # bad input fails here, before torch is imported
    require_torch(NAME)
    from diffattn.training.loop import train

    out = args.out or default_out(args.preset, c.task, c.variant, c.seed)
    try:
        last = train(args.preset, model, c, out, resume=args.resume, overwrite=args.overwrite,
                     progress=not args.no_progress)
    except KeyboardInterrupt:
        sys.stderr.write(f"interrupted: checkpoint saved in {out}; add --resume to continue\n")
        return 130
    if int(os.environ.get("RANK", "0")) == 0:
        val = f", val loss {last['val_loss']:.4f}" if "val_loss" in last else ""
        print(f"{LABELS[c.variant]}: step {last['step']}, train loss {last['train_loss']:.4f}{val}, "
              f"{last['tokens_per_s']:,.0f} tokens/s; checkpoint in {out}")
    return 0
