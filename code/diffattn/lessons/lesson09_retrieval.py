"""Lesson 09: multi-needle retrieval and attention allocation on the cpu-tiny `needles` checkpoints.

  retrieval   accuracy per (N needles, R asked keys) as in the paper's Table 2, per context length and needle depth,
              with 95% intervals clustered by example, the null models on the same queries (diffattn.data.nulls)
              and the paired test against the best key-free one; every variant sees the same examples, so each
              DIFF variant − the baseline is a paired difference too
  allocation  share of |effective attention| on the answer record vs the haystack at the query's `=` row
              (diffattn.eval.allocation), per layer, and for the last layer's most answer-focused head by depth
  example     one example's effective map per variant, for the heatmaps
  measured    the committed `eval suite` results of larger presets (outputs/eval/cpu-small/, `make train-small`),
              read back with diffattn.eval.saved: seed 0's tables and every seed's 4-6-needle accuracy
  study       the low-floor tasks of the CPU study (outputs/study/summary.json, `make train-small`): multi-byte
              needles and `rebind`, with learning curves against their nulls
  sweep       the recall sweep (outputs/sweep/summary.json, `diffattn sweep`): per cell and variant, the
              seeds that learned by the effect-size criterion (diffattn.eval.criterion)

The checkpoints ship with the course (`diffattn.training.shipped`, outputs/models/cpu-tiny/needles/: lesson 08's trainer, seed
0), so every machine evaluates the same weights. Everything runs on one CPU thread.
"""

from __future__ import annotations

from pathlib import Path

from diffattn.training import shipped
from diffattn.training.checkpoint import load_model, read_metrics
from diffattn.nn.cpu import one_thread
from diffattn.eval import allocation, needle_accuracy as retrieval, saved, sweep_report
from diffattn.lessons import recall_report
from diffattn.pure.variants import REFERENCE, EVALUATED, LABELS
from diffattn.core.numberkinds import Bound, Stable
from diffattn.core.stats import t_interval

REQUIRES = ("torch", "tqdm", "safetensors")  # third-party packages (diffattn.lessons reads this without importing)
TITLE = "Multi-needle retrieval and attention allocation"
# Its float work runs in one thread (one_thread), so the thread count of the machine cannot change its numbers.
RUNS_IN_ONE_THREAD = True
PRESET, TASK = "cpu-tiny", "needles"
VARIANTS = EVALUATED
SAMPLES = 10  # examples per (layout, length, depth) cell: 4 × 2 × 5 × 10 = 400 examples, 700 asked keys per variant
ALLOCATION_SAMPLES = 8  # examples per depth for the attention shares

# The weights are fixed (diffattn.training.shipped), so only rounding moves: rerun under ATEN_CPU_CAPABILITY=default, avx2 and
# avx512 (AMD EPYC, torch 2.13, 2026-12-01), every count, accuracy and interval was identical and every float moved by
# at most 3e-6 relative. Counts are decided by a margin rule (diffattn.eval.needle_accuracy.MARGIN); the decision closest to
# its threshold sat 1.6e-4 away from it, far beyond what rounding moves a logit. ROUNDING is about 5x the largest
# move seen.
# The best head's index is decided by near-ties between similar heads: reported for the heatmap, never quoted.
ROUNDING = Stable(rel=1e-5, abs=1e-7)
NUMBER_KINDS = {
    "variants.*.retrieval.*.answer_loss": ROUNDING,
    "variants.*.allocation.best_head.head": Bound(at_least=0),
    "variants.*.allocation.*": ROUNDING,
    "recall_models.variants.*.retrieval.answer_loss": ROUNDING,
    "recall_models.variants.*.allocation.best_head.head": Bound(at_least=0),
    "recall_models.variants.*.allocation.*": ROUNDING,
}


def checkpoints() -> dict[str, Path]:
    return shipped.checkpoints(PRESET, TASK, VARIANTS)


