"""`diffattn compare --preset P [--seeds S]`: every variant with matched data and budget, tabulated and plotted
(lesson 08); `--lambda-init` is lesson 11's λ_init ablation (diffattn.training.ablation)."""

from __future__ import annotations

import argparse

from diffattn.cli import options
from diffattn.cli.options import require_torch

NAME = "compare"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help="train every variant with matched data and budget, tabulate and plot")
    options.add_compare_arguments(p)
    return p


def run(args: argparse.Namespace) -> int:
    require_torch(NAME)
    if args.lambda_init:
        from diffattn.training import ablation

        return ablation.main(args)
    from diffattn.training import compare

    return compare.main(args)
