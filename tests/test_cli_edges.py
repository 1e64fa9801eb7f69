"""CLI edge cases (lesson 00): a closed pipe, empty lesson lists, and stdlib-only runs stay quiet and one-line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "code")}


def run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    """Run the CLI with stdout connected to a pipe nobody reads any more (what `| head -1` leaves behind)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "diffattn", *args], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, env=ENV, cwd=ROOT, timeout=120)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [("lesson", "01", "--json"),
                                  ("accounting", "--hidden", "4096", "--heads", "32", "--head-dim", "128",
                                   "--layers", "32")])
def test_a_reader_that_leaves_early_gets_no_traceback(args):
    done = run_into_closed_pipe(*args)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 0


@pytest.mark.parametrize("value", [",", " , ", ""])
def test_course_with_no_lessons_is_a_one_line_error(value):
    done = subprocess.run([sys.executable, "-m", "diffattn", "course", "--lessons", value, "--no-figures"],
                          capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("error: --lessons needs at least one lesson")
    assert len(done.stderr.strip().splitlines()) == 1


def test_course_reports_only_on_the_lessons_it_ran(tmp_path):
    """On a Python without torch, `course --lessons 01` says nothing about lessons 05-07 (they were not asked for)."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text("import sys\nclass Block:\n    def find_spec(self, name, path=None, target=None):\n"
                       "        if name.split('.')[0] in ('torch', 'matplotlib', 'numpy'):\n"
                       "            raise ImportError(name)\nsys.meta_path.insert(0, Block())\n")
    env = {**ENV, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'code'}", "DIFFATTN_ROOT": str(tmp_path)}
    (tmp_path / "lessons").symlink_to(ROOT / "lessons")
    done = subprocess.run([sys.executable, "-m", "diffattn", "course", "--lessons", "01", "--no-figures"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "skipped" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
