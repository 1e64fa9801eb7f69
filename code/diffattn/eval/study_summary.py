"""Lessons 08-11: the study's runs (diffattn.training.study_runs) summarised, every number beside its interval or its null.

    text          final validation loss per variant and seed; each variant − baseline paired by seed, with a t
                  interval over seeds; the same gap at every evaluation (the dynamics one endpoint hides)
    init          the 2×2 (λ's start × head scale): each cell − the paper's V1 and − the baseline, paired by seed; the
                  two main effects and their interaction, per seed then t intervals; the branch RMS at initialisation
    alternatives  per change: V1 − baseline under it against V1 − baseline without it (seeds paired)
    retrieval     per task, variant, seed: the learning curve (accuracy and loss per evaluation), the null models on
                  the same validation queries, the first evaluation whose accuracy beats the best key-free null with
                  the clustered paired test, and, at the end, each DIFF variant − the baseline on the same queries

write() puts summary.json and table.txt in outputs/study/ and the figures beside them.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from diffattn.training import checkpoint
from diffattn.data import make_task, nulls
from diffattn.core.errors import require
from diffattn.pure.variants import EVALUATED, VARIANTS
from diffattn.core.results import write_json_atomic
from diffattn.core.stats import clustered_difference, t_interval
from diffattn.training.study_runs import (
    ALTERNATIVE_IDS,
    ALTERNATIVES,
    INIT_CELLS,
    RETRIEVAL_TASKS,
    TEXT_PRESET,
    TEXT_SEEDS,
    TRAINING_FILE,
    Run,
    alternative_name,
    cell_key,
    training_passes,
)

PAPER_CELL = ("schedule", "1 − schedule")  # the paper's V1: λ starts at the schedule, heads scaled by 1 − it


def _evals(run: Run) -> list[dict]:
    records = checkpoint.read_metrics(run.out)
    require(bool(records) and records[-1]["step"] == run.configs()[1].steps,
            f"{run.out} holds no finished run: run `diffattn study` (it trains what is missing)")
    return [r for r in records if "val_loss" in r]


def _finals(runs: dict[tuple[str, int], Run], name: str, seeds) -> list[float]:
    return [_evals(runs[(name, s)])[-1]["val_loss"] for s in seeds]


def _paired(a: list[float], b: list[float]) -> dict:
    return {"per_seed": [x - y for x, y in zip(a, b)], **t_interval(x - y for x, y in zip(a, b))}


def text(runs: dict, seeds: list[int]) -> dict:
    base = _finals(runs, "baseline", seeds)
    out: dict[str, Any] = {"seeds": list(seeds), "variants": {}}
    for v in VARIANTS:
        finals = _finals(runs, v, seeds)
        curves = [_evals(runs[(v, s)]) for s in seeds]
        out["variants"][v] = {"val_loss": finals, **t_interval(finals), "vs_baseline": _paired(finals, base),
                              "steps": [r["step"] for r in curves[0]],
                              "curves": [[r["val_loss"] for r in c] for c in curves]}
    steps = out["variants"]["baseline"]["steps"]
    for v in VARIANTS:  # the gap to the baseline at every evaluation, paired by seed
        r = out["variants"][v]
        r["gap_by_step"] = [t_interval(c[i] - b[i] for c, b in zip(r["curves"], out["variants"]["baseline"]["curves"]))
                            for i in range(len(steps))]
    return out


def init(runs: dict, seeds: list[int]) -> dict:
    cells = {cell: _finals(runs, name, seeds) for cell, (name, _) in INIT_CELLS.items()}
    base, paper = _finals(runs, "baseline", seeds), cells[PAPER_CELL]
    s, s_, e, e_ = (cells[("schedule", "1 − schedule")], cells[("0.8", "1 − schedule")],
                    cells[("schedule", "0.2")], cells[("0.8", "0.2")])
    effects = {  # per seed, then a t interval: each factor's change averaged over the other's two levels
        "lambda_start": [((b - a) + (d - c)) / 2 for a, b, c, d in zip(s, s_, e, e_)],  # schedule → 0.8
        "head_scale": [((c - a) + (d - b)) / 2 for a, b, c, d in zip(s, s_, e, e_)],  # 1 − schedule → 0.2
        "interaction": [(d - c) - (b - a) for a, b, c, d in zip(s, s_, e, e_)],
    }
    return {"seeds": list(seeds), "baseline": {"val_loss": base, **t_interval(base)},
            "cells": {cell_key(cell): {"lambda_start": cell[0], "head_scale": cell[1], "run": INIT_CELLS[cell][0],
                                       "val_loss": v, **t_interval(v), "vs_paper_v1": _paired(v, paper),
                                       "vs_baseline": _paired(v, base)} for cell, v in cells.items()},
            "effects": {k: {"per_seed": v, **t_interval(v)} for k, v in effects.items()},
            "branch_rms": branch_rms()}


def branch_rms() -> dict:
    """Attention-branch RMS at initialisation per variant, 2×2 cell and alternative (lesson 08's table)."""
    from diffattn.eval.init_scale import mean_over_seeds

    configs: dict[str, Any] = {}
    base_run = Run("init", "baseline", TEXT_PRESET, "baseline", "text", 0)
    tokens = make_task("text", base_run.configs()[1].seq_len).validation(8, base_run.configs()[1].seq_len)[0]
    for v in EVALUATED:
        configs[v] = Run("init", v, TEXT_PRESET, v, "text", 0).configs()[0]
    for cell, (name, changes) in INIT_CELLS.items():
        configs[f"diff_v1-{cell_key(cell)}"] = Run("init", name, TEXT_PRESET, "diff_v1", "text", 0, changes).configs()[0]
    for label, changes in ALTERNATIVES.items():
        for v in (("diff_v1",) if "subln_gain" in changes else ("baseline", "diff_v1")):
            configs[f"{v}-{ALTERNATIVE_IDS[label]}"] = Run("alternatives", alternative_name(v, label), TEXT_PRESET, v,
                                                          "text", 0, changes).configs()[0]
    return {name: mean_over_seeds(config, tokens, TEXT_SEEDS) for name, config in configs.items()}


def alternatives(runs: dict, seeds) -> dict:
    default_gap = [v - b for v, b in zip(_finals(runs, "diff_v1", seeds), _finals(runs, "baseline", seeds))]
    out: dict[str, Any] = {"seeds": list(seeds), "default_gap": {"per_seed": default_gap, **t_interval(default_gap)},
                           "changes": {}}
    for label, changes in ALTERNATIVES.items():
        v1 = _finals(runs, alternative_name("diff_v1", label), seeds)
        row: dict[str, Any] = {"label": label, "changes": changes, "diff_v1": v1,
                               "diff_v1_vs_default": _paired(v1, _finals(runs, "diff_v1", seeds))}
        if "subln_gain" not in changes:  # the baseline has no per-head norm: the gain change is V1's alone
            b = _finals(runs, alternative_name("baseline", label), seeds)
            gap = [x - y for x, y in zip(v1, b)]
            row |= {"baseline": b, "baseline_vs_default": _paired(b, _finals(runs, "baseline", seeds)),
                    "gap": {"per_seed": gap, **t_interval(gap)},
                    "gap_change": _paired(gap, default_gap)}
        else:
            row["gap"] = _paired(v1, _finals(runs, "baseline", seeds))
        out["changes"][ALTERNATIVE_IDS[label]] = row
    return out


def retrieval(runs: dict, seeds) -> dict:
    out: dict[str, Any] = {}
    for task, options in RETRIEVAL_TASKS.items():
        first = runs[(task, "baseline", seeds[0])]
        c = first.configs()[1]
        items = make_task(task, c.seq_len, options=options).validation_examples(c.eval_sequences, c.seq_len)
        probs, clusters = nulls.query_nulls(items), nulls.clusters(items)
        best = nulls.best_key_free(probs)
        t: dict[str, Any] = {"options": options, "examples": len(items), "queries": len(clusters),
                             "null": {rule: statistics.fmean(p) for rule, p in probs.items()}, "null_rule": best,
                             "steps": [], "variants": {}}
        finals_flags: dict[tuple[str, int], list[float]] = {}
        for v in EVALUATED:
            per_seed = []
            for s in seeds:
                evals = _evals(runs[(task, v, s)])
                t["steps"], t["tokens"] = [r["step"] for r in evals], [r["tokens"] for r in evals]
                flags = [[float(ch == "1") for ch in r["val_answered"]] for r in evals]
                tests = [clustered_difference(f, probs[best], clusters) for f in flags]
                leaves = next((r["step"] for r, test in zip(evals, tests) if test["above"]), None)
                finals_flags[(v, s)] = flags[-1]
                per_seed.append({"seed": s, "accuracy": [r["val_accuracy"] for r in evals],
                                 "answer_loss": [r["val_loss"] for r in evals], "leaves_null_at": leaves,
                                 "final": {**clustered_difference(flags[-1], [0.0] * len(clusters), clusters),
                                           "vs_null": tests[-1]}})
            finals = [r["accuracy"][-1] for r in per_seed]
            t["variants"][v] = {"runs": per_seed, "final_accuracy": t_interval(finals)}
        for v in EVALUATED[1:]:  # the same queries: paired per query within a seed, t interval over seeds
            t["variants"][v]["vs_baseline"] = {
                "per_seed": [clustered_difference(finals_flags[(v, s)], finals_flags[("baseline", s)], clusters)
                             for s in seeds],
                **t_interval(a - b for a, b in zip([r["accuracy"][-1] for r in t["variants"][v]["runs"]],
                                                   [r["accuracy"][-1] for r in t["variants"]["baseline"]["runs"]]))}
        out[task] = t
    return out


def summarise(runs: list[Run]) -> dict:
    by_name = {(r.name, r.seed): r for r in runs if r.task == "text"}
    by_task = {(r.task, r.name, r.seed): r for r in runs if r.group == "retrieval"}
    groups = {r.group for r in runs}
    summary: dict[str, Any] = {}
    def seeds(group: str) -> list[int]:
        return sorted({r.seed for r in runs if r.group == group})

    if "text" in groups:
        summary["text"] = text(by_name, seeds("text"))
    if "init" in groups:
        summary["init"] = init(by_name, seeds("init"))
    if "alternatives" in groups:
        summary["alternatives"] = alternatives(by_name, seeds("alternatives"))
    if "retrieval" in groups:
        summary["retrieval"] = retrieval(by_task, seeds("retrieval"))
    return summary


def write(runs: list[Run], out: Path) -> dict:
    from diffattn.eval.study_tables import figures, format_table

    summary = summarise(runs)
    summary["runs"] = len(runs)
    summary["train_s"] = sum(checkpoint.read_metrics(r.out)[-1]["time_s"] for r in runs)  # every run's own time
    passes = training_passes(out / TRAINING_FILE)
    summary["training"] = {"passes": passes} if passes else None
    summary["wall_s"] = sum(p["wall_s"] for p in passes) if passes else None
    write_json_atomic(out / "summary.json", summary)
    table = format_table(summary)
    (out / "table.txt").write_text(table + "\n")
    try:
        figures(summary, out)
    except ImportError:
        pass  # no matplotlib: the table and the JSON are the results
    print(table)
    print(f"written to {out}")
    return summary
