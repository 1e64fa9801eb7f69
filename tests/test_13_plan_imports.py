"""Lesson 13: `python -m diffattn plan` answers in under a second because it imports nothing heavy. Read from
`python -X importtime`, which lists every module a process imported (its stderr), so the check sees what the real
command line imports, not what an in-process test has already loaded; the controls show it does see an import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# what a plan must never pay for: the torch stack, the transformers extra, and the lesson modules (which parse every
# lesson's source to find what each needs)
HEAVY = ("torch", "numpy", "matplotlib", "safetensors", "transformers", "diffattn.experiments")
PLAN = ["plan", "--preset", "llama-3.1-8b", "--context", "32768", "--hallucination", "high", "--budget-tokens", "10B",
        "--mode", "uptrain"]


def imported(*args: str, returncode: int = 0) -> set[str]:
    """Every module `python -m diffattn ARGS` imported (its own name and every package above it)."""
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "diffattn", *args], cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT / "code")}, capture_output=True, text=True, timeout=120)
    assert run.returncode == returncode, run.stderr[-2000:]
    names = {line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "diffattn.cli" in names, "importtime printed nothing: the check would pass vacuously"
    return names


def heavy(names: set[str]) -> set[str]:
    return {h for h in HEAVY if any(n == h or n.startswith(h + ".") for n in names)}


@pytest.mark.parametrize("args", [PLAN, PLAN + ["--json"], ["plan", "--preset", "gemma-3-12b", "--context", "8192",
                                                            "--hallucination", "low", "--budget-tokens", "1e9",
                                                            "--mode", "finetune"]])
def test_plan_imports_nothing_heavy(args):
    assert heavy(imported(*args)) == set()


def test_the_check_sees_an_import_of_the_lesson_modules():
    """Control: `course` loads diffattn.experiments before it refuses an unknown lesson."""
    assert heavy(imported("course", "--lessons", "99", returncode=2)) == {"diffattn.experiments"}


def test_the_check_sees_an_import_of_torch():
    """Control: `convert` imports torch before it finds no checkpoint."""
    pytest.importorskip("torch")
    assert "torch" in heavy(imported("convert", "no-such-checkpoint", returncode=2))
