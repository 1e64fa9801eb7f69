"""`diffattn convert SRC --to diff_v2|diff_v1|hf [--out DIR]`, `convert HF_DIR --from-hf [--out DIR]` (lesson 13). Argument parsing only: torch is imported when a command runs,
so `--help` stays fast.

convert reads a trained baseline checkpoint (a training folder or a weights-only copy, diffattn.training.checkpoint), writes
the converted model as a weights-only copy (model.safetensors + config.json) and prints how far its logits land from
the original's on the checkpoint's own validation data. Bad input (a checkpoint that is not a baseline, a missing or
unreadable one, an unknown target, an output folder that already holds a model) is one `error:` line and exit code 2,
and nothing is written.

`--to hf` writes a baseline as transformers' LlamaForCausalLM and a DIFF V1 as DiffLlamaForCausalLM (save_pretrained);
`--from-hf` reads such a folder back as a course checkpoint, e.g. a Llama to `convert` next (diffattn.training.warmstart.hf).
Both need transformers, a dev-only extra: without it they stop with one line saying `pip install -e '.[hf]'`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from diffattn.core.errors import require
from diffattn.training.warmstart import CALIBRATION_SEED, CHECK_SEQUENCES, TARGETS

NAME = "convert"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help="turn a trained baseline checkpoint into DIFF V2 (same logits) or V1, "
                                       "or to and from transformers (--to hf, --from-hf) (lesson 13)")
    p.add_argument("src", type=Path, help="a baseline checkpoint folder (checkpoint.pt or model.safetensors; a V1 too "
                                          "with --to hf), or a transformers model folder with --from-hf")
    p.add_argument("--to", default=None, help=f"the target: {' or '.join(TARGETS)} (default: diff_v2), or hf: a "
                                             f"baseline as transformers' LlamaForCausalLM, a V1 as DiffLlamaForCausalLM")
    p.add_argument("--from-hf", action="store_true", help="SRC is a transformers Llama or DiffLlama folder: write "
                                                         "it as a course baseline or V1 checkpoint (then convert that)")
    p.add_argument("--out", type=Path, default=None, help="where to write it (default: SRC-to-TARGET beside SRC)")
    return p


def beside(src: Path, suffix: str) -> Path:
    """The default --out: SRC's name and `suffix`, in SRC's folder; SRC '.' or '..' names no folder to put it beside."""
    require(src.name not in ("", ".."), f"convert {str(src)!r}: give --out (the default is beside SRC, named after it)")
    return src.with_name(src.name + suffix)


def run(args: argparse.Namespace) -> int:
    if args.from_hf or args.to == "hf":
        return hf_main(args)
    args.to = args.to or TARGETS[0]
    require(args.to in TARGETS, f"--to must be one of {', '.join(TARGETS)} or hf (got {args.to!r})")
    out = args.out or beside(args.src, f"-to-{args.to}")
    require(not (out / "model.safetensors").exists() and not (out / "checkpoint.pt").exists(),
            f"{out} already holds a model: choose another --out or remove it")
    import torch

    from diffattn.training.checkpoint import load_model, save_weights
    from diffattn.data import make_task
    from diffattn.training.warmstart.convert import check_source, convert, step0_gap

    model, config = load_model(args.src)
    check_source(model)
    task, seq_len = config["task"], config["train"]["seq_len"]
    data = make_task(task["name"], seq_len, task["data"], task["options"])
    calibration, _ = data.batch(CHECK_SEQUENCES, seq_len, torch.Generator().manual_seed(CALIBRATION_SEED))
    converted = convert(model, args.to, calibration)
    x, y = data.validation(CHECK_SEQUENCES, seq_len)
    gap = step0_gap(model, converted, x, y)
    record = {**config, "model": {**config["model"], "attention": args.to},
              "train": {**config["train"], "variant": args.to},
              "converted_from": {"path": str(args.src), "step0": gap}}
    save_weights(out, converted, record)
    print(f"{args.to} in {out}: largest |logit change| {gap['max_abs_logit_gap']:.3g} on {CHECK_SEQUENCES} validation "
          f"sequences (largest |logit| {gap['max_abs_logit']:.3g}); loss {gap['loss_before']:.4f} → {gap['loss_after']:.4f}")
    return 0


def hf_main(args: argparse.Namespace) -> int:
    """`--to hf` (export) or `--from-hf` (import): diffattn.training.warmstart.hf, which checks the logits of what it wrote."""
    require(not (args.from_hf and args.to), "--from-hf imports only: convert the checkpoint it writes afterwards")
    out = args.out or beside(args.src, f"-{'from' if args.from_hf else 'to'}-hf")
    from diffattn.training.warmstart import hf

    if args.from_hf:
        found = hf.import_folder(args.src, out)
        made = f"course {found['attention']} checkpoint"
    else:
        found = hf.export_folder(args.src, out)
        made = f"transformers {found['class']}"
    print(f"{made} in {out}: largest |logit gap| {found['max_abs_logit_gap']:.3g} to the original on "
          f"{hf.CHECK_SEQUENCES} random sequences (largest |logit| {found['max_abs_logit']:.3g})")
    return 0


