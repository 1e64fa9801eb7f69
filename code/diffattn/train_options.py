"""The options of `python -m diffattn train` and `compare` (lesson 08), kept free of torch so that `--help` and the
stdlib lessons never import it. diffattn.config validates every value and names the allowed ones."""

from __future__ import annotations

import argparse
from pathlib import Path

from diffattn.config import PRESETS
from diffattn.names import TASKS, VARIANTS


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", required=True, choices=list(PRESETS), help=f"one of {', '.join(PRESETS)}")
    parser.add_argument("--variant", "--attention", dest="variant", required=True,
                        help=f"one of {', '.join(VARIANTS)} (--attention is the same flag's older name)")
    parser.add_argument("--task", default=None, help=f"{', '.join(TASKS)} (default: text)")
    parser.add_argument("--data", default=None, help="a UTF-8 text file or folder for the text task "
                                                     "(default: the built-in Shakespeare corpus)")
    parser.add_argument("--task-option", action="append", default=None, metavar="KEY=N",
                        help="a retrieval task's option, repeatable: e.g. --task-option value_len=3 "
                             "(needles: n_needles n_queries key_len value_len; mqar: n_pairs n_queries "
                             "pad=between|end; rebind: n_keys n_rebinds n_queries ask=rebound|all pad=between|end)")
    parser.add_argument("--lambda-init", type=float, default=None,
                        help="diff_v1 only: this constant λ_init in (0, 1) in every layer (default: the depth schedule)")
    parser.add_argument("--out", type=Path, default=None,
                        help="checkpoint directory (default: outputs/checkpoints/<preset>/<task>/<variant>)")
    parser.add_argument("--resume", action="store_true", help="continue the checkpoint in --out")
    parser.add_argument("--overwrite", action="store_true", help="replace a checkpoint already in --out")
    parser.add_argument("--seed", type=int, default=None, help="initial weights and data order (default 0)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the preset's)")
    parser.add_argument("--batch-size", type=int, default=None, help="sequences per optimizer step, all ranks")
    parser.add_argument("--grad-accum", type=int, default=None, help="micro-steps per optimizer step")
    parser.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (≤ the model's max_seq_len)")
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate")
    parser.add_argument("--warmup-steps", type=int, default=None, help="steps of linear warmup")
    parser.add_argument("--eval-every", type=int, default=None, help="steps between validation passes")
    parser.add_argument("--checkpoint-every", type=int, default=None, help="steps between checkpoints")
    parser.add_argument("--device", default=None, help="cpu or cuda (CPU presets stay on CPU unless this says so)")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None, help="torch.compile")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", required=True, choices=list(PRESETS), help=f"one of {', '.join(PRESETS)}")
    parser.add_argument("--task", default="text", help=f"{', '.join(TASKS)} (default: text)")
    parser.add_argument("--seeds", type=int, default=1, help="seeds per variant: 0, 1, … (default 1)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the preset's)")
    parser.add_argument("--out", type=Path, default=None, help="default: outputs/compare/<preset>-<task>/")
    parser.add_argument("--note", default=None, help="a remark stored with the machine, e.g. 'shared with other jobs'")
    parser.add_argument("--lambda-init", default=None, metavar="SETTINGS",
                        help="instead: DIFF V1's λ_init ablation (lesson 11, the paper's Table 6), e.g. "
                             "schedule,0.8,0.5: one run per setting and seed; default --out "
                             "outputs/compare/<preset>-<task>-lambda-init/")
    parser.add_argument("--reuse", action="store_true",
                        help="keep a run whose folder already holds it finished (same config) instead of retraining")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: the preset's)")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="torch.compile every variant (default: the preset's; --no-compile when compile fails)")
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                        help="bf16 autocast (default: the preset's; on CPU only to rehearse the GPU path)")
    parser.add_argument("--overhead", action="store_true",
                        help="instead: time the trainer's step against a bare loop on the same model (baseline)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_study_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs trained at once, one process and one torch thread each (default 1; 2 on 2 cores)")
    parser.add_argument("--groups", default=None,
                        help="comma-separated among text, init, alternatives, retrieval, suite (default: all)")
    parser.add_argument("--summary-only", action="store_true", help="train nothing: summarise the runs there are")
    parser.add_argument("--retrieval-preset", default="cpu-recall",
                        help="the preset of the retrieval group (default cpu-recall; gpu-small on a GPU)")
    parser.add_argument("--retrieval-steps", type=int, default=None, help="the retrieval runs' steps (default: preset's)")
    parser.add_argument("--out", type=Path, default=None, help="where the summary goes (default outputs/study/)")
    parser.add_argument("--note", default=None, help="a remark stored with the machine, e.g. 'shared with other jobs'")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