def run(progress: bool = True) -> dict:
    dirs = checkpoints()
    out = {"preset": PRESET, "task": TASK, "samples_per_cell": SAMPLES, "variants": {}}
    tables = {}
    with one_thread():
        for variant, directory in dirs.items():
            model, config = load_model(directory)
            lengths = sorted({model.config.max_seq_len // 2, model.config.max_seq_len})
            alloc = allocation.allocation(model, model.config.max_seq_len, ALLOCATION_SAMPLES)
            tables[variant] = retrieval.table2(model, lengths, SAMPLES, progress=progress, label=f"{variant} retrieval")
            out["variants"][variant] = {
                "val_loss": read_metrics(directory)[-1]["val_loss"],
                "retrieval": tables[variant],
                "allocation": {"length": alloc["length"], "layer_mean": alloc["layer_mean"],
                               "best_head": alloc["best_head"]},
            }
            out["lengths"] = lengths
    for variant in VARIANTS[1:]:  # every variant saw the same examples: paired per query, clustered by example
        out["variants"][variant]["vs_baseline"] = retrieval.paired(tables[variant], tables["baseline"])
    out["measured"] = measured()
    out["study"] = saved.study().get("retrieval", {})
    out["sweep"] = recall_report.numbers(saved.sweep())
    out["recall_models"] = recall_report.shipped_models(progress)
    return retrieval.without_flags(out)


def measured() -> dict:
    """The committed `eval suite` results (cpu-small, GPU) in this lesson's layout, plus the 4-6-needle accuracy of
    every training seed with its null; {} for presets not yet run."""
    found = {}
    for preset, s in saved.suites().items():
        summary = s["summary"]
        tables = {variant: [s["variants"][variant]["retrieval"], *s["seeds"][variant]] for variant in summary["variants"]}
        v = {variant: {"val_loss": r["runs"][0]["val_loss"], "retrieval": s["variants"][variant]["retrieval"],
                       "allocation": {k: s["variants"][variant]["allocation"][k]
                                      for k in ("length", "layer_mean", "best_head")},
                       "many_needles": [t["many_needles"] for t in tables[variant]],
                       "overall": [t["overall"] for t in tables[variant]],
                       "one_needle": [t["layouts"]["N1R1"] for t in tables[variant]],
                       "answer_loss": [run["val_loss"] for run in r["runs"]]}
             for variant, r in summary["variants"].items()}
        for variant, r in v.items():
            r["many_needles_t"] = t_interval(x["accuracy"] for x in r["many_needles"])
            if variant != REFERENCE:  # the same examples for every seed and variant: paired within each seed
                r["vs_baseline"] = [retrieval.paired(a, b)["many_needles"]
                                    for a, b in zip(tables[variant], tables["baseline"])]
                r["many_needles_gap"] = t_interval(a["accuracy"] - b["accuracy"] for a, b in
                                                   zip(r["many_needles"], v["baseline"]["many_needles"]))
        found[preset] = {"machine": saved.machine_line(summary["machine"]), "seeds": summary["seeds"],
                         "samples_per_cell": summary["samples_per_cell"], "variants": v}
    return found


def row(label: str, cells) -> str:
    return f"  {label:<24}" + "".join(f"{cell:>26}" for cell in cells)


def interval(r: dict) -> str:
    """'0.38 [0.34, 0.41] / 0.55': accuracy, its interval clustered by example, the best key-free null."""
    return f"{r['accuracy']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] / {r['null_best']:.2f}"


def signed(r: dict) -> str:
    """'+0.09 [+0.05, +0.12]' from a paired test (clustered_difference or t_interval)."""
    value = r.get("difference", r.get("mean"))
    return f"{value:+.2f} [{r['ci95'][0]:+.2f}, {r['ci95'][1]:+.2f}]" if r.get("ci95") else f"{value:+.2f}"


def tables(v: dict) -> list[str]:
    """Retrieval per layout, length and depth (accuracy [95%] / null), − null, − baseline, then attention shares."""
    names = list(v)
    first = v[names[0]]["retrieval"]
    keyed = [("all asked keys", "overall")] + [(f"  N={k[1]}, R={k[3]}", f"layouts.{k}") for k in first["layouts"]]
    keyed += [(f"  context {k}", f"lengths.{k}") for k in first["lengths"]]
    keyed += [(f"  depth {float(k):.0%}", f"depths.{k}") for k in first["depths"]]

    def cell(n: str, key: str) -> dict:
        return retrieval.rows(v[n]["retrieval"])[key]

    lines = [row("accuracy [95%] / null", [LABELS[n] for n in names]),
             row("answer loss at the end", [f"{v[n]['val_loss']:.2f}" for n in names])]
    lines += [row(label, [interval(cell(n, key)) for n in names]) for label, key in keyed]
    lines += ["", row("accuracy − null [95%]", [LABELS[n] for n in names])]
    lines += [row(label, [signed(cell(n, key)["vs_null"]) for n in names]) for label, key in keyed]
    if any("vs_baseline" in v[n] and isinstance(v[n]["vs_baseline"], dict) for n in names):
        lines += ["", row("− baseline, paired [95%]", [LABELS[n] for n in names])]
        lines += [row(label, [signed(retrieval.rows(v[n]["vs_baseline"])[key]) if n != REFERENCE else "–"
                              for n in names]) for label, key in keyed]
    lines += ["", f"share of |effective attention| at the query's `=` row (N=4, R=2, context "
                  f"{v[names[0]]['allocation']['length']}): answer record / haystack", row("", [LABELS[n] for n in names])]
    for layer in range(len(v[names[0]]["allocation"]["layer_mean"]["answer"])):
        lines.append(row(f"layer {layer}, mean of heads", [
            f"{v[n]['allocation']['layer_mean']['answer'][layer]:+.2f} / "
            f"{v[n]['allocation']['layer_mean']['haystack'][layer]:+.2f}" for n in names]))
    lines.append(row("last layer, best head", [
        f"{v[n]['allocation']['best_head']['answer']:+.2f} / {v[n]['allocation']['best_head']['haystack']:+.2f}"
        for n in names]))
    return lines


def study_lines(study: dict) -> list[str]:
    """The low-floor tasks of the CPU study (outputs/study/, `make train-small`): nulls, final accuracy per seed,
    the first step each run beats its null, and the paired difference to the baseline."""
    lines = []
    for task, t in study.items():
        options = ", ".join(f"{k}={val}" for k, val in t["options"].items())
        lines += ["", f"{task} ({options}), cpu-recall, {len(t['variants']['baseline']['runs'])} seeds, "
                      f"{t['queries']} validation queries in {t['examples']} examples",
                  "  nulls: " + ", ".join(f"{k} {val:.3f}" for k, val in t["null"].items())
                  + f"; best key-free: {t['null_rule']}"]
        for n, r in t["variants"].items():
            finals = ", ".join(f"{x['final']['difference']:.2f}" for x in r["runs"])
            leaves = ", ".join(str(x["leaves_null_at"] or "never") for x in r["runs"])
            lines.append(f"  {LABELS[n]:<9} final accuracy per seed {finals}; beats the null from step {leaves}")
            if "vs_baseline" in r:
                lines.append(f"  {'':<9} − baseline over seeds {signed(r['vs_baseline'])}; per seed (paired by "
                             "query) " + ", ".join(signed(x) for x in r["vs_baseline"]["per_seed"]))
    return lines


def report(results: dict) -> str:
    lines = [f"shipped {results['preset']} checkpoints trained on `{results['task']}` (outputs/models); "
             f"{results['samples_per_cell']} examples per (layout, length, depth) cell; accuracy [95% interval "
             f"clustered by example] / the best key-free null on the same queries"] + tables(results["variants"])
    for preset, m in results["measured"].items():
        v = m["variants"]
        names = list(v)
        lines += ["", f"{preset} (committed in outputs/eval/{preset}; {m['machine']}): seed 0, "
                      f"{m['samples_per_cell']} examples per cell"] + tables(v)
        lines += ["", "N=4 and N=6 together (R=2), every training seed: accuracy [95%] / null",
                  row("", [LABELS[n] for n in names])]
        lines += [row(f"seed {seed}", [interval(v[n]["many_needles"][seed]) for n in names]) for seed in range(m["seeds"])]
        lines += [row(f"seed {seed}, − null", [signed(v[n]["many_needles"][seed]["vs_null"]) for n in names])
                  for seed in range(m["seeds"])]
        lines.append(row(f"mean [t 95%] over {m['seeds']} seeds", [
            f"{v[n]['many_needles_t']['mean']:.2f} [{v[n]['many_needles_t']['ci95'][0]:.2f}, "
            f"{v[n]['many_needles_t']['ci95'][1]:.2f}]" for n in names]))
        lines.append(row("− baseline over seeds [t 95%]",
                         [signed(v[n]["many_needles_gap"]) if n != REFERENCE else "–" for n in names]))
        lines += [row(f"seed {seed}, − baseline paired", [signed(v[n]["vs_baseline"][seed]) if n != REFERENCE
                                                          else "–" for n in names]) for seed in range(m["seeds"])]
        lines += ["", "every training seed: all asked keys and N=1 (R=1): accuracy [95%] / null; answer loss",
                  row("", [LABELS[n] for n in names])]
        for seed in range(m["seeds"]):
            lines.append(row(f"seed {seed}, all asked keys", [interval(v[n]["overall"][seed]) for n in names]))
            lines.append(row(f"seed {seed}, N=1", [interval(v[n]["one_needle"][seed]) for n in names]))
            lines.append(row(f"seed {seed}, answer loss", [f"{v[n]['answer_loss'][seed]:.2f}" for n in names]))
    if results.get("study"):
        lines += ["", "the CPU study's low-floor tasks (committed in outputs/study/)"] + study_lines(results["study"])
    lines += recall_report.lines(results.get("sweep", {}))
    lines += recall_report.model_lines(results.get("recall_models", {}))
    return "\n".join(lines)


def figures(results: dict, outdir: Path) -> list[Path]:
    paths = [retrieval_bars(results["variants"], f"{results['preset']} checkpoints", outdir / "09-retrieval.png"),
             heatmaps(results, outdir)]
    for preset, m in results["measured"].items():
        paths.append(retrieval_bars(m["variants"], f"{preset} checkpoints (committed), seed 0",
                                    outdir / f"09-retrieval-{preset}.png"))
    if results.get("sweep"):  # the phase diagram and the centre's learning curves, from the committed summary
        paths += sweep_report.figures(saved.sweep(), outdir)
    return paths


def retrieval_bars(v: dict, title: str, path: Path) -> Path:
    from diffattn.core.plotting import new_figure, save

    names = list(v)
    layouts = list(v[names[0]]["retrieval"]["layouts"])
    fig, ax = new_figure(7.0, 4.0)
    width = 0.8 / len(names)
    for i, n in enumerate(names):
        rows = [v[n]["retrieval"]["layouts"][k] for k in layouts]
        xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(layouts))]
        ys = [r["accuracy"] for r in rows]
        err = [[y - r["ci95"][0] for y, r in zip(ys, rows)], [r["ci95"][1] - y for y, r in zip(ys, rows)]]
        ax.bar(xs, ys, width, yerr=err, capsize=3, label=LABELS[n])
        ax.scatter(xs, [r["null_best"] for r in rows], marker="_", s=300, color="black",
                   label="best key-free null" if i == 0 else None, zorder=3)
    ax.set_xticks(range(len(layouts)), [k.replace("N", "N=").replace("R", ", R=") for k in layouts])
    ax.set_ylim(0, 1)
    ax.set_ylabel("exact-match accuracy (95%, clustered by example)")
    ax.set_title(f"Multi-needle retrieval, {title} (cf. paper Table 2)")
    ax.legend(fontsize=8)
    return save(fig, path)


