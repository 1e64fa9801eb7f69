"""Lesson 09's recall sweep, read back from its committed summary (outputs/sweep/summary.json, `python -m diffattn
sweep`): the numbers the lesson quotes, without the learning curves, and the lines its output prints."""

from __future__ import annotations

from diffattn.eval.sweep import MECHANISM, VARIANT_LABELS


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
            cells[key]["variants"][name] = {
                "seeds": v["seeds"], "learned": v["learned"],
                "final": [r["final_accuracy"] for r in runs],
                "vs_null": [r["vs_null"] for r in runs],
                "leaves_plateau_at": [r["leaves_plateau_at"] for r in runs],
                "vs_control": v.get("vs_control", []),
            }
    passes = summary.get("training", [])
    return {"centre": summary["centre"], "margin_share": summary["margin_share"], "cells": cells,
            "wall_s": sum(p["wall_s"] for p in passes), "runs": sum(v["seeds"] for c in cells.values()
                                                                   for v in c["variants"].values()),
            "machine": passes[-1]["machine"] if passes else {}}


def lines(sweep: dict) -> list[str]:
    """The sweep as the lesson prints it: seeds that learned per cell and variant, then every seed's final accuracy."""
    if not sweep:
        return []
    names = [n for n in VARIANT_LABELS if n not in MECHANISM]
    out = ["", f"the recall sweep (outputs/sweep/, {sweep['runs']} runs): seeds that learned / seeds run, "
               f"by the criterion (accuracy − null ≥ {sweep['margin_share']:.0%} of 1 − null, interval included)",
           f"  {'cell':<22}{'null':>6}" + "".join(f"{VARIANT_LABELS[n]:>15}" for n in names)]
    for key, cell in sweep["cells"].items():
        out.append(f"  {key:<22}{cell['null']:>6.2f}" + "".join(
            f"{cell['variants'][n]['learned']}/{cell['variants'][n]['seeds']:<1}".rjust(15) if n in cell["variants"]
            else f"{'–':>15}" for n in names))
    out.append("  final accuracy per seed")
    for key, cell in sweep["cells"].items():
        for n, v in cell["variants"].items():
            out.append(f"  {key:<22}{VARIANT_LABELS[n]:<17}" + ", ".join(f"{a:.2f}" for a in v["final"]))
    return out
