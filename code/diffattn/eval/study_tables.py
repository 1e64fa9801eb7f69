"""The study's summary (diffattn.eval.study_summary) as a table and figures: outputs/study/table.txt and *.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from diffattn.pure.variants import REFERENCE, EVALUATED, LABELS, VARIANTS, colour


def ci(r: dict, digits: int = 3, signed: bool = True) -> str:
    """'+0.158 [+0.101, +0.215]' from a t_interval or clustered_difference record."""
    value = r.get("mean", r.get("difference"))
    f = f"{{:+.{digits}f}}" if signed else f"{{:.{digits}f}}"
    if r.get("ci95") is None:
        return f.format(value)
    return f"{f.format(value)} [{f.format(r['ci95'][0])}, {f.format(r['ci95'][1])}]"


def text_lines(t: dict) -> list[str]:
    n = len(t["seeds"])
    lines = [f"cpu-small text, {n} seeds: final validation loss, mean [t 95% interval]; − baseline paired by seed"]
    for v in VARIANTS:
        r = t["variants"][v]
        gap = "–" if v == REFERENCE else ci(r["vs_baseline"])
        lines.append(f"  {LABELS[v]:<10} {ci(r, signed=False):<28} − baseline {gap}")
    steps = t["variants"]["baseline"]["steps"]
    lines.append("  gap to the baseline at step " + ", ".join(str(s) for s in steps))
    for v in VARIANTS[1:]:
        lines.append(f"  {LABELS[v]:<10} " + ", ".join(f"{g['mean']:+.2f}" for g in t["variants"][v]["gap_by_step"]))
    return lines


def init_lines(i: dict) -> list[str]:
    lines = [f"DIFF V1's 2×2 on cpu-small text, {len(i['seeds'])} seeds: λ's start × head scale; mean [t 95%]",
             f"  {'λ start × head scale':<26}{'val loss':<28}{'− paper V1':<30}− baseline"]
    for c in i["cells"].values():
        name = f"{c['lambda_start']} × {c['head_scale']}"
        lines.append(f"  {name:<26}{ci(c, signed=False):<28}{ci(c['vs_paper_v1']):<30}{ci(c['vs_baseline'])}")
    lines.append(f"  {'baseline':<26}{ci(i['baseline'], signed=False)}")
    for name, e in i["effects"].items():
        lines.append(f"  effect {name:<19}{ci(e)}")
    lines.append("  attention-branch RMS at initialisation / embedding RMS, per layer (mean over seeds)")
    for name, r in i["branch_rms"].items():
        lines.append(f"  {name:<44}" + " ".join(f"{x:5.1f}" for x in r["ratio"]) + f"   (embedding {r['embedding']:.4f})")
    return lines


def alternative_lines(a: dict) -> list[str]:
    lines = [f"other initialisations, {len(a['seeds'])} seeds: V1 − baseline under each (default {ci(a['default_gap'])})"]
    for r in a["changes"].values():
        change = f"; change of the gap {ci(r['gap_change'])}" if "gap_change" in r else " (V1 only)"
        lines.append(f"  {r['label']:<36} V1 − baseline {ci(r['gap'])}{change}; V1 itself {ci(r['diff_v1_vs_default'])}")
    return lines


def retrieval_lines(tasks: dict) -> list[str]:
    lines = []
    for task, t in tasks.items():
        options = ", ".join(f"{k}={v}" for k, v in t["options"].items())
        nulls = ", ".join(f"{k} {v:.3f}" for k, v in t["null"].items())
        lines += [f"{task} ({options}) on cpu-recall, {t['queries']} validation queries in {t['examples']} examples",
                  f"  nulls on those queries: {nulls}; best key-free: {t['null_rule']}"]
        for v in EVALUATED:
            r = t["variants"][v]
            leaves = ", ".join(str(x["leaves_null_at"]) if x["leaves_null_at"] else "never" for x in r["runs"])
            finals = ", ".join(f"{x['accuracy'][-1]:.2f}" for x in r["runs"])
            gap = f"; − baseline {ci(r['vs_baseline'], 2)}" if "vs_baseline" in r else ""
            lines.append(f"  {LABELS[v]:<10} final accuracy per seed {finals}; beats the null from step {leaves}{gap}")
    return lines


def format_table(s: dict) -> str:
    lines: list[str] = []
    for key, make in (("text", text_lines), ("init", init_lines), ("alternatives", alternative_lines),
                      ("retrieval", retrieval_lines)):
        if key in s:
            lines += make(s[key]) + [""]
    for t in (s.get("training") or {}).get("passes", []):
        m = t["machine"]
        lines.append(f"a training pass: {t['runs_trained']} of {t['runs_planned']} runs in {t['wall_s']:.0f} s of wall "
                     f"time, {t['jobs']} at a time, on {m['cpu']} ({m['cores']} cores), torch {m['torch']}, {m['date']}"
                     + (f" ({m['note']})" if "note" in m else ""))
    if s.get("training"):
        lines.append(f"the study's wall time: {s['wall_s']:.0f} s over {len(s['training']['passes'])} pass(es)")
    lines.append(f"every run's own training time, summed: {s['train_s']:.0f} s")
    return "\n".join(lines)


def figures(s: dict, out: Path) -> list[Path]:
    paths = []
    if "retrieval" in s:
        paths.append(retrieval_curves(s["retrieval"], out / "retrieval-curves.png"))
    if "text" in s:
        paths.append(gap_curves(s["text"], out / "text-gaps.png"))
    return paths



def retrieval_curves(tasks: dict[str, Any], path: Path) -> Path:
    """Per task: exact-match accuracy (top) and answer loss (bottom) against training tokens, one line per seed; the
    nulls as dashed lines (accuracy) and ln(alphabet) as the loss of a uniform guess."""
    from diffattn.core.plotting import new_figure, save

    fig, _ = new_figure(width=5.2 * len(tasks), height=7.0)
    fig.clf()
    panels = fig.subplots(2, len(tasks), squeeze=False)
    for column, (task, t) in enumerate(tasks.items()):
        top, bottom = panels[0][column], panels[1][column]
        xs = t.get("tokens", t["steps"])
        for v in EVALUATED:
            for i, run in enumerate(t["variants"][v]["runs"]):
                label = LABELS[v] if i == 0 else None
                top.plot(xs, run["accuracy"], color=colour(v), alpha=0.8, label=label)
                bottom.plot(xs, run["answer_loss"], color=colour(v), alpha=0.8, label=label)
        for rule, style in (("copy_any", ":"), ("copy_unanswered", "--"), ("copy_latest", (0, (5, 1, 1, 1))),
                            ("any_binding", "-.")):
            if rule in t["null"] and (rule != "any_binding" or t["null"][rule] < 1):
                top.axhline(t["null"][rule], color="black", linestyle=style, linewidth=1, label=f"null: {rule}")
        top.set_title(f"{task}: validation accuracy, {len(t['variants']['baseline']['runs'])} seeds per variant")
        top.set_ylim(0, 1)
        top.set_ylabel("exact-match accuracy")
        bottom.set_ylabel("answer loss (nats per answer byte)")
        bottom.set_xlabel("training tokens")
        for ax in (top, bottom):
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
    return save(fig, path)


def gap_curves(t: dict, path: Path) -> Path:
    """Each variant's validation loss − the baseline's at every evaluation, mean over seeds with its t interval."""
    from diffattn.core.plotting import new_figure, save

    fig, ax = new_figure(6.4, 4.0)
    steps = t["variants"]["baseline"]["steps"]
    for v in VARIANTS[1:]:
        g = t["variants"][v]["gap_by_step"]
        ax.plot(steps, [x["mean"] for x in g], color=colour(v), label=LABELS[v])
        ax.fill_between(steps, [x["ci95"][0] for x in g], [x["ci95"][1] for x in g], color=colour(v), alpha=0.2)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xlabel("training step")
    ax.set_ylabel("validation loss − baseline (nats per byte)")
    ax.set_title(f"cpu-small text: gap to the baseline, {len(t['seeds'])} seeds (t 95%)")
    ax.legend(fontsize=8)
    return save(fig, path)
