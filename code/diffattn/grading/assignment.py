"""One assignment: the exercises a Gradescope autograder or a GitHub Classroom workflow grades, and nothing else.

A course hands out its exercises a few at a time. Graded against all of them, a lesson-01 submission would read
12.5 / 208 with a "not submitted" row for every exercise part it was never asked for. So an assignment names its
exercises once and everything that grades it counts only those:

    make gradescope-zip EXERCISES="ex01 ex02"         autograder.zip holds EXERCISES; run_autograder grades --only them
    make handout DEST=dir EXERCISES="ex01 ex02"        the handout's .github/workflows/classroom.yml has only their
                                                       rubric lines (classroom_workflow), so its points add up to theirs

`python -m diffattn.grading.assignment ROOT NAME...` checks the names against ROOT's exercises and prints them in
the grader's spelling (exNN, in order), or one `error:` line and exit 2.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from diffattn.core.errors import ConfigError, require
from diffattn.grading.grader import discover

WORKFLOW = ".github/workflows/classroom.yml"
STEP = re.compile(r"^      - ")  # a step of the workflow's only job
GRADING_STEP = re.compile(r"^      - id: (ex\d\d)$")
RESULTS_LINE = re.compile(r"^ +EX(\d\d)_RESULTS: ")
RUNNERS_LINE = re.compile(r"^( +runners: ).*$")


def exercise_names(names: list[str], known: list[str]) -> list[str]:
    """`names` ("ex01 ex02", "01,02", ...) as exercise names in course order, each one of `known`; ConfigError (one
    line) for an unknown one or for none at all."""
    wanted = [n.strip() for item in names for n in re.split(r"[\s,]+", item) if n.strip()]
    wanted = [n if n.startswith("ex") else f"ex{n}" for n in wanted]
    require(wanted, f"an assignment names at least one exercise (known: {', '.join(known)})")
    unknown = [n for n in wanted if n not in known]
    require(not unknown, f"unknown exercise {', '.join(unknown)} (known: {', '.join(known)})")
    return sorted(set(wanted), key=known.index)


def classroom_workflow(text: str, exercises: list[str]) -> str:
    """The Classroom workflow `text` (the course's, one rubric step per exercise) with only the steps, reporter
    variables and runners of `exercises`; ConfigError when one of them has no step in it."""
    steps = [m.group(1) for line in text.splitlines() if (m := GRADING_STEP.match(line))]
    missing = [e for e in exercises if e not in steps]
    require(not missing, f"{WORKFLOW} has no rubric step for {', '.join(missing)}")
    kept, dropping = [], False
    for line in text.splitlines():
        if STEP.match(line):
            step = GRADING_STEP.match(line)
            dropping = step is not None and step.group(1) not in exercises
        results = RESULTS_LINE.match(line)
        if dropping or results and f"ex{results.group(1)}" not in exercises:
            continue
        runners = RUNNERS_LINE.match(line)
        kept.append(f"{runners.group(1)}{','.join(exercises)}" if runners else line)
    first_comment_end = next(i for i, line in enumerate(kept) if not line.startswith("#"))
    kept.insert(first_comment_end, f"# This assignment grades {', '.join(exercises)} only "
                                   f"(make handout EXERCISES=\"{' '.join(exercises)}\").")
    return "\n".join(kept) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) < 1:
        sys.stderr.write("usage: python -m diffattn.grading.assignment ROOT EXERCISE...\n")
        return 2
    try:
        print(" ".join(exercise_names(argv[1:], discover(Path(argv[0])))))
    except ConfigError as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
