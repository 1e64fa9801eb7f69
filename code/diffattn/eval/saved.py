"""The committed results of larger runs, read back (never recomputed) so that lessons 09-11 can report them.

    suite(preset)     outputs/eval/<preset>/: `diffattn eval suite --preset P --seeds S` (make train-small,
                      scripts/gpu_check.sh): summary.json and <variant>/<kind>.json of the seed-0 checkpoints
    lambda_init()     outputs/compare/<preset>-text-lambda-init/summary.json: lesson 11's λ_init ablation
    compare()         outputs/compare/<preset>-text/summary.json: lesson 08's comparison
    study()           outputs/study/summary.json: lessons 08-11's CPU study (`diffattn study`)
    sweep()           outputs/sweep/summary.json: lesson 09's recall sweep (`diffattn sweep`)

Both return {} when the files are not there yet (a fresh clone that has not run `make train-small`), so a lesson
prints what it has.
"""

from __future__ import annotations

import json
from pathlib import Path

from diffattn.core.paths import outputs_dir

SUITE_PRESETS = ("cpu-small", "gpu-small")


def _read(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def suite(preset: str) -> dict:
    """{"summary": summary.json, "variants": {variant: {kind: results}} of the seed-0 checkpoints,
    "seeds": {variant: [seed 1's retrieval, seed 2's, …]}}; {} if absent."""
    root = outputs_dir() / "eval" / preset
    summary = _read(root / "summary.json")
    if not summary:
        return {}
    variants = {variant: {p.stem: _read(p) for p in sorted((root / variant).glob("*.json"))}
                for variant in summary["variants"]}
    seeds = {variant: [_read(root / variant / f"seed{seed}" / "retrieval.json") for seed in range(1, summary["seeds"])]
             for variant in summary["variants"]}
    return {"summary": summary, "variants": variants, "seeds": seeds}


def suites() -> dict:
    """Every preset whose suite results are committed."""
    return {preset: found for preset in SUITE_PRESETS if (found := suite(preset))}


def lambda_init(preset: str = "cpu-small") -> dict:
    return _read(outputs_dir() / "compare" / f"{preset}-text-lambda-init" / "summary.json")


def compare(preset: str) -> dict:
    """Lesson 08's committed comparison on text: outputs/compare/<preset>-text/summary.json."""
    return _read(outputs_dir() / "compare" / f"{preset}-text" / "summary.json")


def study(name: str = "summary.json") -> dict:
    """outputs/study/summary.json, or another file of the study's folder (diffllama.json: scripts/diffllama_gap.py)."""
    return _read(outputs_dir() / "study" / name)


def sweep() -> dict:
    """outputs/sweep/summary.json: lesson 09's recall sweep (diffattn.eval.sweep), {} before it has run."""
    return _read(outputs_dir() / "sweep" / "summary.json")


def machine_line(machine: dict) -> str:
    """Where a committed result was measured, in one line."""
    return (f"{machine['cpu']}, {machine['torch_threads']} thread(s), torch {machine['torch']}, {machine['date']}"
            + (f", {machine['gpu']}" if "gpu" in machine else "") + (f"; {machine['note']}" if "note" in machine else ""))
