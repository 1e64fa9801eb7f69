"""`diffattn models verify|retrain|band`: the trained checkpoints lessons 09-11 ship with (diffattn.training.shipped)."""

from __future__ import annotations

import argparse
from pathlib import Path

from diffattn.cli.options import require_torch
from diffattn.core.errors import ConfigError

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

    return shipped.main(args)
