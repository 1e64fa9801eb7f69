"""Command-line failures the fuzz test (tests/test_cli_fuzz.py) and its review found, one test each: sizes with no
upper bound, output paths of the wrong kind, a negative value argparse took for an option, a default output path that
cannot be named. Each runs `diffattn` in a subprocess with a memory and a time limit, in a scratch folder
that is also $DIFFATTN_ROOT, and checks the contract: one `error:` line, exit 2, nothing written."""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from diffattn.cli import options as train_options
from diffattn.cli import build_parser
from diffattn.core.errors import ConfigError
from diffattn.pure import trials
from diffattn.core.results import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
MEMORY_LIMIT = 4 << 30
PLAN = ["plan", "--preset", "llama-3.1-8b", "--context", "8192", "--hallucination", "high", "--budget-tokens", "1B",
        "--mode", "uptrain"]


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def diffattn(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "code"), "DIFFATTN_ROOT": str(folder)}
    return subprocess.run([sys.executable, "-m", "diffattn", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120, preexec_fn=limited)


def tree(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def assert_one_error_line(run: subprocess.CompletedProcess, *fragments: str) -> str:
    assert run.returncode == 2, (run.returncode, run.stdout[-500:], run.stderr[-2000:])
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------------------------------------- bounds


def test_snr_with_a_huge_n_stops_at_once_naming_the_limit_and_why(tmp_path):
    """It printed nothing and grew until memory ran out."""
    line = assert_one_error_line(diffattn(tmp_path, "snr", "--n", "100000000000"), "--n must be at most 1,048,576",
                                 "0.75 KB per token")
    assert "got '100000000000'" in line


def test_snr_bounds_hold_for_library_callers_too():
    with pytest.raises(ConfigError, match="1,048,576"):
        trials.try_setting(n=trials.MAX_N + 1, trials=1)
    with pytest.raises(ConfigError, match="--n × --trials must be <= 33,554,432"):
        trials.try_setting(n=2**16, trials=2**10)


def test_accounting_with_a_huge_context_is_one_line(tmp_path):
    """An OverflowError traceback (integer division too large for a float) in the table's formatting."""
    run = diffattn(tmp_path, "accounting", "--hidden", "4096", "--heads", "32", "--head-dim", "128", "--layers", "32",
                   "--context", "1" + "0" * 300)
    assert_one_error_line(run, "--context must be at most 1,099,511,627,776")


def test_a_number_too_long_to_convert_is_too_large_not_invalid(tmp_path):
    line = assert_one_error_line(diffattn(tmp_path, "snr", "--n", "9" * 5000), "--n must be at most")
    assert "(5,000 characters)" in line and len(line) < 400


def number_options():
    """(subcommand, action) for every option of every subcommand that takes a number."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command, subparser in sub.choices.items():
        for action in subparser._actions:
            kind = getattr(action.type, "kind", action.type)
            if kind in (int, float) and action.choices is None:
                yield command, action


def test_every_integer_option_has_a_documented_upper_bound():
    """A new int option needs its line in train_options.LIMITS: its bound is its type and is quoted in --help."""
    unbounded = [f"{command} {action.option_strings[0]}" for command, action in number_options()
                 if getattr(action.type, "kind", action.type) is int and not isinstance(action.type,
                                                                                       train_options.Bounded)]
    assert not unbounded, f"options with no upper bound: {unbounded}"
    for command, action in number_options():
        if isinstance(action.type, train_options.Bounded):
            assert action.type.limit() in action.help, (command, action.option_strings, action.help)
            assert len(action.type.why) > 10, (command, action.option_strings)


@pytest.mark.parametrize("limit", sorted({id(v): v for v in train_options.LIMITS.values()}.values(),
                                         key=lambda b: (b.kind.__name__, b.high, b.why)), ids=lambda b: b.limit())
def test_a_bound_accepts_its_limit_and_rejects_just_past_it(limit):
    assert limit(str(limit.high)) == limit.high
    past = limit.high + 1 if limit.kind is int else limit.high * 1.001
    for text in (str(past), "nan") if limit.kind is float else (str(past),):
        with pytest.raises(argparse.ArgumentTypeError, match=limit.why[:20]):
            limit(text)
    if limit.low is not None:
        with pytest.raises(argparse.ArgumentTypeError):
            limit(str(limit.low - 1))


# -------------------------------------------------------------------------------------------- output paths


def test_plan_out_naming_a_folder_is_one_line_and_leaves_no_temporary_file(tmp_path):
    """It raised IsADirectoryError and left a .DIR.*.tmp beside the folder each time."""
    (tmp_path / "plans").mkdir()
    before = tree(tmp_path)
    assert_one_error_line(diffattn(tmp_path, *PLAN, "--out", "plans"), "--out plans is a folder")
    assert_one_error_line(diffattn(tmp_path, "plan", "--skill", "--out", "plans"), "--out plans is a folder")
    assert tree(tmp_path) == before


def test_an_atomic_write_that_fails_leaves_no_temporary_file(tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(IsADirectoryError):
        write_text_atomic(tmp_path / "taken", "text")
    assert tree(tmp_path) == {"taken"}


def test_plan_out_below_a_file_is_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    assert_one_error_line(diffattn(tmp_path, *PLAN, "--out", "notes.txt/plan.md"), "notes.txt is a file")
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize("args", [["convert", "ckpt", "--out", "taken.txt"],
                                  ["train", "--preset", "cpu-tiny", "--variant", "baseline", "--out", "taken.txt"],
                                  ["compare", "--preset", "cpu-tiny", "--out", "taken.txt"],
                                  ["warmstart", "--out", "taken.txt"]], ids=lambda a: a[0])
def test_an_existing_file_given_where_a_folder_goes_is_one_line(tmp_path, args):
    """convert and train raised FileExistsError tracebacks (after loading the checkpoint / building the model)."""
    (tmp_path / "taken.txt").write_text("mine\n")
    before = tree(tmp_path)
    assert_one_error_line(diffattn(tmp_path, *args), "--out taken.txt is a file; it must name a folder")
    assert tree(tmp_path) == before and (tmp_path / "taken.txt").read_text() == "mine\n"


@pytest.mark.parametrize("src", ["", ".", ".."])
def test_convert_of_a_source_with_no_name_asks_for_out(tmp_path, src):
    """`convert ''` raised ValueError (PosixPath('.') has an empty name) building the default SRC-to-TARGET."""
    assert_one_error_line(diffattn(tmp_path, "convert", src), "give --out")


# ------------------------------------------------------------------------------------------ negative values


def test_a_negative_budget_is_told_what_a_budget_must_be(tmp_path):
    """argparse took '-1T' for an unknown option: "argument --budget-tokens: expected one argument"."""
    args = [a if a != "1B" else "-1T" for a in PLAN]
    assert_one_error_line(diffattn(tmp_path, *args), "--budget-tokens must be a positive whole number", "'-1T'")


def test_negative_numbers_in_exponent_form_are_values(tmp_path):
    """'-1e-3' and '-inf' were unknown options too; V1's λ may be any finite number."""
    run = diffattn(tmp_path, "snr", "--n", "64", "--trials", "2", "--lam", "-1e-3", "--json")
    assert run.returncode == 0, run.stderr
    assert_one_error_line(diffattn(tmp_path, "snr", "--n", "64", "--lam", "-inf"), "--lam (λ) must be a finite number")
