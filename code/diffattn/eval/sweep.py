"""Lesson 09's recall sweep: where do the variants separate? Every run declared here before any of them ran.

    diffattn sweep [--jobs 2] [--stage 1|2] → outputs/checkpoints/cpu-recall/<task>/sweep-…/ (not
        committed), then outputs/sweep/summary.json, table.txt and two figures (committed; they name the machine)

The model and optimiser are the `cpu-recall` preset's (2 layers, d_model 64, 4 query heads over 2 KV heads, batch 32,
64 tokens, peak learning rate 3e-3, 100 warmup steps, cosine to a tenth). Five variants, matched as in lesson 07:
the baseline, baseline_2h (V2's 2h query heads over the same KV heads, without the differential part: the control
that separates "more query heads" from "differential"), DIFF V1 with the paper's initialisation, DIFF V1 with the
initialisation lesson 08's 2×2 found best (λ_init = 0.8, so both λ's start and the head scale 0.2), and DIFF V2.

Cells vary one factor at a time around a centre (mqar, 8 answers per sequence, padding at the end, 3,000 steps):

    answers   2 / 4 / 8 asked keys per sequence (8 pairs in the context)
    padding   between the context and the queries (the layout lessons 09-11 used before) / at the end
    steps     1,500 / 3,000 / 6,000 (the schedule stretches with them)
    task      mqar / rebind asking every key (8 keys, 4 of them rebound: the latest binding answers) / needles with
              3-digit values (6 records, 1-letter keys, each unasked key a near-duplicate of an asked one; needles
              have no padding, the filler is the haystack)

Stage 1: the centre with seeds 0-4, every other cell with seeds 0-1, every variant. Stage 2 (declared with stage 1):
the first two other cells, in the order below, in which some DIFF variant learned on both seeds while baseline_2h
learned on neither get seeds 2-4 as well. Stage 3, the mechanism (declared while stage 1's first runs trained,
before any V2 run had finished): in the centre, with its five seeds, two controls that each remove one part of V2
and keep everything else, beside V2 and baseline_2h from stage 1:

    diff_v2-gate_half   σ(λ) fixed at ½ (its value at W_λ = 0): the subtraction without the learned per-token gate
    diff_v2-sum         a + σ(λ)·b instead of a − σ(λ)·b: V2's heads, widths and gate with nothing subtracted, i.e.
                        baseline_2h's 2h query heads summed pairwise down to V2's output width

Also in stage 3, a replication (added after the centre's first two V2 seeds had stayed on the plateau, before it
ran): the layout in which V2 was first seen to learn, 8 pairs with every key asked and no padding at all (64 → 32
bytes per sequence) at the preset's 2,000 steps, every variant, five seeds.

Stage 4, the learning rate (declared after stages 1 and 3 had run, before any of its runs trained). Every run of
stages 1 and 3 used the preset's peak learning rate, 3e-3, and none learned. Three pilot runs of seed 0 in the
replication layout, each reported in lesson 09, checked that before blaming the variants: DIFF V2 at 1e-2 (stopped at
step 800, still near 0.2), DIFF V2 at 1e-3 (left the plateau near step 600 and reached 1.00), and baseline_2h at 1e-3
(on the plateau at the end). So stage 4 trains the same layouts at a peak of 1e-3, every variant: the replication
layout with five seeds (the cell that decides the lesson), then the centre, the padding between context and queries,
and rebind asking every key, with two seeds each.

Stage 5, the mechanism where the variants separate (declared while stage 4 trained, after its first two V2 seeds had
learned in its first cell and before any run of this stage): stage 3's two controls, σ(λ) fixed at ½ and the pairs
summed, in stage 4's first cell with its five seeds.

What ships (outputs/models/cpu-recall/mqar/, lesson 09 evaluates it): one run per variant, from the first cell, in
the order centre, replication, the others, then stage 4's, in which a DIFF variant learned on more than half its seeds and
baseline_2h on none (the centre if no cell does), all of the seed that is the lowest on which that DIFF variant
learned (0 if none did): a model that retrieves beside matched ones, trained on the same batches, that do not.

"Learned" is the course's criterion (diffattn.eval.criterion) on the trainer's 256 validation examples
at the last step; "leaves the plateau" is the first evaluation (every 100 steps) whose accuracy − null reaches the
criterion's margin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diffattn.core.errors import require
from diffattn.training.study_runs import Run

PRESET = "cpu-recall"
VARIANTS = {  # name: (variant, GPTConfig changes)
    "baseline": ("baseline", {}),
    "baseline_2h": ("baseline_2h", {}),
    "diff_v1": ("diff_v1", {}),
    "diff_v1-lambda_init0.8": ("diff_v1", {"lambda_init": 0.8}),
    "diff_v2": ("diff_v2", {}),
}
MECHANISM = {"diff_v2-gate_half": ("diff_v2", {"v2_gate": "half"}), "diff_v2-sum": ("diff_v2", {"v2_pair": "sum"})}
VARIANT_LABELS = {"baseline": "baseline", "baseline_2h": "2h heads", "diff_v1": "DIFF V1",
                  "diff_v1-lambda_init0.8": "V1, λ_init 0.8", "diff_v2": "DIFF V2",
                  "diff_v2-gate_half": "V2, σ(λ) = ½", "diff_v2-sum": "V2 pairs summed"}
TASK_IDS = {"mqar": "mqar", "rebind_all": "rebind", "needles3": "needles"}


def result_key(name: str) -> str:
    """A variant's name as a key of the lessons' numbers, which lessons quote by dotted paths: no '.' in it
    ('diff_v1-lambda_init0.8' → 'diff_v1-lambda_init0_8')."""
    return name.replace(".", "_")
PADDING_FREE = ("needles3",)  # a haystack, no padding to place


@dataclass(frozen=True)
class Cell:
    task: str  # a TASK_IDS key
    answers: int
    pad: str
    steps: int
    seq_len: int = 64  # the preset's
    lr: float | None = None  # the peak learning rate; None: the preset's 3e-3

    @property
    def key(self) -> str:
        """'mqar-A8-end-S3000' (with '-T32' for another context than 64, '-LR1e-3' for another peak learning rate):
        the cell as a folder name and a result key."""
        return (f"{self.task}-A{self.answers}-{self.pad}-S{self.steps}" + (f"-T{self.seq_len}" if self.seq_len != 64
                                                                            else "")
                + (f"-LR{self.lr:.0e}".replace("e-0", "e-") if self.lr is not None else ""))  # no '.' in a key

    @property
    def options(self) -> dict[str, Any]:
        if self.task == "mqar":
            return {"n_pairs": 8, "n_queries": self.answers, "pad": self.pad}
        if self.task == "rebind_all":
            return {"n_keys": 8, "n_rebinds": 4, "n_queries": self.answers, "ask": "all", "pad": self.pad}
        return {"n_needles": 6, "n_queries": self.answers, "value_len": 3}

    def run(self, name: str, seed: int) -> Run:
        variant, changes = (VARIANTS | MECHANISM)[name]
        return Run("sweep", f"sweep-{self.key}-{name}", PRESET, variant, TASK_IDS[self.task], seed, changes,
                   self.options, self.steps, None if self.seq_len == 64 else self.seq_len, self.lr)


CENTRE = Cell("mqar", 8, "end", 3000)
# Trained in this order (set before each cell ran, twice changed while the centre trained): the centre; the two other
# tasks, needles first, where lesson 08's study saw DIFF V1 learn 3-digit needles; then the mqar cells; the
# 6,000-step cell, the costliest, last.
CELLS = (
    CENTRE,
    Cell("needles3", 4, "haystack", 3000),
    Cell("rebind_all", 8, "end", 3000),
    Cell("mqar", 4, "end", 3000),
    Cell("mqar", 8, "between", 3000),
    Cell("mqar", 8, "end", 1500),
    Cell("mqar", 2, "end", 3000),
    Cell("mqar", 8, "end", 6000),
)
REPLICATION = Cell("mqar", 8, "end", 2000, seq_len=32)  # 2·8 + 1 + 2·8 = 33 bytes: no padding left
SLOWER = 1e-3  # stage 4's peak learning rate
LR_CELLS = (  # stage 4, in the order they train; the first decides the lesson (five seeds), the others get two
    Cell("mqar", 8, "end", 2000, seq_len=32, lr=SLOWER),
    Cell("mqar", 8, "end", 3000, lr=SLOWER),
    Cell("mqar", 8, "between", 3000, lr=SLOWER),
    Cell("rebind_all", 8, "end", 3000, lr=SLOWER),
)
ALL_CELLS = (*CELLS, REPLICATION, *LR_CELLS)  # every cell the sweep declares, in the summary's order
CENTRE_SEEDS, FIRST_SEEDS, MORE_SEEDS = (0, 1, 2, 3, 4), (0, 1), (2, 3, 4)
STAGES = (1, 2, 3, 4, 5)
DIFF = ("diff_v1", "diff_v1-lambda_init0.8", "diff_v2")
CONTROL = "baseline_2h"


FOLLOW_UPS = 2  # stage 2 adds seeds to at most this many cells


def seeds(cell: Cell, stage: int, learned: dict[tuple[str, str], list[bool]] | None = None) -> tuple[int, ...]:
    """The seeds `cell` trains by `stage`; stage 2 reads stage 1's verdicts (learned[(cell key, variant)])."""
    if cell == CENTRE:
        return CENTRE_SEEDS
    if stage == 1 or learned is None:
        return FIRST_SEEDS
    followed = [c for c in CELLS if c != CENTRE and separates(c, learned)][:FOLLOW_UPS]
    return FIRST_SEEDS + MORE_SEEDS if cell in followed else FIRST_SEEDS


