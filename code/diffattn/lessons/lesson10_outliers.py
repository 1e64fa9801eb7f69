"""Lesson 10: activation outliers and low-bit attention on the cpu-tiny checkpoints.

  outliers  per layer, top-1 and median of |attention logits| and |hidden states| on 16 held-out text windows
            (the `text` checkpoints; diffattn.eval.outliers), as in the paper's Table 5
  quantize  attention logits quantized to 16/8/6/4 bits (per-map symmetric absmax, diffattn.eval.quantize):
            text validation loss (the `text` checkpoints) and multi-needle accuracy (the `needles` checkpoints),
            as in the paper's Fig. 8
  measured  the committed `eval suite` results of larger presets (outputs/eval/cpu-small/, `make train-small`), read
            back with diffattn.eval.saved: outliers on the `needles` checkpoints' validation data, quantized retrieval

Runs on one CPU thread, on the checkpoints that ship with the course (`diffattn.training.shipped`, outputs/models/cpu-tiny/).
"""

from __future__ import annotations

from pathlib import Path

from diffattn.training import shipped
from diffattn.training.checkpoint import load_model
from diffattn.nn.cpu import one_thread
from diffattn.data import make_task
from diffattn.eval import outliers, quantize, needle_accuracy as retrieval, saved
from diffattn.pure.variants import EVALUATED, LABELS
from diffattn.core.numberkinds import Bound, Stable

REQUIRES = ("torch", "tqdm", "safetensors")  # third-party packages (diffattn.lessons reads this without importing)
TITLE = "Activation outliers and low-bit attention"
# Its float work runs in one thread (one_thread), so the thread count of the machine cannot change its numbers.
RUNS_IN_ONE_THREAD = True
PRESET = "cpu-tiny"
VARIANTS = EVALUATED
WINDOWS = 16
SAMPLES = 4  # needles examples per (layout, length, depth) cell, per bit width

# The weights are fixed (diffattn.training.shipped), so only rounding moves: rerun under ATEN_CPU_CAPABILITY=default, avx2 and
# avx512 (AMD EPYC, torch 2.13, 2026-12-01), every count, accuracy and interval was identical and every float moved by
# at most 3e-6 relative. Counts are decided by a margin rule (diffattn.eval.needle_accuracy.MARGIN); the decision closest to
# its threshold sat 4.0e-4 away from it, far beyond what rounding moves a logit. ROUNDING is about 5x the largest
# move seen.
# The histograms are for the figures only (a value on a bin edge moves a count by one): Bound(at_least=0), never quoted.
ROUNDING = Stable(rel=1e-5, abs=1e-7)
NUMBER_KINDS = {
    "variants.*.outliers.*": ROUNDING,
    "variants.*.histograms.*": Bound(at_least=0),
    "variants.*.text_loss.*": ROUNDING,
    "variants.*.retrieval.*.answer_loss": ROUNDING,
    "recall.models.*.outliers.*": ROUNDING,
    # quantizing rounds logit / step to an integer, so a kernel path's last-bit change can move a logit across a
    # rounding edge: under avx2 a recall model's 16-bit answer loss moved by 1.9e-5 relative (AMD EPYC, 2026-12-06);
    # never printed, and no accuracy moved
    "recall.models.*.retrieval.*.answer_loss": Stable(rel=2e-4, abs=1e-6),
}


