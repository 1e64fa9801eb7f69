"""`diffattn warmstart [--jobs N] [--recall | --lora-lr-check]`: lesson 13's warm-start study
(diffattn.training.warmstart.experiment): baseline trained on, converted to DIFF, or LoRA-only."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from diffattn.core.errors import require

NAME = "warmstart"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    w = sub.add_parser(NAME, help="lesson 13's warm-start study: baseline trained on vs converted to DIFF vs "
                                         "LoRA-only (about 15 min on 2 cores)")
    w.add_argument("--jobs", type=int, default=2, help="runs at a time, one torch thread each (default: %(default)s)")
    w.add_argument("--out", type=Path, default=None, help="folder for summary.json (default: outputs/warmstart)")
    w.add_argument("--lora-lr-check", action="store_true", help="instead, the LoRA arm alone at each declared peak "
                                                               "lr beside the baseline: lora-lr.json in --out")
    w.add_argument("--recall", action="store_true", help="instead, the same arms on lesson 09's recall layout, from "
                                                        "baselines left on its plateau: recall.json in --out")

    return w


def run(args: argparse.Namespace) -> int:
    from diffattn.training.compare import machine
    from diffattn.core.paths import outputs_dir
    from diffattn.core.results import write_json_atomic
    from diffattn.training.warmstart import experiment as study

    require(not (args.recall and args.lora_lr_check), "--recall and --lora-lr-check are two studies: run one")
    out = args.out or outputs_dir() / "warmstart"
    if args.lora_lr_check:
        check = study.lora_sweep(args.jobs)
        check["machine"] = machine() | {"torch_threads": 1, "jobs": args.jobs}
        write_json_atomic(out / "lora-lr.json", check)
        print(json.dumps({lr: {k: row[k] for k in ("loss_minus_step0", "loss_minus_baseline")}
                          for lr, row in check["lora"].items()} | {"baseline": check["baseline"]}, indent=1))
        return 0
    summary = study.run_all(args.jobs, design=study.RECALL_DESIGN if args.recall else study.DESIGN)
    summary["machine"] = machine() | {"torch_threads": 1, "jobs": args.jobs}
    name = "recall" if args.recall else "summary"
    write_json_atomic(out / f"{name}.json", summary)
    study.figure(summary, outputs_dir() / "figures" / ("13-warmstart-recall.png" if args.recall else "13-warmstart.png"))
    print(json.dumps({arm: {k: v for k, v in data.items() if k != "seeds"} for arm, data in summary["arms"].items()},
                     indent=1))
    print(f"wall time {summary['timing']['total_s']:.0f} s")
    return 0
