"""Lesson 13: `diffattn plan` as a user runs it, each command in its own process.

- It answers in under a second because it imports nothing heavy. Read from `python -X importtime`, which lists every
  module a process imported (its stderr), so the check sees what the real command line imports, not what an
  in-process test has already loaded; the controls show it does see an import.
- It runs with every third-party module blocked (the stdlib track's blocker), `plan --skill` too.
- Its numbers are the accounting command's: `plan --json` and the `accounting --json` command the plan itself tells the
  user to run agree on every shared number (the worked figure: the Llama-style 8B GQA(8) V2 delta of +16,908,288
  attention weights per layer).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_13_plan import KERNEL_ROW, plan_args
from tests.test_pure_stdlib_only import BLOCKER

ROOT = Path(__file__).resolve().parents[1]
# what a plan must never pay for: the torch stack, the transformers extra, and the lesson modules (which parse every
# lesson's source to find what each needs)
HEAVY = ("torch", "numpy", "matplotlib", "safetensors", "transformers", "diffattn.lessons")
PLAN = ["plan", "--preset", "llama-3.1-8b", "--context", "32768", "--hallucination", "high", "--budget-tokens", "10B",
        "--mode", "uptrain"]


def diffattn(*args: str, returncode: int = 0, python: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`python [PYTHON OPTIONS] -m diffattn ARGS` in a fresh process, with this checkout's code."""
    run = subprocess.run([sys.executable, *python, "-m", "diffattn", *args], cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT / "code")}, capture_output=True, text=True, timeout=120)
    assert run.returncode == returncode, run.stderr[-2000:]
    return run


def imported(*args: str, returncode: int = 0) -> set[str]:
    """Every module `diffattn ARGS` imported (its own name and every package above it)."""
    run = diffattn(*args, returncode=returncode, python=("-X", "importtime"))
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
    """Control: `course` loads diffattn.lessons before it refuses an unknown lesson."""
    assert heavy(imported("course", "--lessons", "99", returncode=2)) == {"diffattn.lessons"}


def test_the_check_sees_an_import_of_torch():
    """Control: `convert` imports torch before it finds no checkpoint."""
    pytest.importorskip("torch")
    assert "torch" in heavy(imported("convert", "no-such-checkpoint", returncode=2))


def test_plan_json_equals_the_accounting_command_it_prints():
    plan = json.loads(diffattn(*PLAN, "--json").stdout)
    command = next(item["command"] for item in plan["evaluation"] if " accounting " in item["command"])
    argv = shlex.split(command)
    assert argv[0] == "diffattn" and "--context" in argv and "32768" in argv, command
    table = json.loads(diffattn(*argv[1:], "--json").stdout)
    layers = plan["layers"]["variants"]
    assert layers["diff_v2"]["delta"]["baseline"]["attention_params_per_layer"] == 16_908_288
    assert table["params"]["diff_v2"]["attention"] - table["params"]["baseline"]["attention"] == 16_908_288
    for variant, kernel in KERNEL_ROW.items():
        row, params = layers[variant], table["params"][variant]
        assert row["components"] == {name: params[name] for name in row["components"]}, variant
        assert (row["attention_per_layer"], row["model_params"]) == (params["attention"], params["model"]), variant
        assert row["kv_bytes_at_context"] == table["kv_cache"][variant]["bytes_at_context"], variant
        assert row["forward_flops_per_token"]["total"] == table["flops_per_token"][kernel]["total"], variant
        assert plan["decode"]["variants"][variant]["bytes"] == table["decode"][kernel]["step_bytes"], variant


def test_plan_runs_with_every_third_party_module_blocked(tmp_path):
    program = BLOCKER + f"""
import sys
from diffattn import cli
sys.argv = ["diffattn"]
assert cli.main({plan_args(["--preset", "gemma-3-12b"])!r} + ["--out", {str(tmp_path / "p.md")!r}]) == 0
assert cli.main(["plan", "--skill", "--out", {str(tmp_path / "s.md")!r}]) == 0
blocked = [m for m in sys.modules if m.split(".")[0] in ("torch", "numpy", "yaml", "scipy")]
assert not blocked, blocked
"""
    run = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env={"PYTHONPATH": str(ROOT / "code")},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "p.md").read_text().startswith("# Plan: differential attention for gemma-3-12b")
