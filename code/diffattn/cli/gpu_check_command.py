"""`diffattn gpu-check [--device cuda|cpu] [--out FILE]`: CUDA backend agreement and the kernel report
(scripts/gpu_check.sh runs it; `--device cpu` is its rehearsal)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from diffattn.cli.options import require_torch
from diffattn.core.errors import ConfigError
from diffattn.core.results import write_json_atomic

NAME = "gpu-check"


def add_parser(sub) -> argparse.ArgumentParser:
    gpu = sub.add_parser(NAME, help="CUDA backend agreement and kernel report (scripts/gpu_check.sh); needs torch")
    gpu.add_argument("--out", type=Path, default=None, help="also write the report as JSON here")
    gpu.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                     help="cpu: the same report on CPU, for gpu_check.sh's rehearsal (default: %(default)s)")
    return gpu


def run(args: argparse.Namespace) -> int:
    torch = require_torch(NAME)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("gpu-check needs a CUDA GPU (none is visible); the CPU checks run in `make test`")
    from diffattn.nn.device import device_report

    report = device_report(args.device)
    print(json.dumps(report, indent=1))
    if args.out:
        write_json_atomic(args.out, report)
    return 0 if report["agreement_ok"] else 1
