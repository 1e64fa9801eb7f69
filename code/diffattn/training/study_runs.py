"""Lessons 08-11's CPU study: every run `make train-small` trains, declared here before any of them ran.

    diffattn study [--jobs 2] [--groups text,init,alternatives,retrieval,suite]
        → outputs/checkpoints/<preset>/<task>/<name>[-seed<S>]/ (not committed), then diffattn.eval.study_summary writes
          outputs/study/summary.json, table.txt and the figures (committed; they name the machine)
    diffattn study --groups retrieval --retrieval-preset gpu-small --retrieval-steps 300 --out DIR
        → the low-floor tasks at gpu-small's width and context, on a GPU (scripts/gpu_check.sh, opt-in)

Four groups of runs, each a question:

    text          the four matched variants on cpu-small text, 5 seeds (lesson 08's comparison)
    init          DIFF V1's 2×2 on cpu-small text, 5 seeds: where λ starts (the depth schedule or 0.8) × what
                  multiplies each normalised head (1 − the schedule or 1 − 0.8 = 0.2). The paper's V1 is
                  (schedule, 1 − schedule), its Table 6 "λ_init = 0.8" is (0.8, 0.2); the two mixed cells separate
                  the two things one λ_init number sets at once
    alternatives  other initialisations that shrink V1's attention branch at the start, 3 seeds, each with the
                  baseline under the same change where it has one: the per-head norm's gain γ = 0.1 (V1 only), the
                  attention output projection's std 0.02/√(2·layers) (GPT-2's residual scaling), and the embedding
                  multiplied by √d_model on the way in (Gemma's)
    retrieval     the low-floor retrieval tasks of lesson 09 on the cpu-recall preset, 3 variants × 3 seeds each:
                  `needles` with 3-digit values (4 records, 2 asked) and `rebind` (8 keys, 4 rebound, 2 asked)
    suite         the cpu-small `needles` checkpoints (the paper's Table 2 layouts, 1-digit values), 3 variants × 3
                  seeds, that `eval suite --preset cpu-small` evaluates for lessons 09-11

Runs that share a configuration share a folder (`diff_v1` is both lesson 08's V1 and the 2×2's paper cell), and a
folder that already holds its run finished is not trained again (diffattn.training.runs.train_missing): `compare` and the
λ_init ablation of lesson 11 reuse these runs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diffattn.config import HEAD_SCALE_SCHEDULE, PRESETS, build_configs, default_out
from diffattn.core.errors import require
from diffattn.pure.variants import EVALUATED, VARIANTS

TEXT_PRESET, RETRIEVAL_PRESET = "cpu-small", "cpu-recall"
TEXT_SEEDS, ALTERNATIVE_SEEDS, RETRIEVAL_SEEDS = tuple(range(5)), tuple(range(3)), tuple(range(3))
# lesson 09's low-floor tasks: their nulls are printed beside every accuracy (diffattn.data.nulls)
# The recall layout in which lesson 09's sweep saw a variant learn (its stage 4, first cell): mqar, 8 pairs, every key
# asked, no padding left (32 bytes), 2,000 steps at a peak lr of 1e-3. Lesson 13's recall warm start pretrains on it.
RECALL_TASK, RECALL_OPTIONS = "mqar", {"n_pairs": 8, "n_queries": 8, "pad": "end"}
RECALL_SEQ_LEN, RECALL_STEPS, RECALL_LR, RECALL_SEEDS = 32, 2000, 1e-3, tuple(range(5))
RETRIEVAL_TASKS = {
    "needles": {"n_needles": 4, "n_queries": 2, "value_len": 3},
    "rebind": {"n_keys": 8, "n_rebinds": 4, "n_queries": 2},
}
_layers = PRESETS[TEXT_PRESET].model.n_layer
_width = PRESETS[TEXT_PRESET].model.d_model
# name: (variant, GPTConfig changes); the 2×2's cells are named by (λ's start, head scale)
INIT_CELLS = {
    ("schedule", "1 − schedule"): ("diff_v1", {}),
    ("0.8", "0.2"): ("diff_v1-lambda_init0.8", {"lambda_init": 0.8}),
    ("schedule", "0.2"): ("diff_v1-scale0.2", {"head_scale": 0.2}),
    ("0.8", "1 − schedule"): ("diff_v1-lambda_init0.8-scale_schedule", {"lambda_init": 0.8,
                                                                       "head_scale": HEAD_SCALE_SCHEDULE}),
}
# Table 6's other constant, trained beside the 2×2 so that lesson 11's ablation (schedule, 0.8, 0.5) reuses the study
TABLE6_EXTRA = ("diff_v1-lambda_init0.5", {"lambda_init": 0.5})
ALTERNATIVES = {
    "norm gain 0.1": {"subln_gain": 0.1},
    "output projection std 0.02/√(2L)": {"out_std": 0.02 / math.sqrt(2 * _layers)},
    "embedding × √d_model": {"embed_scale": math.sqrt(_width)},
}
GROUPS = ("text", "init", "alternatives", "retrieval", "suite")
SUITE_SEEDS = tuple(range(3))
TRAINING_FILE = "training.json"  # outputs/study/: each training pass's wall time, jobs and machine


@dataclass(frozen=True)
class Run:
    group: str
    name: str  # the folder under <preset>/<task>/ (…-seed<S> for seed S > 0)
    preset: str
    variant: str
    task: str
    seed: int
    model: dict[str, Any] = field(default_factory=dict)  # GPTConfig fields changed from the variant's
    options: dict[str, Any] = field(default_factory=dict)  # the task's options
    steps: int | None = None  # None: the preset's
    seq_len: int | None = None  # None: the preset's
    lr: float | None = None  # peak learning rate; None: the preset's

    def configs(self):
        model, train = build_configs(self.preset, self.variant, self.model.get("lambda_init"), task=self.task,
                                     seed=self.seed, steps=self.steps, seq_len=self.seq_len, lr=self.lr)
        rest = {k: v for k, v in self.model.items() if k != "lambda_init"}
        return dataclasses.replace(model, **rest), dataclasses.replace(train, task_options=dict(self.options))

    @property
    def out(self) -> Path:
        return default_out(self.preset, self.task, self.name, self.seed)

    def job(self):
        model, train = self.configs()
        return self.preset, model, train, self.out


# short ids for folders and result keys (letters, digits, _ and - only: lessons quote results by dotted keys)
ALTERNATIVE_IDS = {"norm gain 0.1": "norm_gain", "output projection std 0.02/√(2L)": "out_std",
                   "embedding × √d_model": "embed_scale"}
_FOLDERS = {"norm_gain": "gain0.1", "out_std": "out_std_scaled", "embed_scale": "embed_sqrt_d"}


def alternative_name(variant: str, label: str) -> str:
    """The checkpoint folder of `variant` under the alternative initialisation `label`."""
    return f"{variant}-{_FOLDERS[ALTERNATIVE_IDS[label]]}"


def cell_key(cell: tuple[str, str]) -> str:
    """('0.8', '1 − schedule') → 'start_0_8-scale_schedule': a 2×2 cell as a result key."""
    start, scale = cell
    return f"start_{start.replace('.', '_')}-scale_{'schedule' if 'schedule' in scale else scale.replace('.', '_')}"


def plan(groups: tuple[str, ...] = GROUPS, retrieval_preset: str = RETRIEVAL_PRESET,
         retrieval_steps: int | None = None) -> list[Run]:
    """Every run of the study, in the order they are trained (a folder two groups share is listed once). The
    retrieval group can run on another preset (scripts/gpu_check.sh: gpu-small's width and context on a GPU)."""
    require(set(groups) <= set(GROUPS), f"--groups are among {', '.join(GROUPS)} (got {', '.join(groups)})")
    require(retrieval_preset in PRESETS, f"--retrieval-preset is one of {', '.join(PRESETS)} (got {retrieval_preset!r})")
    runs: list[Run] = []
    if "init" in groups:
        runs += [Run("init", name, TEXT_PRESET, "diff_v1", "text", s, changes)
                 for name, changes in reversed(INIT_CELLS.values()) for s in TEXT_SEEDS]
        runs += [Run("init", "baseline", TEXT_PRESET, "baseline", "text", s) for s in TEXT_SEEDS]
        runs += [Run("init", TABLE6_EXTRA[0], TEXT_PRESET, "diff_v1", "text", s, TABLE6_EXTRA[1]) for s in TEXT_SEEDS]
    if "alternatives" in groups:
        for label, changes in ALTERNATIVES.items():
            variants = ("diff_v1",) if "subln_gain" in changes else ("baseline", "diff_v1")
            runs += [Run("alternatives", alternative_name(v, label), TEXT_PRESET, v, "text", s, changes)
                     for v in variants for s in ALTERNATIVE_SEEDS]
    if "retrieval" in groups:
        runs += [Run("retrieval", v, retrieval_preset, v, task, s, {}, options, retrieval_steps)
                 for task, options in RETRIEVAL_TASKS.items() for v in EVALUATED for s in RETRIEVAL_SEEDS]
    if "suite" in groups:
        runs += [Run("suite", v, TEXT_PRESET, v, "needles", s) for v in EVALUATED for s in SUITE_SEEDS]
    if "text" in groups:  # last: the runs it shares with `init` (baseline, diff_v1) are then already done
        runs += [Run("text", v, TEXT_PRESET, v, "text", s) for v in VARIANTS for s in TEXT_SEEDS]
    unique: dict[Path, Run] = {}
    for r in runs:  # one folder, one run: the init group's baseline is the text group's
        unique.setdefault(r.out, r)
    # the runs lesson 08's plain comparison shares (a folder named after a variant) go last
    return sorted(unique.values(), key=lambda r: r.task == "text" and r.name in VARIANTS)


def training_passes(log: Path) -> list[dict]:
    """The training passes recorded in outputs/study/training.json ([] before the first)."""
    import json

    if not log.is_file():
        return []
    data = json.loads(log.read_text())
    return data["passes"] if "passes" in data else [data]  # a single pass, as the first version wrote it
