"""`diffattn course [--lessons 01,02] [--no-figures]`: run every lesson, write outputs/numbers.json and the figures."""

from __future__ import annotations

import argparse
import sys
import time

from diffattn.cli.lessons_command import lesson_mismatches
from diffattn.core.errors import ConfigError
from diffattn.core.numberkinds import keep_saved_if_agreeing
from diffattn.core.paths import outputs_dir
from diffattn.core.results import load_numbers, save_lesson_numbers

NAME = "course"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help="run every lesson, write outputs/numbers.json and outputs/figures/")
    p.add_argument("--lessons", default=None, help="comma-separated lesson numbers (default: every lesson)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures (no matplotlib needed)")
    return p


def run(args: argparse.Namespace) -> int:
    from diffattn import lessons as experiments

    wanted_text = ",".join(experiments.LESSONS) if args.lessons is None else args.lessons
    wanted = [experiments.normalise(n.strip()) for n in wanted_text.split(",") if n.strip()]
    if not wanted:
        raise ConfigError(f"--lessons needs at least one lesson number, e.g. 01,02 (got {wanted_text!r})")
    figures_dir = outputs_dir() / "figures"
    saved = load_numbers()
    summary = []
    for number in wanted:
        missing = experiments.missing_requirements(number)
        if missing:
            summary.append(f"  {number}  lesson {number} skipped (needs {', '.join(missing)})")
            continue
        module = experiments.load(number)
        print(f"lesson {number}: {module.TITLE}", file=sys.stderr)
        started = time.perf_counter()
        results = keep_saved_if_agreeing(module.run(progress=True), saved.get(number), experiments.number_kinds(number))
        save_lesson_numbers(number, results)  # saved before figures: a plotting failure loses no numbers
        made = [] if args.no_figures else experiments.figures(module, results, figures_dir)
        summary.append(f"  {number}  {module.TITLE:<52} {time.perf_counter() - started:5.1f} s  {len(made)} figure(s)")
    print("course summary (outputs/numbers.json, outputs/figures/):")
    print("\n".join(summary))
    print(experiments.device_note(wanted))
    stale = lesson_mismatches(args.main, wanted)
    if stale:
        print(f"note: {len(stale)} quoted number(s) in lessons/ differ from outputs; review, then `make lessons-sync`:")
        print("\n".join(f"  {m}" for m in stale[:10]))
    return 0
