"""`diffattn study [--jobs 2] [--groups ...]`: lessons 08-11's CPU study (make train-small): train what is missing,
then write outputs/study/ (the runs: diffattn.training.study_runs; the summary: diffattn.eval.study_summary)."""

from __future__ import annotations

import argparse

from diffattn.cli import options
from diffattn.cli.options import require_torch
from diffattn.core.errors import require
from diffattn.core.paths import outputs_dir

NAME = "study"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help="lessons 08-11's CPU study (make train-small): train what is missing, "
                                  "then write outputs/study/")
    options.add_study_arguments(p)
    return p


def run(args: argparse.Namespace) -> int:
    require_torch(NAME)
    from diffattn.eval import study_summary
    from diffattn.training import study_runs
    from diffattn.training.compare import machine
    from diffattn.training.runs import finished, train_pass

    groups = tuple(g.strip() for g in args.groups.split(",") if g.strip()) if args.groups else study_runs.GROUPS
    runs = study_runs.plan(groups, args.retrieval_preset, args.retrieval_steps)
    out = args.out or outputs_dir() / "study"
    require(args.jobs > 0, f"--jobs must be > 0 (got {args.jobs})")
    todo = [] if args.summary_only else [r for r in runs if not finished(r.job())]
    if todo:
        log = out / study_runs.TRAINING_FILE
        record = {"runs_planned": len(runs), "groups": list(groups),
                  "machine": machine() | ({"note": args.note} if args.note else {})}
        if not train_pass([r.job() for r in todo], args.jobs, not args.no_progress, log, record,
                          study_runs.training_passes(log)):
            return 130
    study_summary.write(runs, out)
    return 0
