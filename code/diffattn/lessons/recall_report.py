"""Lesson 09's recall sweep, read back from its committed summary (outputs/sweep/summary.json, `diffattn
sweep`): the numbers the lesson quotes, without the learning curves, and the lines its output prints."""

from __future__ import annotations

from diffattn.eval.sweep import CONTROL, LR_CELLS, MECHANISM, VARIANT_LABELS, result_key


def numbers(summary: dict) -> dict:
    """Per cell and variant: seeds run and learned, each seed's final accuracy, accuracy − null and the step it left
    its plateau; per cell its null and margin; the training passes' wall time and machine."""
    if not summary:
        return {}
    cells = {}
    for key, cell in summary["cells"].items():
        cells[key] = {"null": cell["null"][cell["null_rule"]], "null_rule": cell["null_rule"],
                      "margin": cell["margin"], "queries": cell["queries"], "variants": {}}
        for name, v in cell["variants"].items():
            runs = v["runs"]
            left = [r["leaves_plateau_at"] for r in runs if r["leaves_plateau_at"] is not None]
            gaps = [c["difference"] for c in v.get("vs_control", [])]
            cells[key]["variants"][result_key(name)] = {
                "seeds": v["seeds"], "learned": v["learned"],
                "final": [r["final_accuracy"] for r in runs],
                "vs_null": [r["vs_null"] for r in runs],
                "leaves_plateau_at": [r["leaves_plateau_at"] for r in runs],
                "vs_control": v.get("vs_control", []),
                # what the lesson quotes of them: the first and last step a run left the plateau, the range of the
                # paired differences to the control
                "leaves_range": [min(left), max(left)] if left else None,
                "vs_control_range": [min(gaps), max(gaps)] if gaps else None,
            }
    passes = summary.get("training", [])
    return {"centre": summary["centre"], "margin_share": summary["margin_share"], "cells": cells,
            "seed_test": seed_test(summary),
            "wall_s": sum(p["wall_s"] for p in passes), "runs": sum(v["seeds"] for c in cells.values()
                                                                   for v in c["variants"].values()),
            "machine": passes[-1]["machine"] if passes else {}}


def seed_test(summary: dict) -> dict:
    """Fisher's exact test on the deciding cell's seed counts: DIFF V2's seeds after the pilot seed 0 (which chose the
    cell) against every seed of baseline_2h, its same-width control. Two-sided; seeds taken as independent draws."""
    from scipy.stats import fisher_exact

    cell = summary["cells"][LR_CELLS[0].key]["variants"]
    v2 = [r["learned"] for r in cell["diff_v2"]["runs"] if r["seed"] != 0]
    control = [r["learned"] for r in cell[CONTROL]["runs"]]
    table = [[sum(v2), len(v2) - sum(v2)], [sum(control), len(control) - sum(control)]]
    return {"diff_v2_learned": sum(v2), "diff_v2_seeds": len(v2), "control_learned": sum(control),
            "control_seeds": len(control), "p_two_sided": float(fisher_exact(table).pvalue)}


def lines(sweep: dict) -> list[str]:
    """The sweep as the lesson prints it: seeds that learned per cell and variant, then every seed's final accuracy."""
    if not sweep:
        return []
    names = [n for n in VARIANT_LABELS if n not in MECHANISM]
    out = ["", f"the recall sweep (outputs/sweep/, {sweep['runs']} runs): seeds that learned / seeds run, "
               f"by the criterion (accuracy − null ≥ {sweep['margin_share']:.0%} of 1 − null, interval included)",
           f"  {'cell':<32}{'null':>6}" + "".join(f"{VARIANT_LABELS[n]:>15}" for n in names)]
    labels = {result_key(n): label for n, label in VARIANT_LABELS.items()}
    for key, cell in sweep["cells"].items():
        found = {result_key(n): cell["variants"].get(result_key(n)) for n in names}
        out.append(f"  {key:<32}{cell['null']:>6.2f}" + "".join(
            f"{v['learned']}/{v['seeds']:<1}".rjust(15) if v else f"{'–':>15}" for v in found.values()))
    for key, cell in sweep["cells"].items():
        controls = [result_key(n) for n in MECHANISM if result_key(n) in cell["variants"]]
        if controls:
            out.append(f"  {key:<32}mechanism controls: " + ", ".join(
                f"{labels[n]} {cell['variants'][n]['learned']}/{cell['variants'][n]['seeds']}" for n in controls))
    out.append("  final accuracy per seed")
    for key, cell in sweep["cells"].items():
        for n, v in cell["variants"].items():
            out.append(f"  {key:<32}{labels[n]:<17}" + ", ".join(f"{a:.2f}" for a in v["final"]))
    return out


