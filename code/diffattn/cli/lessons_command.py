"""`diffattn lessons check|sync`: check or rewrite the numbers, command outputs and code quoted in the tagged sources
(lessons/src/, docs/src/; diffattn.lessons.quotes) and README.md, and render the sources to the clean lessons/ and docs/
(diffattn.lessons.clean). An output block is rebuilt by running its command through the command line
itself, which the dispatcher hands over as `args.main` (so this module need not import it)."""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from diffattn.core.errors import ConfigError
from diffattn.core.paths import lessons_dir
from diffattn.core.results import load_numbers

NAME = "lessons"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help="check or rewrite the numbers, outputs and code quoted in lessons/src/ and docs/src/, "
                                  "and render them to lessons/ and docs/")
    p.add_argument("action", choices=["check", "sync"])
    return p


def renderer(main: Callable[[list[str]], int]) -> Callable[[str], str]:
    """What `diffattn <command>` prints, for an output block; `lesson NN` is rebuilt from outputs/numbers.json."""
    from diffattn import lessons

    def render(command: str) -> str:
        argv = shlex.split(command)
        if argv[:1] == ["lesson"] and len(argv) == 2:
            number = lessons.normalise(argv[1])
            return lessons.load(number).report(load_numbers()[number])
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            main(argv)
        return buffer.getvalue()

    return render


def quoting_files() -> list[Path]:
    """Every markdown file that may quote outputs: the tagged sources of the lessons, their notes and answers and of
    docs/ (diffattn.lessons.clean renders them without tags), and the README."""
    from diffattn.lessons import clean

    root = lessons_dir().parent
    return clean.sources(root) + [root / "README.md"] * (root / "README.md").exists()


def quotes_lessons(path: Path, wanted: Sequence[str]) -> bool:
    """Whether `path` is one of the `wanted` lessons' files or quotes a number of one of them (docs/ does)."""
    from diffattn.lessons.quotes import tagged_keys

    return path.name[:2] in wanted or any(key[:2] in wanted for key in tagged_keys(path.read_text()))


def lesson_mismatches(main: Callable, wanted: Sequence[str] | None = None) -> list:
    """Quoted numbers that disagree with outputs/; with `wanted`, only in those lessons' files."""
    from diffattn import lessons
    from diffattn.lessons.quotes import check_text

    numbers, render = load_numbers(), renderer(main)
    problems = []
    files = quoting_files() if wanted is None else [p for p in quoting_files() if quotes_lessons(p, wanted)]
    for path in files:
        try:
            problems += check_text(path, path.read_text(), numbers, render, lessons.number_kinds)
        except ConfigError as exc:  # e.g. a torch lesson's output block on a stdlib-only Python
            print(f"skipped {path.name}: {exc}", file=sys.stderr)
    from diffattn.lessons import clean

    problems += clean.stale(lessons_dir().parent)
    return problems


def run(args: argparse.Namespace) -> int:
    from diffattn import lessons
    from diffattn.lessons.quotes import sync_text

    if args.action == "check":
        problems = lesson_mismatches(args.main)
        for p in problems:
            print(p)
        print(f"{len(problems)} mismatch(es)")
        return 1 if problems else 0
    from diffattn.lessons import clean

    numbers, render = load_numbers(), renderer(args.main)
    for path in quoting_files():
        source = path.read_text()
        updated = sync_text(source, numbers, render, lessons.number_kinds)
        if updated != source:
            path.write_text(updated)
            print(f"updated {path}")
    for path in clean.render_all(lessons_dir().parent):
        print(f"rendered {path}")
    return 0
