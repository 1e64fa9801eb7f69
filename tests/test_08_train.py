"""Lesson 08: the trainer, its checkpoints and its command line.

Runs use the cpu-tiny model with a few steps of small batches (seconds each). Resume and the 2-process run are
compared with the uninterrupted / 1-process run on every logged number except wall-clock ones.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from diffattn import cli
from diffattn.training import checkpoint  # noqa: E402
from diffattn.config import PRESETS, Preset, TrainConfig, build_configs, matched  # noqa: E402
from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.model.gpt import GPT  # noqa: E402
from diffattn.training.runs import ensure_checkpoints  # noqa: E402
from diffattn.training.loop import parameter_groups, train  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]
QUICK = ["--preset", "cpu-tiny", "--batch-size", "4", "--seq-len", "32", "--eval-every", "4", "--no-progress"]
TIMING = ("time_s", "tokens_per_s")


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "code"), "OMP_NUM_THREADS": "1"}


def cli_run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "diffattn", *args], env=env(), capture_output=True, text=True,
                          timeout=240, **kwargs)


def untimed(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def quick_train(out: Path, variant: str = "diff_v2", **overrides) -> dict:
    options = dict(steps=6, batch_size=4, seq_len=32, eval_every=3, checkpoint_every=3) | overrides
    model, c = build_configs("cpu-tiny", variant, **options)
    return train("cpu-tiny", model, c, out, overwrite=True, progress=False)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """One quick baseline run (the config `test_bad_resume_…` repeats on the command line), copied by each test."""
    out = tmp_path_factory.mktemp("finished") / "run"
    quick_train(out, "baseline")
    return out


def test_no_weight_decay_on_norms_and_lambda():
    for variant in ("diff_v1", "diff_v2"):
        model = GPT(build_configs("cpu-tiny", variant)[0])
        decay, no_decay = parameter_groups(model, 0.1)
        names = {id(p): n for n, p in model.named_parameters()}
        norm_or_lambda = {n for n in names.values() if any(part in n for part in ("lambda", "norm", "subln"))}
        assert not norm_or_lambda & {names[id(p)] for p in decay["params"]}
        assert norm_or_lambda == {names[id(p)] for p in no_decay["params"]}


def test_checkpoint_round_trip_and_metrics(tmp_path):
    last = quick_train(tmp_path / "run", "diff_v1")
    model, config = checkpoint.load_model(tmp_path / "run")
    assert not model.training and config["train"]["variant"] == "diff_v1" and config["task"]["name"] == "text"
    assert json.loads((tmp_path / "run" / "config.json").read_text()) == config
    records = checkpoint.read_metrics(tmp_path / "run")
    assert [r["step"] for r in records] == list(range(1, 7)) and records[-1] == last
    assert len(last["lambda"]) == model.config.n_layer and "val_loss" in records[2]
    assert not list((tmp_path / "run").glob(".*tmp"))  # atomic writes leave no temporary files


def test_gradient_accumulation_gives_the_same_run(tmp_path):
    one = quick_train(tmp_path / "a", "baseline")
    two = quick_train(tmp_path / "b", "baseline", grad_accum=2)
    for r1, r2 in zip(checkpoint.read_metrics(tmp_path / "a"), checkpoint.read_metrics(tmp_path / "b")):
        assert r1["train_loss"] == pytest.approx(r2["train_loss"], rel=1e-5)  # fp32 summation order only
    assert one["val_loss"] == pytest.approx(two["val_loss"], rel=1e-5)


@pytest.mark.parametrize("problem", ["missing", "truncated", "garbage", "unknown variant"])
def test_bad_checkpoints_give_one_line_errors(tmp_path, problem, finished_run):
    out = tmp_path / "run"
    if problem != "missing":
        _existing_run(tmp_path, finished_run).rename(out)
        path = out / checkpoint.CHECKPOINT_FILE
        if problem == "truncated":
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        elif problem == "garbage":
            path.write_bytes(b"not a checkpoint")
        else:
            state = torch.load(path, weights_only=True)
            state["config"]["model"]["attention"] = "diff_v3"
            torch.save(state, path)
    with pytest.raises(ConfigError) as info:
        checkpoint.load_model(out)
    assert "\n" not in str(info.value)


def test_resume_after_a_kill_equals_the_uninterrupted_run(tmp_path):
    args = [*QUICK, "--attention", "diff_v1", "--steps", "24", "--checkpoint-every", "4"]
    whole = cli_run("train", *args, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "diffattn", "train", *args, "--out", str(out)], env=env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if len(checkpoint.read_metrics(out)) >= 10:  # past the checkpoints of steps 4 and 8
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert checkpoint.load_checkpoint(out)["step"] < 24, "the run finished before it could be killed"
    resumed = cli_run("train", *args, "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert untimed(checkpoint.read_metrics(out)) == untimed(checkpoint.read_metrics(tmp_path / "whole"))


def test_two_gloo_processes_match_one_process(tmp_path):
    """torchrun, 2 CPU ranks × 2 sequences vs 1 process × 4 sequences: the same global batch, so the same run up to
    the order of fp32 sums in the gradient all-reduce (1e-5 relative on the losses after 6 steps)."""
    args = [*QUICK, "--attention", "diff_v2", "--steps", "6"]
    single = cli_run("train", *args, "--out", str(tmp_path / "one"))
    assert single.returncode == 0, single.stderr
    double = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                             "-m", "diffattn", "train", *args, "--out", str(tmp_path / "two")],
                            env=env(), capture_output=True, text=True, timeout=240)
    assert double.returncode == 0, double.stderr[-2000:]
    one, two = checkpoint.read_metrics(tmp_path / "one"), checkpoint.read_metrics(tmp_path / "two")
    assert [r["step"] for r in one] == [r["step"] for r in two]
    for r1, r2 in zip(one, two):
        for key in ("train_loss", "val_loss", "grad_norm"):
            if key in r1:
                assert r2[key] == pytest.approx(r1[key], rel=1e-5), key
        if "sigma_lambda" in r1:
            assert r2["sigma_lambda"] == pytest.approx(r1["sigma_lambda"], rel=1e-5)
    checkpoint.load_model(tmp_path / "two")  # rank 0's checkpoint loads in a single process


def test_nan_loss_stops_with_one_line_and_keeps_the_last_checkpoint(tmp_path):
    out = tmp_path / "run"
    result = cli_run("train", *QUICK, "--attention", "baseline", "--steps", "6", "--checkpoint-every", "1",
                     "--lr", "1e30", "--out", str(out))
    assert result.returncode == 2
    assert result.stderr.startswith("error: the training loss became nan at step") and "Traceback" not in result.stderr
    step = checkpoint.load_checkpoint(out)["step"]
    assert 1 <= step < 6 and f"step {step + 1};" in result.stderr


def hear_ctrl_c() -> None:
    """In the child before exec: a suite started in the background of a non-interactive shell inherits an ignored
    SIGINT, and Python then never installs its Ctrl-C handler; a learner's terminal delivers it, so this test does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_saves_a_checkpoint_and_exits_cleanly(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "diffattn", "train", *QUICK, "--attention", "baseline",
                             "--steps", "100000", "--checkpoint-every", "100000", "--out", str(out)],
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=hear_ctrl_c)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(checkpoint.read_metrics(out)) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in stderr and "--resume" in stderr
    assert checkpoint.load_checkpoint(out)["step"] >= 3


