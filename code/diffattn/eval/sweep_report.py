"""The recall sweep's runs (diffattn.eval.sweep) summarised: per cell and variant, how many seeds learned, when each
run left its plateau, and its final accuracy beside its null; then the summary file, the table and the figures.

    diffattn sweep [--jobs 2] [--stage 1|2] [--summary-only]

Every variant of a cell is scored on the same 256 validation examples (the trainer's, fixed by the task's options),
so the null models and the paired differences between variants are computed on the same queries.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from diffattn.training import checkpoint
from diffattn.data import make_task, nulls
from diffattn.core.errors import require
from diffattn.eval import criterion
from diffattn.eval.sweep import (
    ALL_CELLS,
    CENTRE,
    CONTROL,
    MECHANISM,
    VARIANT_LABELS,
    VARIANTS,
    Cell,
    ship_choice,
)
from diffattn.core.stats import clustered_difference
from diffattn.training.study_runs import Run

TRAINING_FILE = "training.json"


def _evals(run: Run) -> list[dict]:
    records = checkpoint.read_metrics(run.out)
    require(bool(records) and records[-1]["step"] == run.configs()[1].steps,
            f"{run.out} holds no finished run: run `diffattn sweep` (it trains what is missing)")
    return [r for r in records if "val_answered" in r]


def _queries(cell: Cell, run: Run) -> tuple[dict[str, list[float]], list[int]]:
    c = run.configs()[1]
    items = make_task(c.task, c.seq_len, options=c.task_options).validation_examples(c.eval_sequences, c.seq_len)
    return nulls.query_nulls(items), nulls.clusters(items)


def run_summary(run: Run, rules: dict[str, list[float]], clusters: list[int]) -> dict[str, Any]:
    """One run: its learning curve, the step it leaves the plateau, and the criterion at its last step."""
    evals = _evals(run)
    flags = [[float(ch == "1") for ch in r["val_answered"]] for r in evals]
    judged = criterion.verdict(flags[-1], rules, clusters)
    need, null = judged["margin"], judged["null_best"]
    leaves = next((r["step"] for r in evals if r["val_accuracy"] - null >= need > 0), None)
    return {"seed": run.seed, "steps": [r["step"] for r in evals], "accuracy": [r["val_accuracy"] for r in evals],
            "final_accuracy": evals[-1]["val_accuracy"], "leaves_plateau_at": leaves, "learned": judged["retrieves"],
            "vs_null": judged["vs_null"], "vs_order_blind": judged["vs_order_blind"], "flags": flags[-1]}


def summarise(runs: list[Run]) -> dict[str, Any]:
    by_cell: dict[str, dict[str, list[Run]]] = {}
    for r in runs:
        by_cell.setdefault(_cell_of(r).key, {}).setdefault(_variant_of(r), []).append(r)
    cells: dict[str, Any] = {}
    for cell in ALL_CELLS:
        if cell.key not in by_cell:
            continue
        first = next(iter(by_cell[cell.key].values()))[0]
        rules, clusters = _queries(cell, first)
        null_rule = nulls.best_key_free(rules)
        out: dict[str, Any] = {"task": cell.task, "answers": cell.answers, "pad": cell.pad, "steps": cell.steps,
                               "options": cell.options, "queries": len(clusters),
                               "null": {rule: sum(p) / len(p) for rule, p in rules.items()}, "null_rule": null_rule,
                               "margin": criterion.margin(sum(rules[null_rule]) / len(rules[null_rule])),
                               "variants": {}}
        for name in [n for n in VARIANTS | MECHANISM if n in by_cell[cell.key] or n in VARIANTS]:
            per_seed = [run_summary(r, rules, clusters) for r in sorted(by_cell[cell.key].get(name, []),
                                                                         key=lambda r: r.seed)]
            out["variants"][name] = {"runs": per_seed, "seeds": len(per_seed),
                                     "learned": sum(r["learned"] for r in per_seed)}
        control = {r["seed"]: r["flags"] for r in out["variants"][CONTROL]["runs"]}
        for name in out["variants"]:  # the same validation queries: each seed paired with the control's same seed
            v = out["variants"][name]
            v["vs_control"] = [{"seed": r["seed"], **clustered_difference(r["flags"], control[r["seed"]], clusters)}
                               for r in v["runs"] if name != CONTROL and r["seed"] in control]
        for v in out["variants"].values():
            for r in v["runs"]:
                del r["flags"]
        cells[cell.key] = out
    return {"preset": "cpu-recall", "centre": CENTRE.key, "margin_share": criterion.MARGIN_SHARE, "cells": cells}


def _cell_of(run: Run) -> Cell:
    """The cell whose key, with a variant's name after it, is the run's folder ('…-S2000-T32-diff_v2' is not a run
    of '…-S2000')."""
    return next(c for c in ALL_CELLS if run.name.removeprefix(f"sweep-{c.key}-") in VARIANTS | MECHANISM)


def _variant_of(run: Run) -> str:
    return run.name.removeprefix(f"sweep-{_cell_of(run).key}-")


def learned_map(summary: dict) -> dict[tuple[str, str], list[bool]]:
    """{(cell key, variant name): [learned per seed]} for stage 2's rule."""
    return {(k, name): [r["learned"] for r in v["runs"]] for k, cell in summary["cells"].items()
            for name, v in cell["variants"].items()}


