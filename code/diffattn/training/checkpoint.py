"""Lesson 08: the checkpoint format that the trainer writes and lessons 09–11 read.

A checkpoint is a directory:

    DIR/checkpoint.pt    torch.save of {"model": state_dict, "optimizer": …, "scheduler": …, "step": int,
                                        "rng": {"torch": …, "data": …, "cuda": …}, "config": CONFIG}
    DIR/config.json      CONFIG again, readable: {"model": GPTConfig fields, "train": TrainConfig fields, "task": …}
    DIR/metrics.jsonl    one JSON object per logged step (written by diffattn.training.loop, read by anyone)

A weights-only copy (what ships with the course, diffattn.training.shipped) keeps config.json and metrics.jsonl and replaces
checkpoint.pt by

    DIR/model.safetensors  the model's tensors in the safetensors format (no pickle, nothing but named arrays); a tied
                           output head is stored once, as the embedding, and tied again on load

`load_model` reads either kind, and checks what each records of itself:

    checkpoint.pt          its "sha256" entry: the digest of everything else in it (every tensor's dtype, shape and
                           bytes, every other value), computed before it was saved
    DIR/SHA256SUMS         beside model.safetensors: lines of `<64 hex digits>  <file name>`, the file's own sha256
                           (the format `sha256sum -c SHA256SUMS` checks)

A file that changed after it was written (a byte flipped on disk, a bad copy) is then a one-line ConfigError naming
it, instead of a model that loads and predicts garbage. A checkpoint written before these records existed (no
"sha256" entry; no SHA256SUMS, or its file not listed) loads unchecked; the ones that ship with the course are
checked against outputs/models/MANIFEST.json instead (diffattn.training.shipped).

Every file is written to a temporary name in DIR and renamed over the old one (`os.replace` is atomic on one file
system), so a run killed mid-save leaves the previous checkpoint whole. SHA256SUMS is rewritten around the weights'
rename (the new digest added before it, the old one dropped after it), so that at every instant model.safetensors
matches a digest recorded for it. Loading fails with a one-line ConfigError naming the problem (missing, truncated,
corrupt, altered, unknown variant) instead of a pickle traceback.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch

from diffattn.config import GPTConfig
from diffattn.core.errors import ConfigError, require
from diffattn.model.gpt import GPT
from diffattn.pure.variants import ATTENTION
from diffattn.core.results import read_json

CHECKPOINT_FILE = "checkpoint.pt"
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
SUMS_FILE = "SHA256SUMS"
KEYS = ("model", "optimizer", "scheduler", "step", "rng", "config")
DIGEST = "sha256"  # checkpoint.pt's entry for the digest of the others (state_sha256)
SUM_LINE = re.compile(r"^([0-9a-f]{64}) [ *](\S.*)$")


def _write_temp(path: Path, write: Callable[[Any], None], mode: str = "wb") -> Path:
    """`write(file)` into a new temporary sibling of `path`, flushed to disk; returns its path."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def _write_atomic(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Write `path` through `write(file)` into a temporary sibling, then rename it over `path`."""
    tmp = _write_temp(path, write, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def state_sha256(state: dict[str, Any]) -> str:
    """The sha256 of a checkpoint's contents, its own DIGEST entry left out: every tensor's dtype, shape and bytes and
    every other value's type and repr, dict keys in a fixed order. The same before torch.save and after torch.load
    (weights_only keeps tuples, ints and floats as they were)."""
    digest = hashlib.sha256()

    def walk(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            flat = value.detach().cpu().contiguous().reshape(-1)
            digest.update(f"tensor {flat.dtype} {tuple(value.shape)}\n".encode())
            digest.update(flat.view(torch.uint8).numpy())  # the bytes in place: no copy
        elif isinstance(value, dict):
            digest.update(f"dict {len(value)}\n".encode())
            for key in sorted(value, key=repr):
                digest.update(f"{key!r}\n".encode())
                walk(value[key])
        elif isinstance(value, (list, tuple)):
            digest.update(f"{type(value).__name__} {len(value)}\n".encode())
            for item in value:
                walk(item)
        else:
            digest.update(f"{type(value).__name__} {value!r}\n".encode())

    walk({k: v for k, v in state.items() if k != DIGEST})
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_sums(directory: Path) -> dict[str, list[str]]:
    """{file name: its recorded sha256 digests} of DIR/SHA256SUMS ({} when there is none); one-line ConfigError for a
    file that is not a list of sums. A name has two digests only while its file is being replaced."""
    path = directory / SUMS_FILE
    if not path.is_file():
        return {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path} ({type(exc).__name__})") from None
    sums: dict[str, list[str]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        match = SUM_LINE.match(line)
        require(match is not None, f"{path}, line {number}, is not `<64 hex digits>  <file name>`: remove {path} to "
                                   f"load the checkpoint unchecked")
        sums.setdefault(match.group(2), []).append(match.group(1))
    return sums


def _write_sums(directory: Path, sums: dict[str, list[str]]) -> None:
    text = "".join(f"{digest}  {name}\n" for name in sorted(sums) for digest in sums[name])
    _write_atomic(directory / SUMS_FILE, lambda f: f.write(text), mode="w")


def _write_weights(path: Path, data: bytes) -> None:
    """Write a weights file atomically (as _write_atomic) and record its sha256 in SHA256SUMS, so that at every
    instant the file on disk matches a recorded digest: the new one is added before the rename, the old one
    dropped after it. A run killed between the steps leaves a checkpoint that loads, old or new."""
    new = hashlib.sha256(data).hexdigest()
    tmp = _write_temp(path, lambda f: f.write(data))
    try:
        try:
            sums = read_sums(path.parent)
        except ConfigError:  # an unreadable record is replaced by a good one
            sums = {}
        # the file being replaced: its recorded digest, or (written before sums existed) its own
        before = sums.get(path.name) or ([file_sha256(path)] if path.is_file() else [])
        _write_sums(path.parent, {**sums, path.name: [*before, new]})
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _write_sums(path.parent, {**sums, path.name: [new]})


def verify_sum(path: Path, data: bytes) -> None:
    """ConfigError (one line, naming the file) unless `data`, the bytes read from `path`, match a digest SHA256SUMS
    records for it; nothing to check when none is recorded (a checkpoint from before sums existed)."""
    recorded = read_sums(path.parent).get(path.name)
    require(not recorded or hashlib.sha256(data).hexdigest() in recorded, f"{path} does not match its sha256 in {path.parent / SUMS_FILE}: the file changed "
                                f"after it was written (a bad copy, or damage on disk); retrain it or copy it again")


def save_checkpoint(directory: str | Path, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    scheduler: Any, step: int, rng: dict[str, Any], config: dict[str, Any]) -> Path:
    """Write DIR/checkpoint.pt and DIR/config.json atomically; `model` is the bare GPT (not a DDP or compiled
    wrapper), `config` is JSON-serialisable. Returns the directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
             "step": step, "rng": rng, "config": config}
    state[DIGEST] = state_sha256(state)
    _write_atomic(directory / CHECKPOINT_FILE, lambda f: torch.save(state, f))
    _write_atomic(directory / CONFIG_FILE, lambda f: f.write(json.dumps(config, indent=1) + "\n"), mode="w")
    return directory


def has_checkpoint(directory: str | Path) -> bool:
    return (Path(directory) / CHECKPOINT_FILE).is_file()


def load_checkpoint(directory: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The dict `save_checkpoint` wrote; ConfigError if it is missing, truncated, corrupt or of an unknown variant."""
    path = Path(directory) / CHECKPOINT_FILE
    _require_folder(Path(directory))
    require(path.is_file(), f"no checkpoint in {directory} (expected {CHECKPOINT_FILE})")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # zip, pickle and EOF errors all mean the same thing to the user
        raise ConfigError(f"checkpoint {path} is truncated or corrupt ({type(exc).__name__})") from None
    require(isinstance(state, dict) and all(k in state for k in KEYS),
            f"checkpoint {path} is not a diffattn checkpoint (needs keys {', '.join(KEYS)})")
    model_config = state["config"].get("model", {}) if isinstance(state["config"], dict) else {}
    attention = model_config.get("attention")
    require(attention in ATTENTION, f"checkpoint {path} has an unknown attention variant {attention!r} "
                                    f"(known: {', '.join(ATTENTION)})")
    require(DIGEST not in state or state[DIGEST] == state_sha256(state),  # none: saved before digests were recorded
            f"checkpoint {path} does not match the sha256 it recorded when it was saved: the file changed after it was "
            f"written (a bad copy, or damage on disk); retrain it or copy it again")
    return state


def _require_folder(directory: Path) -> None:
    require(not directory.is_file(), f"{directory} is a file, not a checkpoint folder (one holding {CHECKPOINT_FILE}, "
                                     f"or {WEIGHTS_FILE} with {CONFIG_FILE})")
    require(directory.is_dir(), f"checkpoint directory {directory} does not exist")


def model_config(config: dict[str, Any]) -> GPTConfig:
    """GPTConfig from a checkpoint's config["model"]; ConfigError for fields this version does not know."""
    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    unknown = sorted(set(config["model"]) - fields)
    require(not unknown, f"checkpoint model config has fields this code does not know: {', '.join(unknown)}")
    return GPTConfig(**config["model"])


TIED_HEAD = "lm_head.weight"  # the same tensor as tok_emb.weight when GPTConfig.tie_embeddings


def save_weights(directory: str | Path, model: GPT, config: dict[str, Any]) -> Path:
    """Write DIR/model.safetensors and DIR/config.json atomically: the weights-only copy `load_model` reads."""
    from safetensors.torch import save

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    # safetensors refuses two names for one storage: keep the embedding, drop its tied alias
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()
               if not (k == TIED_HEAD and model.config.tie_embeddings)}
    _write_weights(directory / WEIGHTS_FILE, save(tensors))
    _write_atomic(directory / CONFIG_FILE, lambda f: f.write(json.dumps(config, indent=1) + "\n"), mode="w")
    return directory


def _load_weights(directory: Path, map_location: str | torch.device) -> tuple[dict[str, torch.Tensor], dict]:
    from safetensors import SafetensorError
    from safetensors.torch import load

    path, config_path = directory / WEIGHTS_FILE, directory / CONFIG_FILE
    require(config_path.is_file(), f"no {CONFIG_FILE} beside {path}")
    config = read_json(config_path)
    require(isinstance(config, dict) and isinstance(config.get("model"), dict),
            f"{config_path} is not a checkpoint's config (a JSON object whose \"model\" is an object)")
    data = path.read_bytes()
    verify_sum(path, data)
    try:
        tensors = load(data)
    except (SafetensorError, ValueError) as exc:
        raise ConfigError(f"weights {path} are truncated or corrupt ({type(exc).__name__})") from None
    if config["model"].get("tie_embeddings", True) and "tok_emb.weight" in tensors:
        tensors[TIED_HEAD] = tensors["tok_emb.weight"]
    require(config["model"].get("attention") in ATTENTION,  # load_checkpoint checks the same for checkpoint.pt
            f"weights {path} have an unknown attention variant (known: {', '.join(ATTENTION)})")
    return {k: v.to(map_location) for k, v in tensors.items()}, config


def load_model(directory: str | Path, map_location: str | torch.device = "cpu") -> tuple[GPT, dict[str, Any]]:
    """The trained GPT (eval mode, on `map_location`) and its config dict {"model", "train", "task"}, from a full
    checkpoint (checkpoint.pt) or a weights-only copy (model.safetensors)."""
    directory = Path(directory)
    _require_folder(directory)
    require(has_checkpoint(directory) or (directory / WEIGHTS_FILE).is_file(),
            f"no checkpoint in {directory} (expected {CHECKPOINT_FILE}, or {WEIGHTS_FILE} with {CONFIG_FILE})")
    if (directory / WEIGHTS_FILE).is_file() and not has_checkpoint(directory):
        weights, config = _load_weights(directory, map_location)
    else:
        state = load_checkpoint(directory, map_location)
        weights, config = state["model"], state["config"]
    model = GPT(model_config(config))
    model.load_state_dict(weights)  # GPT.load_state_dict: a wrong variant or shape is a one-line ConfigError
    return model.to(map_location).eval(), config


def read_metrics(directory: str | Path) -> list[dict[str, Any]]:
    """Every record of DIR/metrics.jsonl (empty if there is none)."""
    path = Path(directory) / METRICS_FILE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
