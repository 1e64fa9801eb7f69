"""`diffattn grade [--only ex03 ...]`: grade the exercises, each in its own child process, into results.json."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "grade"


def add_parser(sub) -> argparse.ArgumentParser:
    grade = sub.add_parser(NAME, help="grade the exercises, each in its own child process; write results.json",
                           description="Grade every exercise (exercises/exNN_*.py) in its own child process and write "
                                       "a Gradescope results.json. Exit 0 when grading completed, whatever the score.")
    grade.add_argument("--impl", default="exercises",
                       help="exercises (default), reference, or a known-wrong module such as tests.wrong.w01_softmax_in_place")
    grade.add_argument("--only", nargs="+", default=[], metavar="EX",
                       help="grade only these exercises, e.g. ex03 ex05 or ex03,ex05")
    grade.add_argument("--tests", nargs="+", type=Path, default=[], metavar="DIR",
                       help="extra graded test folders (hidden tests: visibility hidden in results.json)")
    grade.add_argument("--submission", type=Path, default=None, metavar="DIR",
                       help="folder with the student's exNN_*.py files (default: exercises/ of this checkout)")
    grade.add_argument("--json", type=Path, default=Path("results.json"), metavar="PATH",
                       help="where to write results.json (default: %(default)s)")
    grade.add_argument("--timeout", type=float, default=60.0, metavar="S",
                       help="wall-clock seconds per exercise (default: %(default)g)")
    grade.add_argument("--memory", type=int, default=3072, metavar="MB",
                       help="address-space limit per exercise in MiB; PyTorch needs about 1 GiB (default: %(default)s)")
    grade.add_argument("--jobs", type=int, default=None, metavar="N",
                       help="exercises graded side by side, each in its own child with its own limits "
                            "(default: the number of cores)")
    grade.add_argument("--forbid-reference-imports", action="store_true",
                       help="an exercise file that uses its reference solution scores 0 (default: reported only)")
    grade.add_argument("--fail-below-full", action="store_true",
                       help="exit 3 unless every graded test passed (for GitHub Classroom's command grader)")
    grade.add_argument("--details", action="store_true", help="also print each exercise part's first failure in full")
    return grade


def run(args: argparse.Namespace) -> int:
    from diffattn.core.paths import repo_root
    from diffattn.grading import grader

    options = grader.Options(root=repo_root(), impl=args.impl, only=args.only, tests=args.tests,
                             submission=args.submission, json_path=args.json, timeout=args.timeout,
                             memory_mb=args.memory, forbid_reference_imports=args.forbid_reference_imports,
                             fail_below_full=args.fail_below_full, **({} if args.jobs is None else {"jobs": args.jobs}))
    return grader.main(options, details=args.details)