def table(summary: dict) -> str:
    names = list(VARIANTS)
    lines = [f"recall sweep on {summary['preset']}: seeds that learned / seeds run (the criterion: accuracy − null ≥ "
             f"{summary['margin_share']:.0%} of 1 − null, 95% interval included); median step each learning run left "
             "its plateau",
             f"  {'cell':<32} {'null':>5}  " + "".join(f"{VARIANT_LABELS[n]:>16}" for n in names)]
    for key, cell in summary["cells"].items():
        counts = "".join(f"{_count(cell['variants'][n]):>16}" for n in names)
        lines.append(f"  {key:<32} {cell['null'][cell['null_rule']]:>5.2f}  {counts}")
    lines.append("  final accuracy per seed")
    for key, cell in summary["cells"].items():
        for n in names:
            finals = ", ".join(f"{r['final_accuracy']:.2f}" for r in cell["variants"][n]["runs"])
            lines.append(f"  {key:<32} {VARIANT_LABELS[n]:<16} {finals}")
    return "\n".join(lines)


def _count(v: dict) -> str:
    steps = [r["leaves_plateau_at"] for r in v["runs"] if r["learned"] and r["leaves_plateau_at"]]
    median = f" @{statistics.median(steps):g}" if steps else ""
    return f"{v['learned']}/{v['seeds']}{median}"


def figures(summary: dict, folder: Path) -> list[Path]:
    from diffattn.core import plotting

    names, keys = list(VARIANTS), list(summary["cells"])
    fig, ax = plotting.new_figure(7.5, 0.45 * len(keys) + 1.6)
    share = [[summary["cells"][k]["variants"][n]["learned"] / max(1, summary["cells"][k]["variants"][n]["seeds"])
              for n in names] for k in keys]
    ax.imshow(share, cmap="Greens", vmin=0, vmax=1, aspect="auto")
    for i, k in enumerate(keys):
        for j, n in enumerate(names):
            v = summary["cells"][k]["variants"][n]
            ax.text(j, i, f"{v['learned']}/{v['seeds']}", ha="center", va="center", fontsize=9,
                    color="white" if share[i][j] > 0.6 else "black")  # readable on the darkest greens
    ax.set_xticks(range(len(names)), [VARIANT_LABELS[n] for n in names], fontsize=8)
    ax.set_yticks(range(len(keys)), keys, fontsize=8)
    ax.set_title("seeds that learned recall / seeds run, per cell (the first rows at the preset's lr 3e-3, the "
                 "cells named LR1e-3 at 1e-3; '2h heads' is baseline_2h)", fontsize=9)
    paths = [plotting.save(fig, folder / "09-sweep-phase.png")]

    shown = ship_choice(summary)[0]  # the cell that decides the lesson (the centre while no cell separates)
    centre = summary["cells"].get(shown)
    if centre:
        shown_names = names + [n for n in MECHANISM if n in centre["variants"]]  # and its mechanism controls
        fig, axes = plotting.new_figure(2.2 * len(shown_names), 2.6)
        fig.clf()
        axes = fig.subplots(1, len(shown_names), sharey=True)
        null = centre["null"][centre["null_rule"]]
        for ax, n in zip(axes, shown_names):
            for r in centre["variants"][n]["runs"]:
                ax.plot(r["steps"], r["accuracy"], lw=1, color="tab:green" if r["learned"] else "tab:gray")
            ax.axhline(null, ls="--", lw=0.8, color="k")
            ax.axhline(null + centre["margin"], ls=":", lw=0.8, color="tab:red")
            ax.set_ylim(0, 1.02)
            ax.set_title(VARIANT_LABELS[n], fontsize=9)
            ax.set_xlabel("step", fontsize=8)
        axes[0].set_ylabel("validation accuracy", fontsize=8)
        fig.suptitle(f"{shown}: each seed (green: learned), null (dashed), null + margin (dotted)",
                     fontsize=9)
        paths.append(plotting.save(fig, folder / "09-sweep-curves.png"))
    return paths


def write(runs: list[Run], folder: Path, figure_folder: Path) -> dict:
    from diffattn.core.results import read_json, write_json_atomic, write_text_atomic

    summary = summarise(runs)
    recorded = read_json(folder / "summary.json")["cells"] if (folder / "summary.json").is_file() else {}
    # a cell none of whose runs is here to recompute (trained before, its checkpoint folders not committed) keeps
    # what the summary recorded of it: every cell that ran stays reported
    cells = {**recorded, **summary["cells"]}
    summary["cells"] = {c.key: cells[c.key] for c in ALL_CELLS if c.key in cells}
    log = folder / TRAINING_FILE
    summary["training"] = read_json(log)["passes"] if log.is_file() else []
    write_json_atomic(folder / "summary.json", summary)
    write_text_atomic(folder / "table.txt", table(summary) + "\n")
    figures(summary, figure_folder)
    return summary




def ship(summary: dict, runs: list[Run]) -> Path:
    """The runs sweep.ship_choice picks, one per variant of lesson 09, become the shipped recall checkpoints."""
    from diffattn.training import shipped

    key, seed = ship_choice(summary)
    chosen = {_variant_of(r): r for r in runs if _cell_of(r).key == key and r.seed == seed}
    require(set(VARIANTS) <= set(chosen), f"the runs of cell {key}, seed {seed} are not all finished")
    return shipped.ship_recall({n: chosen[n].out for n in VARIANTS},
                               {n: {"cell": key, "seed": seed, "run": chosen[n].out.name} for n in VARIANTS},
                               "diffattn sweep --ship")