def run(progress: bool = True) -> dict:
    text_dirs = shipped.checkpoints(PRESET, "text", VARIANTS)
    needle_dirs = shipped.checkpoints(PRESET, "needles", VARIANTS)
    out = {"preset": PRESET, "bits": list(quantize.BITS), "windows": WINDOWS, "samples_per_cell": SAMPLES,
           "variants": {}}
    with one_thread():
        for variant in VARIANTS:
            model, config = load_model(text_dirs[variant])
            t = model.config.max_seq_len
            inputs, targets = make_task("text", t).validation(WINDOWS, t)
            stats = outliers.outliers(model, inputs)
            text_loss = {"unquantized": quantize.quantized_loss(model, inputs, targets, None)}
            text_loss |= {str(b): quantize.quantized_loss(model, inputs, targets, b) for b in quantize.BITS}
            needles, _ = load_model(needle_dirs[variant])
            accuracy = quantize.quantized_retrieval(needles, quantize.BITS, [t], SAMPLES, progress=progress)
            out["variants"][variant] = {
                "outliers": {"logits": stats["logits"], "hidden": stats["hidden"]},
                "histograms": stats["histograms"], "text_loss": text_loss,
                "retrieval": {k: {key: r[key] for key in ("answered", "asked", "accuracy", "ci95", "answer_loss",
                                                          "null_best", "null_rule", "vs_null")}
                              for k, r in accuracy.items()},
            }
    out["measured"] = measured()
    out["recall"] = recall_models()
    return retrieval.without_flags(out)  # per-query flags stay in the eval JSON files


RECALL_BITS = (*quantize.BITS, 3, 2)  # down to where a model that retrieves stops


def recall_models() -> dict:
    """Lesson 09's shipped recall checkpoints (mqar, trained until some variant retrieves): outliers on their own
    validation data, and accuracy beside its null and the criterion's verdict with the attention logits quantized.
    {} until they ship."""
    from diffattn.eval.sweep import VARIANT_LABELS, result_key
    from diffattn.lessons import recall_report

    if not (shipped.recall_root() / shipped.MANIFEST).is_file():
        return {}
    out: dict = {"examples": recall_report.EVAL_EXAMPLES, "bits": list(RECALL_BITS), "models": {}}
    with one_thread():
        for name, directory in shipped.recall_checkpoints().items():
            model, config = load_model(directory)
            task, seq_len = config["task"], config["train"]["seq_len"]
            inputs, _ = make_task(task["name"], seq_len, options=task["options"]).validation(WINDOWS, seq_len)
            stats = outliers.outliers(model, inputs)
            items = recall_report.fresh_examples(config)
            scored = {"unquantized": retrieval.summarise(retrieval.run_batches(model, items))}
            scored |= {str(b): retrieval.summarise(retrieval.run_batches(model, items, quantizer=quantize.absmax_quantizer(b)))
                       for b in RECALL_BITS}
            out["models"][result_key(name)] = {
                "label": VARIANT_LABELS[name], "outliers": {"logits": stats["logits"], "hidden": stats["hidden"]},
                "retrieval": {k: {key: r[key] for key in ("accuracy", "ci95", "answer_loss", "null_best", "null_rule",
                                                          "vs_null", "retrieves")} for k, r in scored.items()}}
    return out


def measured() -> dict:
    """The committed `eval suite` outliers and quantized retrieval of the seed-0 `needles` checkpoints."""
    found = {}
    for preset, s in saved.suites().items():
        found[preset] = {"machine": saved.machine_line(s["summary"]["machine"]),
                         "samples_per_cell": s["summary"]["samples_per_cell"],
                         "variants": {variant: {"outliers": {k: kinds["outliers"][k] for k in ("logits", "hidden")},
                                                "retrieval": kinds["quantize"]}
                                      for variant, kinds in s["variants"].items()}}
    return found


def outlier_rows(v: dict, row) -> list[str]:
    names = list(v)
    lines = []
    for part, label in (("logits", "attention logits"), ("hidden", "hidden states")):
        for layer in range(len(v[names[0]]["outliers"][part])):
            lines.append(row(f"{label}, layer {layer}", [
                f"{s['top1']:.1f} / {s['median']:.2f} ({s['ratio']:.0f}×)"
                for s in (v[n]["outliers"][part][layer] for n in names)]))
    return lines


def accuracy_rows(v: dict, keys: list[str], row) -> list[str]:
    """Accuracy [95% clustered by example] / the best key-free null on the same queries (the same for every row)."""
    return [row(f"needles accuracy, {key if key == 'unquantized' else key + ' bits'}", [
        f"{r['accuracy']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] / {r['null_best']:.2f}"
        for r in (v[n]["retrieval"][key] for n in v)]) for key in keys]


