"""`diffattn sweep [--jobs 2] [--stage N] [--summary-only]`: lesson 09's recall sweep (the declared runs:
diffattn.eval.sweep): train what is missing, then write outputs/sweep/ (diffattn.eval.sweep_report)."""

from __future__ import annotations

import argparse

from diffattn.cli.options import require_torch
from diffattn.eval.sweep import STAGES

NAME = "sweep"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help="lesson 09's recall sweep: train what is missing, then write outputs/sweep/")
    p.add_argument("--jobs", type=int, default=2, help="runs trained at once, one torch thread each (default 2)")
    p.add_argument("--stage", type=int, default=STAGES[-1], choices=STAGES,
                   help="1: the declared cells; 2: also the follow-up seeds of cells that separate; 3: also the "
                        "mechanism controls and the replication; 4: also the cells at a peak learning rate of 1e-3; "
                        "5 (default): also the mechanism controls in stage 4's first cell")
    p.add_argument("--from-stage", type=int, default=1, choices=STAGES,
                   help="train only the runs this stage and later add (the earlier stages' cells keep what "
                        "outputs/sweep/summary.json recorded of them; default 1: every stage)")
    p.add_argument("--summary-only", action="store_true", help="summarise the finished runs, train nothing")
    p.add_argument("--ship", action="store_true", help="maintainers: make the runs the declared rule chooses the "
                                                        "shipped recall checkpoints (outputs/models/cpu-recall/)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def run(args: argparse.Namespace) -> int:
    require_torch(NAME)
    from diffattn.eval import sweep_report

    return sweep_report.main(args)
