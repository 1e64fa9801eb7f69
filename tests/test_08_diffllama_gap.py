"""Lesson 08, dev-only: scripts/diffllama_gap.py (HF DiffLlama vs HF Llama at cpu-small) runs and writes its JSON.

Skipped wherever transformers is not installed: it is a developer's cross-check, never a dependency of diffattn.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.torch
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "diffllama_gap.py"


def load_script():
    spec = importlib.util.spec_from_file_location("diffllama_gap", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_steps_one_seed_write_finite_losses(tmp_path: Path):
    out = tmp_path / "diffllama.json"
    assert load_script().main(["--seeds", "1", "--steps", "2", "--eval-sequences", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    for key in ("transformers", "torch", "config", "mismatches", "seeds", "runs", "gap", "machine", "wall_s"):
        assert key in result, key
    assert result["seeds"] == [0] and len(result["runs"]) == 1
    run = result["runs"][0]
    for kind in ("llama", "diffllama"):
        assert math.isfinite(run[kind]["final_val_loss"]), kind
        assert run[kind]["curve"]["step"] == [1, 2]
        assert all(math.isfinite(v) for v in run[kind]["curve"]["val_loss"])
    assert run["diffllama"]["lambda"] is not None and len(run["diffllama"]["lambda"]) == 4
    assert run["gap"] == pytest.approx(run["diffllama"]["final_val_loss"] - run["llama"]["final_val_loss"])
    assert result["gap"]["n"] == 1 and result["gap"]["ci95"] is None
    assert result["config"]["train"]["steps"] == 2 and result["config"]["validation_sequences"] == 2
