"""Lesson 08: the checkpoint format that the trainer writes and lessons 09–11 read.

A checkpoint is a directory:

    DIR/checkpoint.pt    torch.save of {"model": state_dict, "optimizer": …, "scheduler": …, "step": int,
                                        "rng": {"torch": …, "data": …, "cuda": …}, "config": CONFIG}
    DIR/config.json      CONFIG again, readable: {"model": GPTConfig fields, "train": TrainConfig fields, "task": …}
    DIR/metrics.jsonl    one JSON object per logged step (written by diffattn.train, read by anyone)

A weights-only copy (what ships with the course, diffattn.shipped) keeps config.json and metrics.jsonl and replaces
checkpoint.pt by

    DIR/model.safetensors  the model's tensors in the safetensors format (no pickle, nothing but named arrays); a tied
                           output head is stored once, as the embedding, and tied again on load

`load_model` reads either kind.

Every file is written to a temporary name in DIR and renamed over the old one (`os.replace` is atomic on one file
system), so a run killed mid-save leaves the previous checkpoint whole. Loading fails with a one-line ConfigError
naming the problem (missing, truncated, corrupt, unknown variant) instead of a pickle traceback.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch

from diffattn.config import GPTConfig
from diffattn.errors import ConfigError, require
from diffattn.model import GPT
from diffattn.names import ATTENTION
from diffattn.results import read_json

CHECKPOINT_FILE = "checkpoint.pt"
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
KEYS = ("model", "optimizer", "scheduler", "step", "rng", "config")


def _write_atomic(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Write `path` through `write(file)` into a temporary sibling, then rename it over `path`."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(directory: str | Path, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    scheduler: Any, step: int, rng: dict[str, Any], config: dict[str, Any]) -> Path:
    """Write DIR/checkpoint.pt and DIR/config.json atomically; `model` is the bare GPT (not a DDP or compiled
    wrapper), `config` is JSON-serialisable. Returns the directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
             "step": step, "rng": rng, "config": config}
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
    _write_atomic(directory / WEIGHTS_FILE, lambda f: f.write(save(tensors)))
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
    try:
        tensors = load(path.read_bytes())
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
