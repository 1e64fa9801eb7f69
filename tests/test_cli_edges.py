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


TORCH_COMMANDS = [
    ("lesson", "05"), ("bench", "--quick"), ("bench", "roofline", "--quick"), ("gpu-check",),
    ("train", "--preset", "cpu-tiny", "--variant", "baseline"),
    ("compare", "--preset", "cpu-tiny"), ("eval", "retrieval", "--ckpt", "/nonexistent"),
    ("eval", "suite", "--preset", "cpu-tiny"), ("study", "--summary-only"), ("models", "verify"),
]


@pytest.mark.parametrize("args", TORCH_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_every_torch_command_without_torch_is_one_error_line_and_exit_2(tmp_path, args):
    """A Python without torch (the stdlib track's): each command that needs it says so in one line, exit 2."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nclass Block:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'torch':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n")
    env = {**ENV, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'code'}", "DIFFATTN_ROOT": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "diffattn", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and "torch" in done.stderr.lower(), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr


def test_an_unknown_preset_is_named_before_any_other_missing_option():
    done = subprocess.run([sys.executable, "-m", "diffattn", "train", "--preset", "nope"], capture_output=True,
                          text=True, env=ENV, cwd=ROOT, timeout=60)
    assert done.returncode == 2 and "invalid choice: 'nope'" in done.stderr, done.stderr
