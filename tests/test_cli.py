"""The command line on bad input: one line `error: <constraint>` on stderr, nothing on stdout, exit code 2, no traceback.

Every case runs `python -m diffattn ...` (what `diffattn` runs) in a subprocess with only PYTHONPATH=code set,
for each stdlib command (accounting, lesson, course, lessons). Library calls must raise ConfigError (a ValueError)
carrying the same message the CLI prints.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from diffattn.core.errors import ConfigError
from diffattn.pure import accounting

ROOT = Path(__file__).resolve().parents[1]
SEVEN_B = ["--hidden", "4096", "--heads", "32", "--head-dim", "128", "--layers", "32"]


def diffattn(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "diffattn", *args], cwd=ROOT, env={"PYTHONPATH": str(ROOT / "code")},
                          capture_output=True, text=True, timeout=60)


def assert_one_line_error(run: subprocess.CompletedProcess, fragment: str) -> str:
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert run.stdout == ""
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("error: ") and fragment in lines[0], lines[0]
    return lines[0].removeprefix("error: ")


# (CLI overrides of the 7B shape, ModelConfig keyword arguments, the constraint the message must name)
BAD_MODELS = [
    (["--hidden", "0"], dict(hidden=0), "hidden must be > 0"),
    (["--heads", "-4"], dict(heads=-4), "heads must be > 0"),
    (["--head-dim", "0"], dict(head_dim=0), "head_dim must be > 0"),
    (["--layers", "0"], dict(layers=0), "layers must be > 0"),
    (["--kv-heads", "0"], dict(kv_heads=0), "kv_heads must be > 0"),
    (["--ffn", "-1"], dict(ffn=-1), "ffn must be > 0"),
    (["--vocab", "0"], dict(vocab=0), "vocab must be > 0"),
    (["--heads", "3"], dict(heads=3), "heads must divide hidden"),
    (["--head-dim", "64"], dict(head_dim=64), "heads × head_dim must equal hidden"),
    (["--kv-heads", "5"], dict(kv_heads=5), "kv_heads must divide heads"),
    (["--kv-heads", "64"], dict(kv_heads=64), "kv_heads must divide heads"),
    (["--hidden", "3968", "--heads", "31"], dict(hidden=3968, heads=31), "DIFF V1 needs an even number of heads"),
    (["--kv-heads", "1"], dict(kv_heads=1), "DIFF V1 needs an even kv_heads"),
]


@pytest.mark.parametrize("cli, kwargs, constraint", BAD_MODELS, ids=[c for _, _, c in BAD_MODELS])
def test_accounting_rejects_bad_models_like_the_library(cli, kwargs, constraint):
    message = assert_one_line_error(diffattn("accounting", *SEVEN_B, *cli), constraint)
    shape = dict(hidden=4096, heads=32, head_dim=128, layers=32) | kwargs
    with pytest.raises(ConfigError) as info:
        accounting.ModelConfig(**shape)
    assert str(info.value) == message


@pytest.mark.parametrize("cli, constraint", [
    (["--context", "0"], "context must be > 0"),
    (["--bytes", "0"], "bytes_per_value must be > 0"),
])
def test_accounting_rejects_bad_table_options(cli, constraint):
    assert_one_line_error(diffattn("accounting", *SEVEN_B, *cli), constraint)


@pytest.mark.parametrize("args, fragment", [
    (["accounting", "--hidden", "abc", "--heads", "32", "--head-dim", "128", "--layers", "32"], "invalid int value: 'abc'"),
    (["accounting", "--heads", "32", "--head-dim", "128", "--layers", "32"], "required: --hidden"),
    (["accounting", *SEVEN_B, "--bogus"], "unrecognized arguments: --bogus"),
    (["lessons", "frobnicate"], "invalid choice: 'frobnicate'"),
    (["teleport"], "invalid choice: 'teleport'"),
    ([], "required: command"),
])
def test_argparse_errors_are_one_line(args, fragment):
    assert_one_line_error(diffattn(*args), fragment)


@pytest.mark.parametrize("args", [["lesson", "99"], ["lesson", "abc"], ["lesson", "99", "--json"], ["course", "--lessons", "99"]])
def test_unknown_lesson_is_an_error(args):
    assert_one_line_error(diffattn(*args), "lesson must be one of 01")


@pytest.mark.parametrize("args, constraint, kwargs", [
    (["--variant", "v2", "--lam", "1.2"], "--lam is DIFF V2's coefficient σ(λ_t) with --variant v2 and must be "
     "strictly between 0 and 1", dict(variant="v2", lam=1.2)),
    (["--variant", "v2", "--lam", "0"], "--lam is DIFF V2's coefficient σ(λ_t) with --variant v2 and must be "
     "strictly between 0 and 1", dict(variant="v2", lam=0.0)),
    (["--lam", "nan"], "--lam (λ) must be a finite number", dict(lam=float("nan"))),
    (["--rho", "1.5"], "--rho (the noise correlation ρ) must be in [-1, 1]", dict(rho=1.5)),
    (["--noise", "-1"], "--noise (the noise std τ) must be a finite number >= 0", dict(noise_std=-1.0)),
    (["--n", "1"], "--n (N) must be >= 2", dict(n=1)),
    (["--trials", "0"], "--trials must be >= 1", dict(trials=0)),
])
def test_snr_rejects_settings_a_variant_does_not_allow(args, constraint, kwargs):
    from diffattn.pure.trials import try_setting

    message = assert_one_line_error(diffattn("snr", "--n", "64", "--trials", "2", *args), constraint)
    with pytest.raises(ConfigError) as info:
        try_setting(**{"n": 64, "trials": 2, **kwargs})
    assert str(info.value) == message


# Inputs a learner may type that used to crash (ZeroDivisionError) or print a meaningless "inf" / "0×": each must
# give one line naming the flag. The float64 cases are detected on the computed rows, not by a guessed bound.
SNR_EDGE_CASES = [
    (["--noise", "400"], dict(noise_std=400.0), "--signal 8 sits", "below the largest noise logit (--noise 400"),
    (["--noise", "1e6"], dict(noise_std=1e6), "--signal 8 sits", "below the largest noise logit (--noise 1e+06"),
    (["--signal=-1000"], dict(mu=-1000.0), "--signal -1000 sits", "below the largest noise logit"),
    (["--signal", "1e308"], dict(mu=1e308), "--signal 1e+308 sits", "above the largest noise logit"),
    (["--signal", "720"], dict(mu=720.0), "--signal 720 sits", "softmax's SNR is infinite"),
    (["--signal=-inf"], dict(mu=-math.inf), "--signal (the signal logit μ) must be a finite number", "(got -inf)"),
    (["--signal", "inf"], dict(mu=math.inf), "--signal (the signal logit μ) must be a finite number", "(got inf)"),
    (["--signal", "nan"], dict(mu=math.nan), "--signal (the signal logit μ) must be a finite number", "(got nan)"),
    (["--noise", "inf"], dict(noise_std=math.inf), "--noise (the noise std τ) must be a finite number >= 0",
     "(got inf)"),
    (["--noise", "nan"], dict(noise_std=math.nan), "--noise (the noise std τ) must be a finite number >= 0",
     "(got nan)"),
    (["--rho", "nan"], dict(rho=math.nan), "--rho (the noise correlation ρ) must be in [-1, 1]", "(got nan)"),
    (["--lam=-inf"], dict(lam=-math.inf), "--lam (λ) must be a finite number", "(got -inf)"),
]


@pytest.mark.parametrize("args, kwargs, start, fragment", SNR_EDGE_CASES, ids=[" ".join(a) for a, *_ in SNR_EDGE_CASES])
def test_snr_rejects_settings_float64_cannot_resolve_naming_the_flag(args, kwargs, start, fragment):
    from diffattn.pure.trials import try_setting

    message = assert_one_line_error(diffattn("snr", "--n", "64", "--trials", "2", *args), fragment)
    assert message.startswith(start), message
    with pytest.raises(ValueError) as info:  # the library raises ConfigError (a ValueError) with the same text
        try_setting(**{"n": 64, "trials": 2, **kwargs})
    assert str(info.value) == message


def test_snr_near_the_float64_edge_still_reports_finite_numbers():
    """Large but resolvable settings are legal: tiny SNRs and huge (negative) ratios are reported as they are."""
    run = diffattn("snr", "--n", "64", "--trials", "2", "--noise", "100", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert 0 < result["softmax"]["snr_median"] < 1e-50 and math.isfinite(result["snr_ratio_median"])


def test_snr_help_names_every_option_and_its_default():
    from diffattn.cli import build_parser

    run = diffattn("snr", "--help")
    assert run.returncode == 0 and run.stderr == ""
    text = " ".join(run.stdout.split())  # argparse wraps lines
    for default in ("(default: 1024)", "(default: 8.0)", "(default: 1.5)", "(default: 0.9)", "(default: 0.8)",
                    "(default: v1)", "(default: 16)"):
        assert default in text, default
    assert "τ, the noise std" in text and "σ = sigmoid" in text  # σ means the sigmoid only; the noise std is τ
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    for action in subparsers.choices["snr"]._actions:
        assert action.help, f"snr option {action.option_strings} has no help text"


def test_snr_v1_accepts_any_finite_lambda_and_reports_both_methods():
    """V1's learned λ is unconstrained: a negative λ or one above 1 is a legal (if unhelpful) setting."""
    for lam in ("-0.5", "1.5"):
        run = diffattn("snr", "--n", "256", "--trials", "2", "--lam", lam, "--json")
        assert run.returncode == 0, run.stderr
        result = json.loads(run.stdout)
        assert {"softmax", "diff", "snr_ratio_median"} <= set(result)
    identical = json.loads(diffattn("snr", "--n", "256", "--trials", "2", "--lam", "0", "--json").stdout)
    assert identical["diff"] == identical["softmax"], "λ = 0 must reduce DIFF to softmax exactly"


def test_accounting_json_happy_path():
    run = diffattn("accounting", *SEVEN_B, "--kv-heads", "8", "--context", "4096", "--json")
    assert run.returncode == 0 and run.stderr == ""
    table = json.loads(run.stdout)
    assert table["params"]["diff_v2"]["attention"] == 58_851_328
    assert table["kv_cache"]["diff_v1"]["bytes_per_token"] == 131_072
    assert table["config"]["ffn"] == 11008


def test_accounting_text_matches_format_table():
    run = diffattn("accounting", *SEVEN_B, "--vocab", "32000")
    assert run.returncode == 0
    config = accounting.ModelConfig(hidden=4096, heads=32, head_dim=128, layers=32, vocab=32000)
    assert run.stdout == accounting.format_table(accounting.accounting_table(config)) + "\n"
