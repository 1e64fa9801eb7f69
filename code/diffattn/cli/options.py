"""The options of `diffattn train`, `compare` and `study` (lesson 08), kept free of torch so that `--help`
and the stdlib lessons never import it; diffattn.config validates every value and names the allowed ones.

Also the command line's limits, for every subcommand: each integer an option takes (and each size among its floats)
has an upper bound (LIMITS, set on the parser by `bound` and quoted in its --help), and each output option names a file or a folder (OUTPUTS, checked by
`check_outputs` before a command does any work). Both fail as one `error:` line and exit code 2.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from diffattn.config import PRESETS
from diffattn.core.errors import ConfigError, require_output_path
from diffattn.core.names import TASKS
from diffattn.pure.variants import VARIANTS
from diffattn.pure.trials import MAX_N, MAX_TRIALS

# The packages pyproject.toml installs (the stdlib track needs none of them): a command that cannot import one says so
THIRD_PARTY = {"torch", "numpy", "scipy", "safetensors", "matplotlib", "tqdm", "nbclient", "nbformat", "transformers",
               "flash_attn"}

# argparse takes '-1T', '-1e-3' or '-inf' for an unknown option and answers "expected one argument"; these are values
NEGATIVE = re.compile(r"^-(\.?\d|inf|nan)", re.IGNORECASE)


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse, but bad arguments give a single `error:` line and exit code 2, and an argument that starts with '-'
    and a digit (or is -inf, -nan) is a value: `--budget-tokens -1T` is told what a budget must be."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE  # read by argparse's _parse_optional (no option here looks like -1)

    def error(self, message: str) -> None:  # type: ignore[override]
        message = re.sub(r"^argument (-[^\s:/]+)(?:/\S+)?: must ", r"\1 must ", message)  # a bound: "--n must be …"
        sys.stderr.write(f"error: {message} (see --help)\n")
        raise SystemExit(2)


def _shown(text: str, width: int = 40) -> str:
    return repr(text) if len(text) <= width else repr(text[:width]) + f"… ({len(text):,} characters)"


class Bounded:
    """An argparse type: an int or float at most `high` (and at least `low`, where given); a value outside is an
    error that names the bound and `why`. `kind` is what it converts to (argparse's message names it)."""

    def __init__(self, kind: type, high: float, why: str, low: float | None = None) -> None:
        self.kind, self.high, self.why, self.low = kind, high, why, low
        self.__name__ = kind.__name__

    def limit(self) -> str:
        number = (lambda x: f"{int(x):,}" if float(x).is_integer() else f"{x:g}")
        return f"at most {number(self.high)}" if self.low is None else f"{number(self.low)} to {number(self.high)}"

    def __call__(self, text: str) -> float:
        try:
            value = self.kind(text)
        except (ValueError, OverflowError):
            if not text.strip().lstrip("+").isdigit():  # else an integer of more than 4,300 digits: too large
                raise argparse.ArgumentTypeError(f"invalid {self.kind.__name__} value: {_shown(text)}") from None
            value = float("inf")
        if not value <= self.high or (self.low is not None and not value >= self.low):  # NaN fails both
            raise argparse.ArgumentTypeError(f"must be {self.limit()}: {self.why} (got {_shown(text)})")
        return value


MAX_STEPS = 1_000_000
STEPS = Bounded(int, MAX_STEPS, "metrics.jsonl gains a line per step, and a million steps is weeks on a CPU preset")
SEED = Bounded(int, 2**32 - 1, "the data order is seeded with seed + 1, and every derived seed must stay in torch's "
                               "64-bit range")
JOBS = Bounded(int, 64, "each job is a process with its own PyTorch, about half a GB", low=1)
THREADS = Bounded(int, 1024, "torch starts this many threads")
SEEDS = Bounded(int, 100, "each seed trains every variant again")
WIDEST = "beyond any real model, where the table's products stop meaning anything"
# (command, option) → its bound; `bound` sets each as the option's type. A new numeric option gets a line here
# (tests/test_cli_regressions.py fails on an int option without one).
LIMITS: dict[tuple[str, str], Bounded] = {
    **{("accounting", flag): Bounded(int, high, WIDEST) for flag, high in (
        ("--hidden", 2**20), ("--heads", 2**16), ("--head-dim", 2**16), ("--layers", 2**16), ("--kv-heads", 2**16),
        ("--ffn", 2**24), ("--vocab", 2**24), ("--context", 2**40), ("--bytes", 16))},
    ("snr", "--n"): Bounded(int, MAX_N, "a pure-Python trial holds about 0.75 KB per token of its row, so this N "
                                        "takes about 0.8 GB and seconds per trial"),
    ("snr", "--trials"): Bounded(int, MAX_TRIALS, "trials run one after another in pure Python"),
    ("bench", "--threads"): THREADS, ("models", "--threads"): THREADS,
    ("grade", "--timeout"): Bounded(float, 86_400, "a day per exercise"),
    ("grade", "--memory"): Bounded(int, 2**20, "a TiB of address space per exercise"),
    ("grade", "--jobs"): JOBS,
    **{("train", flag): STEPS for flag in ("--steps", "--warmup-steps", "--eval-every", "--checkpoint-every")},
    ("train", "--seed"): SEED,
    ("train", "--batch-size"): Bounded(int, 65_536, "65,536 sequences of gpu-small's 2,048 tokens are a GiB of token "
                                                    "ids before any activation"),
    ("train", "--grad-accum"): Bounded(int, 65_536, "no more micro-steps than sequences in a batch"),
    ("train", "--seq-len"): Bounded(int, 65_536, "no preset's model is longer (its max_seq_len is the exact bound)"),
    ("compare", "--seeds"): SEEDS, ("compare", "--steps"): STEPS,
    ("eval", "--steps"): STEPS, ("eval", "--warmup-steps"): STEPS, ("eval", "--seeds"): SEEDS,
    ("eval", "--samples"): Bounded(int, 4096, "examples per cell, each a forward pass at every length and depth"),
    ("eval", "--seed"): SEED,
    ("plan", "--context"): Bounded(int, 2**40, "beyond any model's context; the KV-cache figures grow with it"),
    ("plan", "--peak-tflops"): Bounded(float, 1e6, "a thousand times an H200; the roofline's figures overflow far "
                                                   "beyond it"),
    ("plan", "--bandwidth-tbs"): Bounded(float, 1e5, "twenty thousand times an H200's HBM"),
    ("warmstart", "--jobs"): JOBS, ("study", "--jobs"): JOBS, ("study", "--retrieval-steps"): STEPS,
    ("sweep", "--jobs"): JOBS,
}
# (command, dest) → what the output option names: a file, or a folder (bench's attention report is one JSON file)
OUTPUTS = {("plan", "out"): "file", ("gpu-check", "out"): "file", ("grade", "json"): "file", ("eval", "json"): "file",
           **{(command, "out"): "folder" for command in ("train", "compare", "eval", "convert", "warmstart", "study",
                                                         "models", "bench")}}


def bound(parser: argparse.ArgumentParser) -> None:
    """Every option of LIMITS gets its bound as its type, and its --help says the bound."""
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for (command, flag), limit in LIMITS.items():
        action = subparsers.choices[command]._option_string_actions[flag]
        action.type = limit
        text = action.help or ""
        default = re.search(r"\s*\(default\b(?:[^()]|%\(\w+\)[sdg])*\)$", text)  # "… (default: %(default)s)"
        action.help = (f"{text[:default.start()]}, {limit.limit()}{text[default.start():]}" if default
                       else f"{text} ({limit.limit()})".lstrip())


def check_outputs(args: argparse.Namespace) -> None:
    """An output option that names a folder where a file goes (or the other way round), or a path below a file: one
    line before any work, rather than an error after it (or a half-written folder)."""
    for (command, dest), kind in OUTPUTS.items():
        path = getattr(args, dest, None)
        if args.command != command or path is None:
            continue
        if command == "bench" and getattr(args, "what", None) == "attention":
            kind = "file"
        require_output_path(Path(path), f"--{dest}", folder=kind == "folder")


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


def require_torch(what: str):
    """torch, or one line saying how to install it."""
    try:
        import torch
    except ImportError:
        raise ConfigError(f"{what} needs PyTorch: run `make course` (installs it; lesson 00 says how to choose a CPU "
                          f"or CUDA build)") from None
    return torch
