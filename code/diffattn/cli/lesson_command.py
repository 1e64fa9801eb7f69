"""`diffattn lesson NN [--json]`: run one lesson's experiments and print its results."""

from __future__ import annotations

import argparse
import json

NAME = "lesson"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help="run one lesson's experiments and print its results")
    p.add_argument("number", help="lesson number, e.g. 01")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON instead of the report")
    return p


def run(args: argparse.Namespace) -> int:
    from diffattn import lessons

    module = lessons.load(args.number)
    results = module.run(progress=not args.json)
    print(json.dumps(results, indent=1) if args.json else module.report(results))
    return 0
