"""Lesson 13's warm-start study, declared here (and in lesson 13) before any of it ran.

    diffattn warmstart [--jobs 2]   → outputs/warmstart/summary.json and outputs/figures/13-warmstart.png

Question: a baseline has been trained; is it worth converting it to DIFF and training on, rather than training the
baseline on? And can a LoRA on the query projection (a common claim with no published source) get what the conversion gets?

    task       lesson 09's `rebind` (8 keys, 4 rebound, 2 asked; 256 validation examples, 512 queries), the
               low-floor task whose distractor is an earlier binding of the asked key: the in-context noise DIFF
               claims to cancel
    pretrain   the baseline on the `cpu-recall` preset (cpu-tiny's shape: 2 layers, d_model 64, 4 heads, 2 KV
               heads; batch 32 × 64 tokens), Design.pretrain_steps = 600 steps (under a third of the preset's 2,000, to fit the
               study in about 15 minutes of 2 shared cores), seeds 0, 1, 2
    continue   Design.continue_steps = 200 more steps from each pretrained baseline, the same data order for every arm of a seed
               (a generator no pretraining seed uses), AdamW with a fresh warmup-cosine schedule
               (20 warmup steps) to a peak of 1e-3:
                 baseline   the baseline itself, trained on
                 diff_v2    convert → V2 (logits equal at step 0), every parameter trained
                 diff_v1    convert → V1 (approximate, diffattn.training.warmstart.convert), every parameter trained
                 lora       convert → V2, then only a rank-LORA_RANK second-query update and W_λ train
    metrics    at step 0 and every 50 steps: answer loss, exact-match accuracy on the validation queries and
               the best key-free null on the same queries (diffattn.data.nulls)
    tests      per arm and seed: accuracy − null, and arm − baseline-continued on the same queries (paired, bootstrap
               clustered by example, diffattn.core.stats.clustered_difference); over seeds: the t interval of the final
               loss and accuracy differences to the baseline continued (diffattn.core.stats.t_interval)

    diffattn warmstart --lora-lr-check   → outputs/warmstart/lora-lr.json

    diffattn warmstart --recall   → outputs/warmstart/recall.json and outputs/figures/13-warmstart-recall.png

The recall warm start (RECALL_DESIGN), declared (here and in lesson 13) after lesson 09's sweep found a layout in
which DIFF V2 learns recall and the matched baselines do not, before any of it ran: the same four arms on that
layout (diffattn.training.study_runs.RECALL_*: mqar, 8 pairs, every key asked, 32 bytes). The baseline is pretrained there for the
sweep's full 2,000 steps at its peak lr of 1e-3 (the budget on which no baseline seed left the plateau), seeds 0-4;
each arm then continues 1,000 steps (20 warmup, peak 1e-3). The question: does converting a baseline stuck on the
plateau to DIFF unlock recall, and how fast, beside the baseline trained on for the same steps?

The LoRA arm's learning-rate check, declared (here and in lesson 13) after the study and before it ran: the study gave
the frozen model's branch, whose B starts at 0, the peak lr every arm had, never checked. `lora_sweep` reruns the LoRA
arm alone at each peak lr in LORA_LRS (the study's 1e-3 among them), with everything else the study's: the same
pretraining, seeds, continued batches, warmup and cosine schedule, and the baseline trained on at 1e-3 beside it. Per lr:
each seed's final answer loss minus its own step 0, and minus the baseline's final (paired by seed, t interval over
seeds). Every lr is reported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import torch

from diffattn.training.warmstart import TARGETS
from diffattn.pure.variants import REFERENCE
from diffattn.training.checkpoint import load_model
from diffattn.data import make_task
from diffattn.data.nulls import best_key_free, clusters, query_nulls
from diffattn.core.errors import require
from diffattn.core.stats import clustered_difference, t_interval
from diffattn.training.study_runs import (
    RECALL_LR,
    RECALL_OPTIONS,
    RECALL_SEEDS,
    RECALL_SEQ_LEN,
    RECALL_STEPS,
    RECALL_TASK,
    RETRIEVAL_PRESET,
    RETRIEVAL_SEEDS,
    RETRIEVAL_TASKS,
    Run,
)
from diffattn.training.loop import Dist, evaluate, make_optimizer, train_step
from diffattn.training.warmstart.convert import convert
from diffattn.training.warmstart.lora import lora_only, trainable_parameters

TASK = "rebind"
CONTINUED = REFERENCE  # the arm that trains the pretrained baseline on, unconverted: every other arm's comparison
ARMS = (CONTINUED, "diff_v2", "diff_v1", "lora")
LABELS = {CONTINUED: "baseline, trained on", "diff_v2": "→ DIFF V2", "diff_v1": "→ DIFF V1",
          "lora": "→ V2, LoRA-only"}
SEEDS = RETRIEVAL_SEEDS
LORA_RANK = 4
LORA_LRS = (1e-3, 3e-3, 1e-2, 3e-2)  # the LoRA learning-rate check's peak lrs, declared before it ran


@dataclass(frozen=True)
class Design:
    """The declared sizes (tests shrink them to seconds; the study runs these) and the layout: "rebind" (the first
    study) or "recall" (lesson 09's recall layout, diffattn.training.study_runs.RECALL_*)."""
    pretrain_steps: int = 600
    continue_steps: int = 200
    continue_warmup: int = 20
    continue_lr: float = 1e-3
    eval_every: int = 50
    layout: str = "rebind"


DESIGN = Design()
RECALL_DESIGN = Design(pretrain_steps=RECALL_STEPS, continue_steps=1000, layout="recall")
CONTINUE_DATA_SEED = 10_000  # + seed: batches no pretraining run (generator seed + 1) draws
CALIBRATION_SEED = 20_000  # + seed: V1's norm-gain calibration batch


def pretraining_runs(design: Design = DESIGN) -> list[Run]:
    if design.layout == "recall":
        return [Run("warmstart", f"recall-baseline-{design.pretrain_steps}steps", RETRIEVAL_PRESET, "baseline",
                    RECALL_TASK, s, {}, RECALL_OPTIONS, design.pretrain_steps, RECALL_SEQ_LEN, RECALL_LR)
                for s in RECALL_SEEDS]
    return [Run("warmstart", f"baseline-{design.pretrain_steps}steps", RETRIEVAL_PRESET, "baseline", TASK, s, {},
                RETRIEVAL_TASKS[TASK], design.pretrain_steps) for s in SEEDS]


def seeds_of(design: Design) -> tuple[int, ...]:
    return RECALL_SEEDS if design.layout == "recall" else SEEDS


def starting_model(arm: str, run: Run):
    """The arm's model at step 0 and the pretraining's train config."""
    base, config = load_model(run.out)
    _, c = run.configs()
    if arm == CONTINUED:
        return base.train(), c
    task = make_task(c.task, c.seq_len, options=c.task_options)
    calibration, _ = task.batch(c.batch_size, c.seq_len, torch.Generator().manual_seed(CALIBRATION_SEED + run.seed))
    model = convert(base, arm if arm in TARGETS else TARGETS[0], calibration).train()  # lora wraps the default
    return (lora_only(model, LORA_RANK) if arm == "lora" else model), c


def continue_arm(arm: str, run: Run, design: Design = DESIGN) -> dict[str, Any]:
    """Train one arm on from its starting model; returns its learning curve (step 0 included) and its trainable
    parameter count."""
    torch.manual_seed(run.seed)  # the LoRA branch's random A: the same whichever arms a worker ran before
    model, c = starting_model(arm, run)
    c = dataclasses.replace(c, steps=design.continue_steps, warmup_steps=design.continue_warmup, lr=design.continue_lr)
    task = make_task(c.task, c.seq_len, options=c.task_options)
    items = task.validation_examples(c.eval_sequences, c.seq_len)
    val_x, val_y = task.validation(c.eval_sequences, c.seq_len)
    optimizer, scheduler = make_optimizer(model, c)
    data = torch.Generator().manual_seed(CONTINUE_DATA_SEED + run.seed)
    cpu, plain = torch.device("cpu"), contextlib.nullcontext
    curve = [{"step": 0, **evaluate(model, val_x, val_y, c.batch_size, plain, items)}]
    started = time.perf_counter()
    for step in range(1, design.continue_steps + 1):
        x, y = task.batch(c.batch_size, c.seq_len, data)
        train_step(model, model, optimizer, scheduler, x, y, c, Dist(), c.batch_size, cpu, plain)
        if step % design.eval_every == 0 or step == design.continue_steps:
            curve.append({"step": step, **evaluate(model, val_x, val_y, c.batch_size, plain, items)})
    return {"arm": arm, "seed": run.seed, "lr": design.continue_lr, "trainable": trainable_parameters(model),
            "curve": curve, "train_s": time.perf_counter() - started}


def finished_arm(arm: str, run: Run, design: Design = DESIGN) -> dict[str, Any]:
    """continue_arm, kept in a JSON file beside the pretrained run: an interrupted study redoes only the arms it had
    not finished (a file written for another design is redone)."""
    import json

    from diffattn.core.results import write_json_atomic

    path = run.out.parent / f"{run.out.name}-continued-{arm}-lr{design.continue_lr:g}.json"
    with contextlib.suppress(OSError, ValueError, KeyError):
        kept = json.loads(path.read_text())
        if kept["design"] == dataclasses.asdict(design):
            return kept["result"]
    result = continue_arm(arm, run, design)
    write_json_atomic(path, {"design": dataclasses.asdict(design), "result": result})
    return result


def _one_thread() -> None:
    torch.set_num_threads(1)


def continue_all(arms: list[tuple[str, Design]], jobs: int, progress: bool, design: Design) -> dict[str, Any]:
    """Pretrain what is missing (`design`'s pretraining), then continue each (arm, its design) of every seed in `jobs`
    processes of one thread; the results and the wall times."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from diffattn.core.progress import Progress
    from diffattn.training.runs import train_missing

    require(jobs >= 1, f"--jobs must be >= 1 (got {jobs})")
    started = time.perf_counter()
    runs = pretraining_runs(design)
    train_missing([r.job() for r in runs], workers=jobs, progress=progress)
    pretrain_s = time.perf_counter() - started
    tasks = [(arm, run, arm_design) for run in runs for arm, arm_design in arms]
    with Progress(len(tasks), f"continuing {len(tasks)} arms", enabled=progress) as bar, \
            ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=_one_thread) as pool:
        futures = [pool.submit(finished_arm, *task) for task in tasks]
        results = []
        for future in futures:
            results.append(future.result())
            bar.advance()
    return {"results": results, "pretrain_s": pretrain_s, "total_s": time.perf_counter() - started, "jobs": jobs}


def run_all(jobs: int = 2, progress: bool = True, design: Design = DESIGN) -> dict[str, Any]:
    """Pretrain what is missing, continue every arm of every seed (`jobs` processes of one thread), summarise."""
    done = continue_all([(arm, design) for arm in ARMS], jobs, progress, design)
    return summarise(done.pop("results"), design, done)


def lora_sweep(jobs: int = 2, progress: bool = True, design: Design = DESIGN,
               lrs: tuple[float, ...] = LORA_LRS) -> dict[str, Any]:
    """The LoRA learning-rate check (module docstring): the LoRA arm at each peak lr, the baseline at the design's."""
    arms = [(CONTINUED, design)] + [("lora", dataclasses.replace(design, continue_lr=lr)) for lr in lrs]
    done = continue_all(arms, jobs, progress, design)
    curves = {(r["arm"], r["lr"], r["seed"]): r["curve"] for r in done.pop("results")}

    def row(arm: str, lr: float) -> dict[str, Any]:
        per_seed = [(curves[(arm, lr, s)][0], curves[(arm, lr, s)][-1]) for s in seeds_of(design)]  # (step 0, final)
        return {"lr": lr, "final_loss": [end["val_loss"] for _, end in per_seed],
                "loss_minus_step0": [end["val_loss"] - start["val_loss"] for start, end in per_seed],
                "final_accuracy": [end["val_accuracy"] for _, end in per_seed]}

    base = row(CONTINUED, design.continue_lr)
    lora = {f"{lr:g}": row("lora", lr) for lr in lrs}
    for r in lora.values():  # paired by seed: the same pretrained model and continued batches
        r["loss_minus_baseline"] = t_interval([a - b for a, b in zip(r["final_loss"], base["final_loss"])])
    return {"design": {**dataclasses.asdict(design), "task": TASK, "preset": RETRIEVAL_PRESET, "lora_rank": LORA_RANK,
                       "seeds": list(seeds_of(design)), "lrs": list(lrs)}, "baseline": base, "lora": lora, "timing": done}


def summarise(results: list[dict[str, Any]], design: Design, timing: dict[str, float]) -> dict[str, Any]:
    """Every run's curve, and the declared tests on the final step."""
    _, c = pretraining_runs(design)[0].configs()
    items = make_task(c.task, c.seq_len, options=c.task_options).validation_examples(c.eval_sequences, c.seq_len)
    nulls, groups = query_nulls(items), clusters(items)
    null_rule = best_key_free(nulls)
    null = nulls[null_rule]
    flags = lambda record: [float(f == "1") for f in record["val_answered"]]  # noqa: E731
    by = {(r["arm"], r["seed"]): r for r in results}
    arms: dict[str, Any] = {}
    for arm in ARMS:
        per_seed = []
        for s in seeds_of(design):
            r = by[(arm, s)]
            first, last = r["curve"][0], r["curve"][-1]
            base_last = by[(CONTINUED, s)]["curve"][-1]
            per_seed.append({
                "seed": s, "trainable": r["trainable"], "train_s": r["train_s"],
                "step0": {"val_loss": first["val_loss"], "val_accuracy": first["val_accuracy"]},
                "final": {"val_loss": last["val_loss"], "val_accuracy": last["val_accuracy"]},
                "curve": [{k: p[k] for k in ("step", "val_loss", "val_accuracy")} for p in r["curve"]],
                "final_answered": last["val_answered"],  # each validation query, 1 answered: for the criterion
                "minus_null": clustered_difference(flags(last), null, groups),
                "minus_baseline": None if arm == CONTINUED else clustered_difference(flags(last), flags(base_last), groups),
            })
        arms[arm] = {"seeds": per_seed,
                     "final_loss": t_interval([p["final"]["val_loss"] for p in per_seed]),
                     "final_accuracy": t_interval([p["final"]["val_accuracy"] for p in per_seed])}
        if arm != CONTINUED:
            base = arms[CONTINUED]["seeds"]
            arms[arm]["loss_minus_baseline"] = t_interval(
                [p["final"]["val_loss"] - b["final"]["val_loss"] for p, b in zip(per_seed, base)])
            arms[arm]["accuracy_minus_baseline"] = t_interval(
                [p["final"]["val_accuracy"] - b["final"]["val_accuracy"] for p, b in zip(per_seed, base)])
    return {"design": {"task": c.task, "options": c.task_options, "preset": RETRIEVAL_PRESET, "seq_len": c.seq_len,
                       "pretrain_lr": c.lr, **dataclasses.asdict(design), "lora_rank": LORA_RANK,
                       "seeds": list(seeds_of(design)),
                       "tokens_per_step": c.batch_size * c.seq_len, "queries": len(null), "examples": len(items)},
            "null": {"rule": null_rule, "value": sum(null) / len(null),
                     "rules": {k: sum(v) / len(v) for k, v in nulls.items()}},
            "arms": arms, "timing": timing}


def figure(summary: dict[str, Any], path):
    """Accuracy and answer loss against continued steps, mean over seeds per arm, the null as a line."""
    from diffattn.core.plotting import new_figure, save

    fig, ax = new_figure(9.0, 3.6)
    fig.delaxes(ax)
    acc, loss = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for arm, data in summary["arms"].items():
        steps = [p["step"] for p in data["seeds"][0]["curve"]]
        for axis, key in ((acc, "val_accuracy"), (loss, "val_loss")):
            mean = [sum(s["curve"][i][key] for s in data["seeds"]) / len(data["seeds"]) for i in range(len(steps))]
            axis.plot(steps, mean, marker="o", ms=3, label=LABELS[arm])
    acc.axhline(summary["null"]["value"], color="k", ls="--", lw=1, label=f"null ({summary['null']['rule']})")
    task = summary["design"]["task"]
    acc.set(xlabel="continued steps", ylabel="exact-match accuracy", title=f"{task}: accuracy (mean of seeds)")
    loss.set(xlabel="continued steps", ylabel="answer loss", title=f"{task}: answer loss (mean of seeds)")
    for axis in (acc, loss):
        axis.grid(True, alpha=0.3)
    acc.legend(fontsize=7)
    return save(fig, path)