def separates(cell: Cell, learned: dict[tuple[str, str], list[bool]]) -> bool:
    """Stage 2's rule: some DIFF variant learned on every first seed, the matched control on none."""
    control = learned.get((cell.key, CONTROL), [])
    return not any(control) and any(len(v) == len(FIRST_SEEDS) and all(v)
                                    for v in (learned.get((cell.key, d), []) for d in DIFF))


def ship_choice(summary: dict) -> tuple[str, int]:
    """(cell key, seed) of the runs that ship, by the rule above, from a sweep summary."""
    cells = summary["cells"]
    for cell in (CENTRE, REPLICATION, *CELLS[1:], *LR_CELLS):
        found = cells.get(cell.key)
        if not found or any(r["learned"] for r in found["variants"][CONTROL]["runs"]):
            continue
        for name in DIFF:
            runs = found["variants"][name]["runs"]
            if 2 * sum(r["learned"] for r in runs) > len(runs):
                return cell.key, min(r["seed"] for r in runs if r["learned"])
    return CENTRE.key, 0


def plan(stage: int = 1, learned: dict[tuple[str, str], list[bool]] | None = None) -> list[Run]:
    """Every run of the sweep up to `stage`, the centre first (it decides the lesson), then cell by cell."""
    require(stage in STAGES, f"--stage is one of {', '.join(map(str, STAGES))} (got {stage})")
    runs = [cell.run(name, s) for cell in CELLS for s in seeds(cell, stage, learned) for name in VARIANTS]
    if stage >= 3:
        runs += [CENTRE.run(name, s) for s in CENTRE_SEEDS for name in MECHANISM]
        runs += [REPLICATION.run(name, s) for s in CENTRE_SEEDS for name in VARIANTS]
    if stage >= 4:
        runs += [cell.run(name, s) for i, cell in enumerate(LR_CELLS)
                 for s in (CENTRE_SEEDS if i == 0 else FIRST_SEEDS) for name in VARIANTS]
    if stage >= 5:
        runs += [LR_CELLS[0].run(name, s) for s in CENTRE_SEEDS for name in MECHANISM]
    return runs