def report(results: dict) -> str:
    v = results["variants"]
    names = list(v)

    def row(label: str, cells) -> str:
        return f"  {label:<30}" + "".join(f"{cell:>25}" for cell in cells)

    keys = ["unquantized"] + [str(b) for b in results["bits"]]
    lines = [f"shipped {results['preset']} `text` checkpoints (outputs/models), {results['windows']} validation windows: |value| top-1 / median "
             f"(ratio)", row("", [LABELS[n] for n in names])] + outlier_rows(v, row)
    lines += ["", "attention logits quantized (per-map symmetric absmax):", row("", [LABELS[n] for n in names])]
    for key in keys:
        label = key if key == "unquantized" else f"{key} bits"
        lines.append(row(f"text loss, {label}", [f"{v[n]['text_loss'][key]:.2f}" for n in names]))
    lines += accuracy_rows(v, keys, row)
    for preset, m in results["measured"].items():
        mv = m["variants"]
        lines += ["", f"{preset} `needles` checkpoints, seed 0 (committed in outputs/eval/{preset}; {m['machine']}): "
                      f"|value| top-1 / median (ratio) on their validation data", row("", [LABELS[n] for n in mv])]
        lines += outlier_rows(mv, row)
        lines += [f"  attention logits quantized, {m['samples_per_cell']} examples per cell:"]
        lines += accuracy_rows(mv, [k for k in keys if k in next(iter(mv.values()))["retrieval"]], row)
    lines += recall_rows(results.get("recall", {}))
    return "\n".join(lines)


def recall_rows(recall: dict) -> list[str]:
    """Lesson 09's recall checkpoints: outliers, then accuracy [95%] / null at each bit width, '*' where the model
    retrieves by lesson 09's criterion."""
    if not recall:
        return []

    def row(label: str, cells) -> str:
        return f"  {label:<30}" + "".join(f"{cell:>27}" for cell in cells)

    m = recall["models"]
    names = list(m)
    lines = ["", "lesson 09's shipped recall checkpoints (mqar), their validation data: |value| top-1 / median (ratio)",
             row("", [m[n]["label"] for n in names])] + outlier_rows(m, row)
    lines += [f"  attention logits quantized, {recall['examples']} fresh examples: accuracy [95%] / null "
              "(* retrieves by lesson 09's criterion)"]
    for key in ["unquantized"] + [str(b) for b in recall["bits"]]:
        lines.append(row(f"mqar accuracy, {key if key == 'unquantized' else key + ' bits'}", [
            f"{r['accuracy']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] / {r['null_best']:.2f}"
            + ("*" if r["retrieves"] else "") for r in (m[n]["retrieval"][key] for n in names)]))
    return lines


def figures(results: dict, outdir: Path) -> list[Path]:
    from diffattn.core.plotting import new_figure, save

    v = results["variants"]
    paths = []
    for part, label in (("logits", "|attention logit|"), ("hidden", "|hidden state|")):
        fig, ax = new_figure()
        for n, r in v.items():
            h = r["histograms"][part]
            centres = [(a * b) ** 0.5 for a, b in zip(h["edges"][:-1], h["edges"][1:])]
            ax.step(centres, h["counts"], where="mid", label=LABELS[n])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"{label} (log scale)")
        ax.set_ylabel("count")
        ax.set_title(f"Distribution of {label}, all layers, {results['preset']} text checkpoints")
        ax.legend(fontsize=8)
        paths.append(save(fig, outdir / f"10-histogram-{part}.png"))
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.8), dpi=110)
    keys = [str(b) for b in results["bits"]]
    for n, r in v.items():
        left.plot(results["bits"], [r["text_loss"][k] for k in keys], marker="o", label=LABELS[n])
        right.plot(results["bits"], [r["retrieval"][k]["accuracy"] for k in keys], marker="o", label=LABELS[n])
    for ax, label in ((left, "text validation loss"), (right, "needles accuracy")):
        ax.invert_xaxis()
        ax.set_xlabel("bits for the attention logits")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Low-bit attention logits (cf. paper Fig. 8)")
    paths.append(save(fig, outdir / "10-quantize.png"))
    return paths