def heatmaps(results: dict, outdir: Path) -> Path:
    """One example (N=4, R=2, depth 50%) per variant: the last layer's most answer-focused head."""
    import matplotlib.pyplot as plt

    from diffattn.core.plotting import save

    dirs = checkpoints()
    fig, axes = plt.subplots(1, len(dirs), figsize=(4.2 * len(dirs), 4.2), dpi=110)
    for ax, (variant, directory) in zip(axes, dirs.items()):
        model, _ = load_model(directory)
        best = results["variants"][variant]["allocation"]["best_head"]
        with one_thread():
            ex = allocation.example_map(model, model.config.max_seq_len, head=best["head"])
        w = ex["map"]
        limit = float(w[w != 0].abs().quantile(0.99))  # the first rows' near-one-hot weights would wash out the rest
        ax.imshow(w, cmap="RdBu_r", vmin=-limit, vmax=limit)
        for row in ex["answer_rows"]:
            ax.axhline(row, color="black", linewidth=0.5, linestyle=":")
        for s, t in ex["records"]:
            ax.axvspan(s - 0.5, t - 0.5, color="gold", alpha=0.25)
        ax.set_title(f"{LABELS[variant]}: layer {ex['layer']}, head {ex['head']}", fontsize=9)
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
    fig.suptitle("Effective attention on one example (red > 0, blue < 0, clipped at the 99th percentile; gold: the asked "
                 "records; dotted: the queries' `=` rows)", fontsize=10)
    return save(fig, outdir / "09-allocation-heatmaps.png")
