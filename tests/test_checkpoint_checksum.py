"""Checkpoints record a sha256 of their weights and loading checks it (diffattn.training.checkpoint): checkpoint.pt holds the
digest of its own contents, a weights-only copy has SHA256SUMS beside model.safetensors.

A flipped byte in the tensor data of either file still loads, so before digests were recorded `convert` turned a
damaged baseline into a DIFF V2 with exit 0 and a loss of about 204. Now every loader stops with one line naming the
file. Checkpoints without a record (the shipped ones, checked against MANIFEST.json instead; older runs) load as
before, and a save interrupted at any rename leaves a weights-only copy that loads, old or new.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from diffattn import cli
from diffattn.training import checkpoint  # noqa: E402
from diffattn.config import GPTConfig  # noqa: E402
from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.model.gpt import GPT  # noqa: E402

pytestmark = pytest.mark.torch
SHIPPED = Path(__file__).resolve().parents[1] / "outputs" / "models" / "cpu-tiny" / "text" / "baseline"
TINY = {"model": {"n_layer": 1, "d_model": 32, "n_head": 2, "attention": "baseline"}}


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def flip_last_byte(path: Path) -> None:
    """The last byte of a safetensors file is tensor data (the header comes first), so the file still parses."""
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


def tiny_training_checkpoint(directory: Path, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**TINY["model"]))
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    checkpoint.save_checkpoint(directory, model=model, optimizer=optimizer, scheduler=scheduler, step=1, rng={},
                               config=TINY)
    return model


def test_both_kinds_record_a_digest_that_matches_what_they_hold(tmp_path):
    tiny_training_checkpoint(tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [checkpoint.CHECKPOINT_FILE, checkpoint.CONFIG_FILE]
    state = torch.load(tmp_path / "run" / checkpoint.CHECKPOINT_FILE, weights_only=True)
    assert re.fullmatch(r"[0-9a-f]{64}", state[checkpoint.DIGEST]) and state[checkpoint.DIGEST] == checkpoint.state_sha256(state)
    model, config = checkpoint.load_model(tmp_path / "run")
    checkpoint.save_weights(tmp_path / "copy", model, config)
    line = (tmp_path / "copy" / checkpoint.SUMS_FILE).read_text()  # what `sha256sum -c SHA256SUMS` reads
    assert line == f"{checkpoint.file_sha256(tmp_path / 'copy' / checkpoint.WEIGHTS_FILE)}  {checkpoint.WEIGHTS_FILE}\n"
    assert not list(tmp_path.rglob(".*tmp"))  # no temporary file is left behind


def test_the_content_digest_sees_every_tensor_and_value():
    state = {"model": {"w": torch.zeros(3, dtype=torch.bfloat16)}, "optimizer": {"state": {0: {"step": torch.tensor(2.0)}},
             "param_groups": [{"betas": (0.9, 0.95)}]}, "step": 1, "rng": {}, "config": TINY}
    digest = checkpoint.state_sha256(state)
    assert checkpoint.state_sha256({**state, checkpoint.DIGEST: "anything"}) == digest  # its own entry is left out
    changed = [{**state, "step": 2}, {**state, "model": {"w": torch.zeros(3)}},
               {**state, "model": {"w": torch.zeros(1, 3, dtype=torch.bfloat16)}},
               {**state, "model": {"w": torch.tensor([0.0, 0.0, 1e-30], dtype=torch.bfloat16)}},
               {**state, "optimizer": {**state["optimizer"], "param_groups": [{"betas": [0.9, 0.95]}]}}]
    assert len({digest, *map(checkpoint.state_sha256, changed)}) == 1 + len(changed)


def flip_a_weight(path: Path) -> None:
    """One bit of a weight in a checkpoint.pt: the bytes of the largest tensor, found by value (the zip stores it
    as-is), so the file still loads."""
    state = torch.load(path, weights_only=True)
    name, tensor = max(state["model"].items(), key=lambda item: item[1].numel())
    data, raw = bytearray(path.read_bytes()), tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    at = data.find(raw)
    assert at > 0, name
    data[at + len(raw) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("kind", ["weights-only copy", "training checkpoint"])
def test_convert_of_a_flipped_byte_is_one_line_naming_the_file_exit_2(tmp_path, kind):
    model, config = checkpoint.load_model(SHIPPED)
    good, bad = tmp_path / "good", tmp_path / "bad"
    for directory in (good, bad):
        if kind == "weights-only copy":
            checkpoint.save_weights(directory, model, config)
        else:
            optimizer = torch.optim.AdamW(model.parameters())
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
            checkpoint.save_checkpoint(directory, model=model, optimizer=optimizer, scheduler=scheduler, step=1,
                                       rng={}, config=config)
    code, out, err = run_cli("convert", str(good), "--to", "diff_v2", "--out", str(tmp_path / "good-v2"))
    assert code == 0 and err == "", err  # the control: the same checkpoint, undamaged, converts
    damaged = bad / (checkpoint.WEIGHTS_FILE if kind == "weights-only copy" else checkpoint.CHECKPOINT_FILE)
    flip_last_byte(damaged) if kind == "weights-only copy" else flip_a_weight(damaged)
    code, out, err = run_cli("convert", str(bad), "--to", "diff_v2", "--out", str(tmp_path / "bad-v2"))
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: "), err
    assert str(damaged) in err and "sha256" in err, err
    assert not (tmp_path / "bad-v2").exists()


@pytest.mark.parametrize("loader", ["load_model", "load_checkpoint"])
def test_a_flipped_byte_in_a_training_checkpoint_is_one_line_naming_it(tmp_path, loader):
    tiny_training_checkpoint(tmp_path / "run")
    path = tmp_path / "run" / checkpoint.CHECKPOINT_FILE
    flip_a_weight(path)
    with pytest.raises(ConfigError) as info:
        getattr(checkpoint, loader)(tmp_path / "run")
    assert "\n" not in str(info.value) and str(path) in str(info.value) and "sha256" in str(info.value)


def test_checkpoints_without_a_record_load_unchecked(tmp_path):
    """Written before digests were recorded: a checkpoint.pt without its entry; a weights-only copy without
    SHA256SUMS, or with one that does not list it. The shipped ones are of the second kind (MANIFEST.json checks
    them)."""
    want = tiny_training_checkpoint(tmp_path / "run")
    path = tmp_path / "run" / checkpoint.CHECKPOINT_FILE
    state = torch.load(path, weights_only=True)
    del state[checkpoint.DIGEST]
    torch.save(state, path)
    model, config = checkpoint.load_model(tmp_path / "run")
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), want.state_dict().values()))
    checkpoint.save_weights(tmp_path / "copy", model, config)
    (tmp_path / "copy" / checkpoint.SUMS_FILE).unlink()
    checkpoint.load_model(tmp_path / "copy")
    (tmp_path / "copy" / checkpoint.SUMS_FILE).write_text(f"{'0' * 64}  another-file.bin\n")
    checkpoint.load_model(tmp_path / "copy")
    assert not (SHIPPED / checkpoint.SUMS_FILE).exists()
    checkpoint.load_model(SHIPPED)


def test_a_damaged_record_is_one_line_naming_it(tmp_path):
    model = GPT(GPTConfig(**TINY["model"]))
    checkpoint.save_weights(tmp_path / "copy", model, TINY)
    sums = tmp_path / "copy" / checkpoint.SUMS_FILE
    sums.write_text("not a sum\n")
    with pytest.raises(ConfigError) as info:
        checkpoint.load_model(tmp_path / "copy")
    assert "\n" not in str(info.value) and str(sums) in str(info.value)
    checkpoint.save_weights(tmp_path / "copy", model, TINY)  # saving again replaces it with a good record
    checkpoint.load_model(tmp_path / "copy")


@pytest.mark.parametrize("killed_at", [1, 2, 3])
def test_a_save_killed_at_any_rename_leaves_a_copy_that_loads(tmp_path, monkeypatch, killed_at):
    """Saving a weights-only copy over another renames three files in turn: the record with both digests, the
    weights, the record with the new digest only. Stopped before any of them, the folder still loads: the old
    weights before the weights' rename, the new ones after it."""
    torch.manual_seed(0)
    old = GPT(GPTConfig(**TINY["model"]))
    checkpoint.save_weights(tmp_path / "copy", old, TINY)
    torch.manual_seed(1)
    new = GPT(GPTConfig(**TINY["model"]))
    replace, calls = checkpoint.os.replace, []

    def dies(*args):
        calls.append(args)
        if len(calls) == killed_at:
            raise KeyboardInterrupt
        return replace(*args)

    monkeypatch.setattr(checkpoint.os, "replace", dies)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save_weights(tmp_path / "copy", new, TINY)
    monkeypatch.setattr(checkpoint.os, "replace", replace)
    loaded, _ = checkpoint.load_model(tmp_path / "copy")
    expected = old if killed_at <= 2 else new
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), expected.state_dict().values()))
    assert not list((tmp_path / "copy").glob(".*tmp"))
