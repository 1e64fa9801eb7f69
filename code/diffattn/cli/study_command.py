"""`diffattn study [--jobs 2] [--groups ...]`: lessons 08-11's CPU study (make train-small): train what is missing,
then write outputs/study/ (the runs: diffattn.training.study_runs; the summary: diffattn.eval.study_summary)."""

from __future__ import annotations

import argparse

from diffattn.cli import options
from diffattn.cli.options import require_torch

NAME = "study"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help="lessons 08-11's CPU study (make train-small): train what is missing, "
                                  "then write outputs/study/")
    options.add_study_arguments(p)
    return p


def run(args: argparse.Namespace) -> int:
    require_torch(NAME)
    from diffattn.eval import study_summary

    return study_summary.main(args)
