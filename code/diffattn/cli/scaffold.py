"""`make new-lesson NN=14 SLUG=roofline`: the files a new lesson is written in, from the course's templates.

    lessons/src/NN-slug.md                      the text, with CONTRIBUTING.md's sections in order (rendered to
                                                lessons/NN-slug.md without its number tags)
    notebooks/NN-slug.ipynb                     committed without outputs; its first cell finds code/
    code/diffattn/lessons/lessonNN_slug.py      TITLE, run, report, figures (found by its file name)
    exercises/exNN_slug.py                      one stub, if the lesson has exercises (--no-exercise: none)
    tests/test_NN_slug.py                       the lesson's tests
    lessons/src/notes/NN.md, src/answers/NN.md  its reproducibility notes and the answers to "Check yourself"

It refuses to overwrite anything. What it cannot write for you is listed when it finishes: the exercise's lines in
the rubric (code/diffattn/grading/rubric.py), its stub's copy in tests/grading/stubs/, a known-wrong implementation in
tests/wrong/, an independent correct one in tests/correct/, the rubric line in .github/workflows/classroom.yml, and
`make course` to put the lesson's numbers in outputs/numbers.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from diffattn.core.errors import ConfigError, require
from diffattn.core.paths import repo_root
from diffattn.lessons import clean

SECTIONS = ("What you will learn", "The problem", "The math", "Build it", "Run it", "Check yourself", "Exercises",
            "Key terms", "Further reading", "You can now")


def paths(number: str, slug: str, exercise: bool) -> dict[str, Path]:
    root = repo_root()
    found = {"lesson": root / "lessons" / "src" / f"{number}-{slug}.md",
             "notebook": root / "notebooks" / f"{number}-{slug}.ipynb",
             "experiment": root / "code" / "diffattn" / "lessons" / f"lesson{number}_{slug.replace('-', '_')}.py",
             "test": root / "tests" / f"test_{number}_{slug.replace('-', '_')}.py",
             "notes": root / "lessons" / "src" / "notes" / f"{number}.md",
             "answers": root / "lessons" / "src" / "answers" / f"{number}.md"}
    if exercise:
        found["exercise"] = root / "exercises" / f"ex{number}_{slug.replace('-', '_')}.py"
    return found


def lesson_text(number: str, slug: str, title: str, files: dict[str, Path]) -> str:
    module = files["experiment"].stem
    header = [f"# {number} · {title}", "", "> One-line motto.", "",
              f"**Track:** torch · **Time:** ~45 min · **Prerequisites:** lesson {int(number) - 1:02d}",
              f"**Notebook:** [notebooks/{number}-{slug}.ipynb](../notebooks/{number}-{slug}.ipynb) · "
              f"**Code:** `diffattn.lessons.{module}` · **Tests:** "
              f"[tests/{files['test'].name}](../tests/{files['test'].name}) · **Notes:** "
              f"[reproducibility](notes/{number}.md) · **Answers:** [answers/{number}.md](answers/{number}.md)", ""]
    body = []
    for section in SECTIONS:
        body += [f"## {section}", ""]
        if section == "Run it":
            body += ["```bash", f"diffattn lesson {number}", "```", ""]
        if section == "Check yourself":
            body += ["1. A question whose answer is in the text above.", ""]
    return "\n".join(header + body)


def notes_text(number: str, title: str) -> str:
    return (f"# {number} · {title}: reproducibility notes\n\nHow each number of the lesson was produced: the machine, "
            f"the kernel path, the seeds, the tolerance it may move by on another CPU.\n")


def answers_text(number: str, title: str) -> str:
    return f"# {number} · {title}: answers\n\n1. The answer, and why.\n"


def notebook(number: str, slug: str, title: str) -> str:
    cells = [{"cell_type": "markdown", "id": "intro", "metadata": {},
              "source": [f"# {number} · {title} (notebook)\n", "\n",
                         f"Companion to [lessons/{number}-{slug}.md](../lessons/{number}-{slug}.md)."]},
             {"cell_type": "code", "execution_count": None, "id": "path", "metadata": {}, "outputs": [],
              "source": ['import sys, pathlib; sys.path.insert(0, str(pathlib.Path.cwd().parent / "code"))']}]
    nb = {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                      "name": "python3"}, "language_info": {"name": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def experiment(number: str, title: str) -> str:
    return f'''"""Lesson {number}: {title}.

