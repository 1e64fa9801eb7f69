"""`diffattn models verify|retrain|band`: the trained checkpoints lessons 09-11 ship with (diffattn.training.shipped)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from diffattn.cli.options import require_torch
from diffattn.core.errors import ConfigError, require

NAME = "models"


def add_parser(sub) -> argparse.ArgumentParser:
    models = sub.add_parser(NAME, help="the trained checkpoints lessons 09-11 ship with: verify, retrain, band",
                            description="verify: check the shipped checkpoints (outputs/models/) against their "
                                        "MANIFEST.json. retrain: train them again here and print how far each final "
                                        "loss lands from the shipped one (--replace ships the new weights). band: "
                                        "retrain under every CPU kernel path and 1 and 2 threads, write band.json.")
    models.add_argument("action", choices=["verify", "retrain", "band"])
    models.add_argument("--threads", type=int, default=1, help="retrain: torch threads (default: %(default)s, as shipped)")
    models.add_argument("--out", type=Path, default=None, help="retrain: folder for the retrained runs "
                                                                "(default: runs/models-retrained/latest)")
    models.add_argument("--replace", action="store_true", help="retrain: make the retrained weights the shipped ones")
    models.add_argument("--json", action="store_true", help="retrain: print the comparison as JSON")
    return models


def run(args: argparse.Namespace) -> int:
    require_torch(NAME)
    from diffattn import lessons

    if lessons.missing_requirements("09"):  # the shipped checkpoints are safetensors files
        raise ConfigError("models needs safetensors: run `make course` (installs it)")
    from diffattn.training import shipped

    if args.action == "verify":
        manifest = shipped.read_manifest()
        for preset, task, variant in shipped.entries():
            shipped.verify(shipped.root() / preset / task / variant, manifest)
        m = manifest["machine"]
        print(f"{len(shipped.entries())} shipped checkpoints match {shipped.root() / shipped.MANIFEST} (made by "
              f"`{manifest['command']}` on {m['cpu']}, {m['kernel_path']}, torch {m['torch']}, {m['date']})")
        if (shipped.recall_root() / shipped.MANIFEST).is_file():
            recall = shipped.recall_checkpoints()
            print(f"{len(recall)} recall checkpoints match {shipped.recall_root() / shipped.MANIFEST}")
        return 0
    if args.action == "band":
        result = shipped.band()
        print("\n".join(f"  {k:<26} widest |retrained − shipped| {v:.2e}" for k, v in result["max_abs_delta"].items()))
        return 0
    require(args.threads >= 1, f"--threads must be >= 1 (got {args.threads})")
    out = args.out or shipped.retrained_root() / "latest"
    result = shipped.retrain(out, args.threads, progress=not args.json, compare_with_shipped=not args.replace)
    if args.replace:
        shipped.replace(out, shipped.REMAKE)
        print(f"the shipped checkpoints in {shipped.root()} are now the runs in {out}; run `diffattn models band`, "
              f"`make course`, and commit outputs/")
        return 0
    print(json.dumps(result, indent=1) if args.json else shipped.report(result))
    return 1 if any(r.get("within") is False for r in result["rows"].values()) else 0  # a loss outside the band
