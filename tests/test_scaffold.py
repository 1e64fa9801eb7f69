"""`make new-lesson`: a new lesson starts in five files that already meet the course's checks."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diffattn.cli import scaffold

ROOT = Path(__file__).resolve().parents[1]


def scaffold_in(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DIFFATTN_ROOT": str(tmp_path), "PYTHONPATH": str(ROOT / "code")}
    return subprocess.run([sys.executable, "-m", "diffattn.cli.scaffold", *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_new_lesson_files_meet_the_course_checks(tmp_path):
    done = scaffold_in(tmp_path, "14", "real-models", "--title", "Rooflines")
    assert done.returncode == 0, done.stderr
    made = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert made == {"lessons/src/14-real-models.md", "lessons/14-real-models.md", "notebooks/14-real-models.ipynb",
                    "code/diffattn/lessons/lesson14_real_models.py", "exercises/ex14_real_models.py",
                    "tests/test_14_real_models.py", "lessons/src/notes/14.md", "lessons/src/answers/14.md",
                    "lessons/notes/14.md", "lessons/answers/14.md"}
    headings = [line[3:] for line in (tmp_path / "lessons/14-real-models.md").read_text().splitlines()
                if line.startswith("## ")]
    assert headings == list(scaffold.SECTIONS)  # tests/test_lessons.py's order
    nb = json.loads((tmp_path / "notebooks/14-real-models.ipynb").read_text())
    assert nb["nbformat"] == 4 and all(c.get("outputs", []) == [] for c in nb["cells"])
    spec = importlib.util.spec_from_file_location("lesson14", tmp_path / "code/diffattn/lessons/lesson14_real_models.py")
    lesson = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lesson)
    assert lesson.TITLE == "Rooflines" and lesson.report(lesson.run(progress=False)).startswith("Lesson 14")
    assert lesson.figures({}, tmp_path) == []
    compile((tmp_path / "tests/test_14_real_models.py").read_text(), "test", "exec")
    namespace: dict = {}
    exec((tmp_path / "exercises/ex14_real_models.py").read_text(), namespace)
    with pytest.raises(NotImplementedError, match="exercise 14.1"):
        namespace["solve"](1.0)


@pytest.mark.parametrize("args, words", [(["14", "real-models"], "lesson 14 exists already"),
                                         (["00", "again"], "lesson 00 exists already"),
                                         (["1", "x"], "NN must be two digits"),
                                         (["15", "Bad_Slug"], "SLUG must be lower-case words"),
                                         (["03", "again"], "lesson 03 exists already")])
def test_bad_or_existing_lessons_are_one_line_errors(tmp_path, args, words):
    assert scaffold_in(tmp_path, "14", "real-models").returncode == 0
    (tmp_path / "code/diffattn/lessons/lesson03_snr.py").write_text("")
    (tmp_path / "lessons/00-setup.md").write_text("# 00 · Setup\n")  # a lesson with no experiment module
    done = scaffold_in(tmp_path, *args)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and words in done.stderr, done.stderr
