"""`diffattn sweep [--jobs 2] [--stage N] [--summary-only]`: lesson 09's recall sweep (the declared runs:
diffattn.eval.sweep): train what is missing, then write outputs/sweep/ (diffattn.eval.sweep_report)."""

from __future__ import annotations

import argparse

from diffattn.cli.options import require_torch
from diffattn.core.errors import require
from diffattn.core.paths import outputs_dir
from diffattn.core.results import read_json
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
    from diffattn.eval import sweep, sweep_report
    from diffattn.training.compare import machine
    from diffattn.training.runs import finished, train_pass

    require(args.jobs > 0, f"--jobs must be > 0 (got {args.jobs})")
    require(args.from_stage <= args.stage, f"--from-stage {args.from_stage} is after --stage {args.stage}")
    folder, figure_folder = outputs_dir() / "sweep", outputs_dir() / "figures"
    runs, learned = sweep.plan(1), None
    for stage in range(1, args.stage + 1):
        if stage >= 2:
            learned = sweep_report.learned_map(sweep_report.summarise([r for r in runs if finished(r.job())]))
            runs = sweep.plan(stage, learned)
        if stage < args.from_stage:
            continue
        earlier = {(r.name, r.seed) for r in sweep.plan(args.from_stage - 1, learned)} if args.from_stage > 1 else set()
        todo = [] if args.summary_only else [r for r in runs if not finished(r.job())
                                             and (r.name, r.seed) not in earlier]
        if todo:
            log = folder / sweep_report.TRAINING_FILE
            passes = read_json(log)["passes"] if log.is_file() else []
            if not train_pass([r.job() for r in todo], args.jobs, not args.no_progress, log,
                              {"stage": stage, "runs_planned": len(runs), "machine": machine()}, passes):
                return 130
    done = [r for r in runs if finished(r.job())]
    require(bool(done), "no sweep run has finished yet: run `diffattn sweep` without --summary-only")
    summary = sweep_report.write(done, folder, figure_folder)
    print(sweep_report.table(summary))
    if args.ship:
        print(f"shipped: {sweep_report.ship(summary, done)}")
    return 0
