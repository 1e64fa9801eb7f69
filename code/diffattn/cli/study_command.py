"""`diffattn study [--jobs 2] [--groups ...]`: lessons 08-11's CPU study (make train-small): train what is missing,
then write outputs/study/ (the runs: diffattn.training.study_runs; the summary: diffattn.eval.study_summary)."""

from __future__ import annotations

import argparse

from diffattn.cli import options
from diffattn.cli.options import require_torch
from diffattn.core.errors import require
from diffattn.core.paths import outputs_dir
from diffattn.core.results import write_json_atomic

NAME = "study"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help="lessons 08-11's CPU study (make train-small): train what is missing, "
                                  "then write outputs/study/")
    options.add_study_arguments(p)
    return p


def run(args: argparse.Namespace) -> int:
    require_torch(NAME)
    import time

    from diffattn.eval import study_summary
    from diffattn.training import study_runs
    from diffattn.training.compare import machine
    from diffattn.training.runs import finished, train_missing

    groups = tuple(g.strip() for g in args.groups.split(",") if g.strip()) if args.groups else study_runs.GROUPS
    runs = study_runs.plan(groups, args.retrieval_preset, args.retrieval_steps)
    out = args.out or outputs_dir() / "study"
    require(args.jobs > 0, f"--jobs must be > 0 (got {args.jobs})")
    todo = [] if args.summary_only else [r for r in runs if not finished(r.job())]
    if todo:
        started = time.perf_counter()
        try:
            train_missing([r.job() for r in todo], workers=args.jobs, progress=not args.no_progress)
        except KeyboardInterrupt:
            print("interrupted: finished runs are kept and are not retrained next time")
            return 130
        finally:  # every pass's wall time, also a pass some runs failed in (the next pass trains only those)
            log = out / study_runs.TRAINING_FILE
            passes = study_summary.training_passes(log)
            passes.append({"wall_s": time.perf_counter() - started, "runs_trained": len(todo),
                           "runs_finished": sum(finished(r.job()) for r in todo), "runs_planned": len(runs),
                           "groups": list(groups), "jobs": args.jobs,
                           "machine": machine() | ({"note": args.note} if args.note else {})})
            write_json_atomic(log, {"passes": passes})
    study_summary.write(runs, out)
    return 0
