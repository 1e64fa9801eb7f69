"""`diffattn COMMAND ...` (or `diffattn`): reproduce every lesson's numbers and write outputs/.

Each command is one module here, `<name>_command.py`, with NAME, `add_parser(sub)` and `run(args) -> int`; COMMANDS
lists them in the order `--help` shows. Bad input (sizes <= 0 or past their bound, heads that do not divide, an output
path of the wrong kind, ...) prints one line `error: <constraint>` and exits with code 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from diffattn.cli import (
    accounting_command,
    bench_command,
    compare_command,
    convert_command,
    course_command,
    eval_command,
    gpu_check_command,
    grade_command,
    lesson_command,
    lessons_command,
    models_command,
    plan_command,
    snr_command,
    study_command,
    sweep_command,
    train_command,
    warmstart_command,
)
from diffattn.cli.options import THIRD_PARTY, OneLineErrorParser, bound, check_outputs
from diffattn.core.errors import ConfigError, interrupt_as_exception

COMMANDS = (lesson_command, course_command, accounting_command, snr_command, lessons_command, bench_command,
            grade_command, train_command, compare_command, eval_command, plan_command, convert_command,
            warmstart_command, study_command, sweep_command, models_command, gpu_check_command)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="diffattn", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    for command in COMMANDS:
        command.add_parser(sub).set_defaults(run=command.run)
    parser.set_defaults(main=main)  # lessons check|sync run a quoted command through the command line itself
    bound(parser)  # every number an option takes has an upper bound, quoted in its --help
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help (0), or a bad argument whose one `error:` line is written (2)
        return stop.code if isinstance(stop.code, int) else 2
    try:
        with interrupt_as_exception():  # a time limit's SIGTERM: every command's KeyboardInterrupt path runs
            check_outputs(args)
            status = args.run(args)
        sys.stdout.flush()  # inside the try: a reader that already left must not fail the flush at exit
        return status
    except ConfigError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except ModuleNotFoundError as exc:  # a third-party package this command needs (the stdlib track needs none)
        package = (exc.name or "").split(".")[0]
        if package not in THIRD_PARTY:
            raise
        sys.stderr.write(f"error: {args.command} needs {package}, which this Python cannot import: run `make course` "
                         f"(it installs everything; lesson 00 says how to choose a CPU or CUDA build of torch)\n")
        return 2
    except NotImplementedError as exc:  # the student handout: a lesson ran into an exercise not written yet
        message = str(exc)
        if not message.startswith("exercise "):
            raise
        number = message.split(":")[0].removeprefix("exercise ")
        what = f"lesson {args.number}" if args.command == "lesson" else args.command
        sys.stderr.write(f"error: {what} runs on your exercise {number}, which is not written yet ({message});"
                         f" write it in exercises/, then check it with `make grade EX=ex{number[:2]}`\n")
        return 2
    except KeyboardInterrupt:  # a command with no work of its own to keep (training and compare handle theirs)
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:  # `... --json | head -1`: the reader left; not an error of ours, and no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's recipe: no second error at exit
        return 0



def render_output(command: str) -> str:
    """What `diffattn <command>` prints (how `lessons check|sync` rebuild a lesson's output blocks)."""
    return lessons_command.renderer(main)(command)
