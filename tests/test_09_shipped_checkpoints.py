"""The checkpoints lessons 09-11 evaluate ship in outputs/models/ (diffattn.training.shipped): they are verified before use, a
damaged one is a one-line error that names the file and never a silent retrain, the weights-only format loads the
same model the trainer saved, and retraining lands within the band measured across CPU kernel paths."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from diffattn.training import checkpoint
from diffattn.training import shipped  # noqa: E402
from diffattn.config import GPTConfig, build_configs, matched_configs, run_config  # noqa: E402
from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.model.gpt import GPT  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]
SMALL = GPTConfig(vocab_size=40, n_layer=2, d_model=32, n_head=4, n_kv_head=2, max_seq_len=16)


def test_every_shipped_checkpoint_verifies_and_matches_the_trainer_config():
    """The manifest covers every shipped file, and each config is exactly what the trainer would run today: a preset
    edited without remaking the checkpoints fails here."""
    manifest = shipped.read_manifest()
    listed = set(manifest["files"])
    expected = {f"{shipped.name(*e)}/{f}" for e in shipped.entries() for f in shipped.FILES}
    assert listed == expected
    for preset, task, variant in shipped.entries():
        directory = shipped.checkpoints(preset, task, (variant,))[variant]
        model, config = checkpoint.load_model(directory)
        model_config, train_config = build_configs(preset, variant, task=task, seed=shipped.SEED)
        assert config == run_config(preset, model_config, train_config)
        assert model.config == model_config and not model.training
        if model.config.tie_embeddings:
            assert model.lm_head.weight is model.tok_emb.weight
    for key in ("command", "machine", "files"):
        assert manifest[key]
    assert {"cpu", "torch", "kernel_path", "date"} <= set(manifest["machine"])


@pytest.mark.parametrize("variant", sorted(matched_configs(SMALL)))
@pytest.mark.parametrize("tied", [True, False])
def test_weights_only_copy_loads_the_same_model(tmp_path, variant, tied):
    """save_weights + load_model give back every tensor bit for bit and the same logits, tied head or not."""
    torch.manual_seed(0)
    config = matched_configs(GPTConfig(**{**SMALL.__dict__, "tie_embeddings": tied}))[variant]
    model = GPT(config).eval()
    with torch.no_grad():  # move every parameter off its initial value, λ included
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    run = {"model": config.__dict__, "train": {}, "task": {}}
    checkpoint.save_weights(tmp_path, model, run)
    loaded, config_back = checkpoint.load_model(tmp_path)
    assert config_back == json.loads(json.dumps(run))
    assert loaded.state_dict().keys() == model.state_dict().keys()
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    assert (loaded.lm_head.weight is loaded.tok_emb.weight) == tied
    tokens = torch.randint(0, config.vocab_size, (2, 12))
    with torch.no_grad():
        assert torch.equal(loaded(tokens), model(tokens))


def copy_of_shipped(tmp_path: Path) -> Path:
    """A checkout-like root holding only outputs/models, for DIFFATTN_ROOT."""
    (tmp_path / "lessons").mkdir(parents=True)
    shutil.copytree(shipped.root(), tmp_path / "outputs" / "models")
    return tmp_path


def damage(root: Path, how: str) -> Path:
    path = root / "outputs" / "models" / "cpu-tiny" / "needles" / "diff_v1" / checkpoint.WEIGHTS_FILE
    data = path.read_bytes()
    if how == "missing":
        path.unlink()
    elif how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "altered":  # same size, one byte of one weight changed
        path.write_bytes(data[:-5] + bytes([data[-5] ^ 1]) + data[-4:])
    elif how == "manifest":
        (root / "outputs" / "models" / shipped.MANIFEST).unlink()
    return path


@pytest.mark.parametrize("how, words", [("missing", "is missing"), ("truncated", "is truncated"),
                                        ("altered", "does not match its sha256"), ("manifest", "MANIFEST.json is missing")])
def test_damaged_shipped_checkpoint_is_one_line_error_and_no_retrain(tmp_path, monkeypatch, how, words):
    root = copy_of_shipped(tmp_path)
    damage(root, how)
    monkeypatch.setenv("DIFFATTN_ROOT", str(root))
    with pytest.raises(ConfigError, match=words):
        shipped.checkpoints("cpu-tiny", "needles", ("baseline", "diff_v1"))
    env = {**os.environ, "DIFFATTN_ROOT": str(root), "PYTHONPATH": str(ROOT / "code")}
    for command in (["models", "verify"], ["lesson", "11", "--json"]):
        done = subprocess.run([sys.executable, "-m", "diffattn", *command], env=env, capture_output=True, text=True,
                              timeout=120)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert lines[0].startswith("error: ") and words in lines[0]
        assert "diff_v1" in lines[0] or how == "manifest"
        assert shipped.REMAKE in lines[0] or "git checkout" in lines[0]
    assert not (root / "outputs" / "checkpoints").exists()  # nothing was retrained in its place


def test_unknown_shipped_checkpoint_is_refused(monkeypatch):
    with pytest.raises(ConfigError, match="no shipped checkpoints for preset 'cpu-small'"):
        shipped.checkpoints("cpu-small", "needles", ("baseline",))
    with pytest.raises(ConfigError, match="no shipped baseline_2h checkpoint"):
        shipped.checkpoints("cpu-tiny", "needles", ("baseline_2h",))


def test_band_covers_every_kernel_path_and_thread_count():
    """outputs/models/band.json was measured on an AVX-512 CPU over every path it offers, with 1 and 2 threads."""
    band = json.loads((shipped.root() / shipped.BAND).read_text())
    measured = {(r["kernel_path"], r["threads"]) for r in band["runs"]}
    assert measured == {(p, n) for p in ("default", "avx2", "avx512") for n in (1, 2)}
    for run in band["runs"]:
        assert set(run["rows"]) == {shipped.name(*e) for e in shipped.entries()}
        if (run["kernel_path"], run["threads"]) == (shipped.read_manifest()["machine"]["kernel_path"], shipped.THREADS):
            # the shipping path retrains bit for bit, but for DIFF V1: its checkpoints predate its fused CPU kernel,
            # which adds the same terms in another order (lesson 08's notes say so, from `on_shipping_path`)
            assert all(r["delta"] == 0.0 for key, r in run["rows"].items() if not key.endswith("/diff_v1"))
            assert shipped.summary()["on_shipping_path"]["text"]["diff_v1"] == run["rows"]["cpu-tiny/text/diff_v1"]["delta"]
    assert band["max_abs_delta"] == {key: max(abs(r["rows"][key]["delta"]) for r in band["runs"])
                                     for key in band["max_abs_delta"]}


def test_retraining_writes_the_same_files_and_lands_within_the_band(tmp_path):
    """Retrain one shipped run (the needles task's DIFF V1: 12 s) on this machine: the same configuration, the same
    files, and a final loss within BAND_MARGIN × the widest move band.json measured for the task (on the shipping
    path the same bits)."""
    key = "cpu-tiny/needles/diff_v1"
    result = shipped.retrain(tmp_path, only=(key,), progress=False)
    row = result["rows"][key]
    directory = tmp_path / key
    assert {p.name for p in directory.iterdir()} == {checkpoint.CHECKPOINT_FILE, checkpoint.CONFIG_FILE,
                                                     checkpoint.METRICS_FILE}
    assert json.loads((directory / checkpoint.CONFIG_FILE).read_text()) == json.loads(
        (shipped.root() / key / checkpoint.CONFIG_FILE).read_text())
    assert abs(row["delta"]) <= shipped.tolerance(key), shipped.report(result)


def test_replace_ships_new_weights_with_a_manifest_that_verifies(tmp_path, monkeypatch):
    """`models retrain --replace` rewrites the weights and MANIFEST.json; what it writes verifies, and writing the
    same weights again gives the same bytes (the format has no timestamps)."""
    source = tmp_path / "source"
    shutil.copytree(shipped.root(), source)
    root = copy_of_shipped(tmp_path / "checkout")
    monkeypatch.setenv("DIFFATTN_ROOT", str(root))
    shipped.replace(source, "a test")
    manifest = shipped.read_manifest()
    assert manifest["command"] == "a test"
    for preset, task, variant in shipped.entries():
        shipped.verify(shipped.root() / preset / task / variant, manifest)
    original = json.loads((source / shipped.MANIFEST).read_text())["files"]
    assert {k: v["sha256"] for k, v in manifest["files"].items()} == {k: v["sha256"] for k, v in original.items()}


def test_lesson_08_loss_tolerances_cover_the_measured_band():
    """Lesson 08 retrains the `text` runs that ship: the moves its NUMBER_KINDS allow its final losses must be at least
    the spread `models band` measured for the same runs across kernel paths and thread counts."""
    from diffattn.lessons import lesson08_training as lesson
    from diffattn.core.numberkinds import kind_of

    widest = shipped.summary()["widest"]["text"]
    for variant, moved in widest.items():
        kind = kind_of(lesson.NUMBER_KINDS, f"variants.{variant}.runs.0.val_loss")
        assert kind.tolerance(2.5) >= moved, (variant, kind, moved)


def test_retrain_report_gives_a_verdict_per_run():
    """`models retrain` says, run by run, whether the retrained loss is the same bits, within the band or outside it."""
    rows = {"cpu-tiny/text/baseline": {"retrained": 2.0, "shipped": 2.0, "delta": 0.0, "allowed": 1e-3, "within": True},
            "cpu-tiny/text/diff_v1": {"retrained": 2.5, "shipped": 2.0, "delta": 0.5, "allowed": 1e-2, "within": False},
            "cpu-tiny/needles/diff_v2": {"retrained": 2.0001, "shipped": 2.0, "delta": 1e-4, "allowed": 1e-2,
                                         "within": True}}
    text = shipped.report({"kernel_path": "avx2", "threads": 1, "out": "runs/x", "rows": rows})
    assert "same bits" in text and "within" in text and "OUTSIDE the band" in text
    assert "1 of 3 outside the band: cpu-tiny/text/diff_v1" in text and "runs/x" in text


def test_missing_band_is_a_one_line_error(tmp_path, monkeypatch):
    root = copy_of_shipped(tmp_path)
    (root / "outputs" / "models" / shipped.BAND).unlink()
    monkeypatch.setenv("DIFFATTN_ROOT", str(root))
    with pytest.raises(ConfigError, match="band.json is missing: restore it with `git checkout -- outputs/models`"):
        shipped.summary()