Computes every number the lesson quotes (diffattn.lessons: run, report, figures).
"""

from __future__ import annotations

from pathlib import Path

TITLE = {title!r}


def run(progress: bool = True) -> dict:
    return {{}}


def report(results: dict) -> str:
    return f"Lesson {number} · {{TITLE}}"


def figures(results: dict, outdir: Path) -> list[Path]:
    return []
'''


def exercise_stub(number: str, title: str) -> str:
    return f'''"""Exercise {number}.1: {title}. Read lessons/{number}-*.md first; the docstring below is the complete spec."""


def solve(x: float) -> float:
    """Inputs, shapes, output, tolerance, and one worked example go here (CONTRIBUTING.md, Exercises and grading)."""
    raise NotImplementedError("exercise {number}.1: solve")
'''


def test_file(number: str, module: str) -> str:
    return f'''"""Lesson {number}'s tests."""

from diffattn import lessons as experiments


def test_lesson_runs_and_reports():
    lesson = experiments.load("{number}")
    results = lesson.run(progress=False)
    assert lesson.report(results).startswith("Lesson {number}")
'''


def scaffold(number: str, slug: str, title: str, exercise: bool = True) -> dict[str, Path]:
    """Write the new lesson's files; ConfigError (one line) for a bad number or slug, or a file that exists."""
    require(re.fullmatch(r"\d\d", number) is not None, f"NN must be two digits, e.g. 14 (got {number!r})")
    require(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug) is not None,
            f"SLUG must be lower-case words joined by '-', e.g. roofline or real-models (got {slug!r})")
    files = paths(number, slug, exercise)
    existing = sorted(repo_root().glob(f"code/diffattn/lessons/lesson{number}_*.py")) + sorted(
        repo_root().glob(f"lessons/{number}-*.md"))
    require(not existing, f"lesson {number} exists already ({existing[0].name if existing else ''})")
    taken = [str(p.relative_to(repo_root())) for p in files.values() if p.exists()]
    require(not taken, f"refusing to overwrite {', '.join(taken)}")
    texts = {"lesson": lesson_text(number, slug, title, files), "notebook": notebook(number, slug, title),
             "experiment": experiment(number, title), "test": test_file(number, files["experiment"].stem),
             "notes": notes_text(number, title), "answers": answers_text(number, title)}
    if exercise:
        texts["exercise"] = exercise_stub(number, title)
    for kind, path in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(texts[kind])
    clean.render_all(repo_root())  # the lesson, its notes and answers as a reader opens them (lessons/, no tags)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m diffattn.cli.scaffold", description=__doc__.splitlines()[0])
    parser.add_argument("number", help="two digits, e.g. 14")
    parser.add_argument("slug", help="lower-case words joined by '-', e.g. roofline")
    parser.add_argument("--title", default=None, help="the lesson's title (default: the slug, capitalised)")
    parser.add_argument("--no-exercise", action="store_true", help="a lesson without exercises")
    args = parser.parse_args(argv)
    try:
        files = scaffold(args.number, args.slug, args.title or args.slug.replace("-", " ").capitalize(),
                         exercise=not args.no_exercise)
    except ConfigError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    print("wrote " + ", ".join(str(p.relative_to(repo_root())) for p in files.values()))
    print("then: write the lesson (its numbers through <!--n NN.key--> tags, its output block, a row in the README's "
          "course map); `make course` puts its numbers in outputs/numbers.json, `make lessons-sync` into the text, and "
          "`make test` passes once the lesson quotes a tagged number"
          + ("; for the exercise, add its lines to code/diffattn/grading/rubric.py (EXERCISES, REFERENCE, RETURNS), "
             "copy its stub to tests/grading/stubs/, write a known-wrong implementation in tests/wrong/ and an "
             "independent correct one in tests/correct/, and add its rubric line to .github/workflows/classroom.yml"
             if not args.no_exercise else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