EVAL_EXAMPLES, EVAL_SEED, ALLOCATION_EXAMPLES = 128, 0, 32


def fresh_examples(config: dict) -> list:
    """The EVAL_EXAMPLES fresh examples of a recall checkpoint's own layout (its recorded task, options and length):
    lessons 09, 10 and 11 score every shipped recall model on these same examples."""
    import torch

    from diffattn.data.retrieval import examples

    task = config["task"]
    return examples(task["name"], EVAL_EXAMPLES, config["train"]["seq_len"],
                    torch.Generator().manual_seed(EVAL_SEED), **task["options"])


def shipped_models(progress: bool = False) -> dict:
    """The shipped recall checkpoints (one sweep run per variant, diffattn.training.shipped.recall_checkpoints) scored on
    fresh examples of their own layout: accuracy with the criterion, each variant − baseline_2h paired on the same
    queries, and where each asked key's row puts its effective attention among the records. {} until they ship."""
    from diffattn.training import shipped
    from diffattn.training.checkpoint import load_model, read_metrics
    from diffattn.nn.cpu import one_thread
    from diffattn.eval import allocation, needle_accuracy as retrieval
    from diffattn.eval.sweep import CONTROL
    from diffattn.core.stats import clustered_difference

    if not (shipped.recall_root() / shipped.MANIFEST).is_file():
        return {}
    dirs, runs = shipped.recall_checkpoints(), shipped.recall_manifest()["runs"]
    out: dict = {"runs": runs, "examples": EVAL_EXAMPLES, "variants": {}}
    results = {}
    with one_thread():
        for name, directory in dirs.items():
            model, config = load_model(directory)
            items = fresh_examples(config)
            results[name] = retrieval.summarise(retrieval.run_batches(model, items))
            trained = read_metrics(directory)[-1]  # the run as it shipped: its last step and its training time
            out["variants"][result_key(name)] = {"label": VARIANT_LABELS[name], "retrieval": results[name],
                                                 "steps": trained["step"], "train_s": trained["time_s"],
                                     "allocation": allocation.record_allocation(model, items[:ALLOCATION_EXAMPLES])}
    for name, r in results.items():  # the same examples for every variant: paired per query, clustered by example
        if name != CONTROL:
            out["variants"][result_key(name)]["vs_control"] = clustered_difference(
                [float(c == "1") for c in r["answered_flags"]],
                [float(c == "1") for c in results[CONTROL]["answered_flags"]], r["query_examples"])
    return retrieval.without_flags(out)


def model_lines(m: dict) -> list[str]:
    """The shipped recall checkpoints: accuracy [95%] / null, the criterion, − baseline_2h, and the attention shares."""
    if not m:
        return []
    first = next(iter(m["runs"].values()))
    out = ["", f"the shipped recall checkpoints (cell {first['cell']}, seed {first['seed']}), {m['examples']} fresh "
               "examples: accuracy [95%] / null; − null; − baseline_2h on the same queries; share of |effective "
               "attention| at each asked key's row on its answer record / on the other records (last layer, best head)"]
    for v in m["variants"].values():
        r, a = v["retrieval"], v["allocation"]["best_head"]
        vs = v.get("vs_control")
        out.append(f"  {v['label']:<16}{r['accuracy']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] / "
                   f"{r['null_best']:.2f}  {r['vs_null']['difference']:+.2f} [{r['vs_null']['ci95'][0]:+.2f}, "
                   f"{r['vs_null']['ci95'][1]:+.2f}]  {'retrieves' if r['retrieves'] else 'does not retrieve':<18}"
                   + (f"{vs['difference']:+.2f} [{vs['ci95'][0]:+.2f}, {vs['ci95'][1]:+.2f}]" if vs else f"{'–':<16}")
                   + f"   {a['answer']:+.2f} / {a['other_records']:+.2f}")
    return out