def _existing_run(tmp_path: Path, finished: Path) -> Path:
    return Path(shutil.copytree(finished, tmp_path / "existing"))


BAD = {
    "unknown preset": (["--preset", "cpu-huge", "--attention", "baseline"], "invalid choice: 'cpu-huge'"),
    "unknown variant": (["--preset", "cpu-tiny", "--attention", "diff_v3"], "variant must be one of"),
    "unknown task": (["--preset", "cpu-tiny", "--attention", "baseline", "--task", "poems"], "task must be one of"),
    "context too long": (["--preset", "cpu-tiny", "--attention", "baseline", "--seq-len", "4096"],
                         "longer than the model supports"),
    "batch 0": (["--preset", "cpu-tiny", "--attention", "baseline", "--batch-size", "0"], "batch-size must be > 0"),
    "accumulation 0": (["--preset", "cpu-tiny", "--attention", "baseline", "--grad-accum", "0"],
                       "grad-accum must be > 0"),
    "batch not divisible": (["--preset", "cpu-tiny", "--attention", "baseline", "--grad-accum", "3"],
                            "must be a multiple of"),
    # retrieval options that leave the null undefined, and a budget that never leaves warmup
    "more queries than records": (["--preset", "cpu-tiny", "--attention", "baseline", "--task", "needles",
                                   "--task-option", "n_needles=2", "--task-option", "n_queries=3"],
                                  "n_queries <= n_needles"),
    "values longer than the context": (["--preset", "cpu-tiny", "--attention", "baseline", "--task", "needles",
                                        "--task-option", "value_len=200"], "too short"),
    "values that fit one needle, not six": (["--preset", "cpu-tiny", "--attention", "baseline", "--task", "needles",
                                             "--task-option", "value_len=20"], "largest needles layout"),
    "rebind asks an unbound key": (["--preset", "cpu-tiny", "--attention", "baseline", "--task", "rebind",
                                    "--task-option", "n_rebinds=1", "--task-option", "n_queries=2"],
                                   "n_queries <= n_rebinds"),
    "an option the task lacks": (["--preset", "cpu-tiny", "--attention", "baseline", "--task", "rebind",
                                  "--task-option", "n_needles=4"], "n_needles"),
    "malformed task option": (["--preset", "cpu-tiny", "--attention", "baseline", "--task", "rebind",
                               "--task-option", "n_keys"], "KEY=INTEGER"),
    "steps within warmup": (["--preset", "cpu-tiny", "--attention", "baseline", "--task", "rebind", "--steps", "10",
                             "--warmup-steps", "10"], "must exceed warmup-steps"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_options_give_one_line_errors(case, tmp_path, capsys, finished_run):
    args, message = BAD[case]
    out = _existing_run(tmp_path, finished_run)
    before = (out / checkpoint.CHECKPOINT_FILE).read_bytes()
    assert cli.main(["train", *args, "--out", str(out), "--resume", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert (out / checkpoint.CHECKPOINT_FILE).read_bytes() == before


def _data(tmp_path: Path, kind: str) -> Path:
    if kind == "missing":
        return tmp_path / "nowhere.txt"
    if kind == "empty":
        (tmp_path / "empty.txt").write_text("")
        return tmp_path / "empty.txt"
    if kind == "folder without text":
        (tmp_path / "folder").mkdir()
        (tmp_path / "folder" / "image.png").write_bytes(b"\x89PNG")
        return tmp_path / "folder"
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 ".encode("latin-1") * 100)
    return tmp_path / "latin1.txt"


def test_a_retrieval_run_logs_its_learning_curve_query_by_query(tmp_path):
    """Every evaluation of a retrieval run records the accuracy and which validation queries were answered, in the
    order of the task's validation examples: what the study tests against the null models."""
    from diffattn.data import make_task

    model, c = build_configs("cpu-tiny", "baseline", task="rebind", steps=4, batch_size=4, seq_len=48, eval_every=2,
                             eval_sequences=6, warmup_steps=1, checkpoint_every=4)
    train("cpu-tiny", model, c, tmp_path / "run", progress=False)
    evals = [r for r in checkpoint.read_metrics(tmp_path / "run") if "val_loss" in r]
    items = make_task("rebind", 48).validation_examples(6, 48)
    assert [r["step"] for r in evals] == [1, 2, 4]
    for r in evals:
        assert len(r["val_answered"]) == sum(len(e.queries) for e in items) and set(r["val_answered"]) <= {"0", "1"}
        assert r["val_accuracy"] == r["val_answered"].count("1") / len(r["val_answered"])


@pytest.mark.parametrize("kind, message", [("missing", "does not exist"), ("empty", "is empty"),
                                           ("folder without text", "no text files"), ("not utf-8", "not UTF-8")])
def test_bad_data_gives_one_line_errors(kind, message, tmp_path, capsys, finished_run):
    out = _existing_run(tmp_path, finished_run)
    before = (out / checkpoint.CHECKPOINT_FILE).read_bytes()
    code = cli.main(["train", "--preset", "cpu-tiny", "--attention", "baseline", "--data", str(_data(tmp_path, kind)),
                     "--out", str(out), "--overwrite", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --data") and err.count("\n") == 1 and message in err, err
    assert (out / checkpoint.CHECKPOINT_FILE).read_bytes() == before


@pytest.mark.parametrize("problem, message", [("no checkpoint", "no checkpoint in"),
                                              ("truncated", "truncated or corrupt"),
                                              ("other config", "different config"),
                                              ("no --resume", "already holds a checkpoint")])
def test_bad_resume_gives_one_line_errors(problem, message, tmp_path, capsys, finished_run):
    out = tmp_path / "empty-dir" if problem == "no checkpoint" else _existing_run(tmp_path, finished_run)
    args = ["train", "--preset", "cpu-tiny", "--attention", "baseline", "--steps", "6", "--batch-size", "4",
            "--seq-len", "32", "--eval-every", "3", "--checkpoint-every", "3", "--out", str(out), "--no-progress"]
    if problem == "truncated":
        path = out / checkpoint.CHECKPOINT_FILE
        path.write_bytes(path.read_bytes()[:1000])
    if problem == "other config":
        args[args.index("--steps") + 1] = "7"
    if problem != "no --resume":
        args.append("--resume")
    before = {p.name: p.read_bytes() for p in out.glob("*")} if out.exists() else {}
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert ({p.name: p.read_bytes() for p in out.glob("*")} if out.exists() else {}) == before


def test_retrieval_tasks_train_through_the_same_loop(tmp_path):
    last = quick_train(tmp_path / "needles", "diff_v2", task="needles", seq_len=128, warmup_steps=1)
    assert last["val_loss"] > 0
    _, config = checkpoint.load_model(tmp_path / "needles")
    assert config["task"]["name"] == "needles"


def test_ensure_checkpoints_reuses_finished_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("DIFFATTN_ROOT", str(tmp_path))
    monkeypatch.setitem(PRESETS, "cpu-tiny", Preset(
        PRESETS["cpu-tiny"].model, TrainConfig(steps=2, batch_size=4, seq_len=32, eval_every=1, checkpoint_every=2),
        "test"))
    dirs = ensure_checkpoints("cpu-tiny", "text", variants=("baseline", "diff_v2"))
    assert dirs["diff_v2"] == tmp_path / "outputs" / "checkpoints" / "cpu-tiny" / "text" / "diff_v2"
    stamps = {v: (d / checkpoint.CHECKPOINT_FILE).stat().st_mtime_ns for v, d in dirs.items()}
    ensure_checkpoints("cpu-tiny", "text", variants=("baseline", "diff_v2"))
    assert stamps == {v: (d / checkpoint.CHECKPOINT_FILE).stat().st_mtime_ns for v, d in dirs.items()}


def test_sigterm_mid_compare_keeps_finished_variants_and_the_interrupted_run(tmp_path):
    """A time limit (SIGTERM) in the middle of `compare`: the variants already trained are in partial.json, the
    interrupted variant's folder keeps its metrics and last checkpoint, and the command exits 130 without a traceback."""
    out = tmp_path / "compare"
    proc = subprocess.Popen([sys.executable, "-m", "diffattn", "compare", "--preset", "cpu-tiny", "--steps", "60",
                             "--no-progress", "--out", str(out)], env={**env(), "DIFFATTN_ROOT": str(tmp_path)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs = tmp_path / "outputs" / "checkpoints" / "cpu-tiny" / "text"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        second = [p for p in runs.glob(".baseline_2h.*") if len(checkpoint.read_metrics(p)) >= 2]
        if (out / "partial.json").is_file() and second:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in stderr and "partial.json" in stderr, stderr[-2000:]
    partial = json.loads((out / "partial.json").read_text())
    assert partial["finished"] == ["baseline"] and partial["complete"] is False
    assert len(checkpoint.read_metrics(runs / "baseline_2h")) >= 2  # swapped in, not deleted
    assert checkpoint.load_checkpoint(runs / "baseline_2h")["step"] >= 2


def test_a_compile_failure_costs_only_its_variant(tmp_path, monkeypatch):
    """One torch.compile/Inductor failure used to kill every variant of `compare`. Here the compile backend raises
    for the first model it meets (baseline): that variant is listed as failed with its one-line error, the other three
    train and are tabulated, and the command exits 1."""
    monkeypatch.setenv("DIFFATTN_ROOT", str(tmp_path))
    compiled, real_compile = [], torch.compile

    def backend(graph, example_inputs):
        compiled.append(graph)
        if len(compiled) == 1:
            raise RuntimeError("Inductor could not compile\n(pages of generated code)")
        return graph.forward

    monkeypatch.setattr(torch, "compile", lambda model, **_: real_compile(model, backend=backend))
    out = tmp_path / "compare"
    assert cli.main(["compare", "--preset", "cpu-tiny", "--steps", "2", "--compile", "--no-progress",
                     "--out", str(out)]) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["failed"]) == ["baseline"] and "Inductor could not compile" in summary["failed"]["baseline"]
    assert "pages" not in summary["failed"]["baseline"]
    assert set(summary["variants"]) == {"baseline_2h", "diff_v1", "diff_v2"}
    assert summary["settings"] == {"compile": True}
    assert "failed: " in (out / "table.txt").read_text() and not (out / "partial.json").exists()


def test_a_diverging_variant_costs_only_itself(tmp_path, monkeypatch):
    """TrainingDiverged is a ConfigError (one line at the command line), but a NaN in one variant's run says nothing
    about the next: compare lists it as failed and trains the others."""
    from diffattn.training import compare as compare_module
    from diffattn.training.loop import TrainingDiverged

    monkeypatch.setenv("DIFFATTN_ROOT", str(tmp_path))
    real = compare_module.train_seeds

    def diverging_v1(m, variant, *args, **kwargs):
        if variant == "diff_v1":
            raise TrainingDiverged("the training loss became nan at step 3; stopped (no checkpoint)")
        return real(m, variant, *args, **kwargs)

    monkeypatch.setattr(compare_module, "train_seeds", diverging_v1)
    results = compare_module.compare(matched("cpu-tiny", steps=2), progress=False, variants=("baseline", "diff_v1", "diff_v2"))
    assert list(results["variants"]) == ["baseline", "diff_v2"]
    assert results["failed"] == {"diff_v1": "TrainingDiverged: the training loss became nan at step 3; stopped "
                                            "(no checkpoint)"}
