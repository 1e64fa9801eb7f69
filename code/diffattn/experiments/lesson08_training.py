"""Lesson 08: train the four matched models of lesson 07 on English text and compare them.

  presets    the three presets' shapes, budgets and parameter counts (exact: arithmetic on configs)
  variants   cpu-tiny on the built-in Shakespeare text, seed 0, every variant: validation loss curves, λ per layer (V1),
             mean σ(λ) per layer (V2). The checkpoints land in outputs/checkpoints/cpu-tiny/text/<variant>/, where
             lessons 09-11 read them
  measured   the comparisons committed under outputs/compare/<preset>-text/ by `python -m diffattn compare`
             (`make train-small`): seed spread and timings, with the machine they ran on. Read, not recomputed

Training is deterministic on one machine; on another CPU the kernels round differently and training amplifies it, so
every loss and λ here is Stable with a tolerance measured across kernel paths and thread counts (NUMBER_KINDS).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from diffattn import compare
from diffattn.data import text
from diffattn.model import GPT, matched_configs, parameter_breakdown
from diffattn.numberkinds import Stable
from diffattn.paths import outputs_dir
from diffattn.train import ATTENTION, LABELS, PRESETS

TITLE = "Training baseline, DIFF V1 and DIFF V2 side by side"
PRESET = "cpu-tiny"
TASK = "text"

# Measured by running this lesson with ATEN_CPU_CAPABILITY=default vs the machine's AVX path and with 1 vs 2 threads
# (see the lesson's "Run it"); the tolerance is several times the largest move seen.
LOSS = Stable(abs=2e-3)
NUMBER_KINDS = {
    "variants.*.runs.*.curve.val_loss.*": LOSS,
    "variants.*.runs.*.val_loss": LOSS,
    "variants.*.runs.*.train_loss": LOSS,
    "variants.*.runs.*.train_curve.*": LOSS,
    "variants.*.runs.*.lambda.*": Stable(abs=2e-3),
    "variants.*.runs.*.sigma_lambda.*": Stable(abs=2e-3),
    "variants.*.val_loss_mean": LOSS,
    "gaps.*": Stable(abs=4e-3),
}


def preset_table() -> dict:
    """Shape, budget and parameters of every preset (parameters counted on modules built on the meta device)."""
    table = {}
    for name, p in PRESETS.items():
        c = p.train
        with torch.device("meta"):
            params = {v: parameter_breakdown(GPT(cfg))["total"] for v, cfg in matched_configs(p.model).items()}
        table[name] = {"n_layer": p.model.n_layer, "d_model": p.model.d_model, "n_head": p.model.n_head,
                       "n_kv_head": p.model.n_kv_head, "head_dim": p.model.head_dim, "seq_len": c.seq_len,
                       "batch_size": c.batch_size, "steps": c.steps, "tokens": c.steps * c.batch_size * c.seq_len,
                       "lr": c.lr, "warmup_steps": c.warmup_steps, "device": c.device, "bf16": c.bf16,
                       "compile": c.compile, "params": params, "note": p.note}
    return table


def measured() -> dict:
    """The committed `compare` summaries (seed spread, timings, machine), condensed; {} for presets not yet run."""
    found = {}
    for name in PRESETS:
        path = outputs_dir() / "compare" / f"{name}-{TASK}" / "summary.json"
        if not path.is_file():
            continue
        s = json.loads(path.read_text())
        found[name] = {"seeds": len(s["seeds"]), "tokens": s["tokens"], "wall_s": s["wall_s"], "machine": s["machine"],
                       "variants": {v: {k: r[k] for k in ("val_loss_mean", "val_loss_std", "tokens_per_s")}
                                    | {"wall_s": [run["wall_s"] for run in r["runs"]]}
                                    for v, r in s["variants"].items()}}
    return found


def unigram_loss() -> float:
    """Cross-entropy (nats per byte) of the best model that ignores context: the byte frequencies of the training
    split, scored on themselves. A trained model's loss below this shows it uses context."""
    train_tokens, _ = text.split(text.read_corpus(), PRESETS[PRESET].train.seq_len)
    counts = torch.bincount(train_tokens, minlength=256).tolist()
    total = sum(counts)
    return -sum(n / total * math.log(n / total) for n in counts if n)


def run(progress: bool = True) -> dict:
    results = compare.compare(PRESET, TASK, seeds=(0,), progress=progress, timings=False)
    results["unigram_loss"] = unigram_loss()
    results["uniform_loss"] = math.log(256)
    v = results["variants"]
    results["gaps"] = {name: v[name]["val_loss_mean"] - v["baseline"]["val_loss_mean"] for name in v if name != "baseline"}
    results["gaps"]["diff_v2_vs_baseline_2h"] = v["diff_v2"]["val_loss_mean"] - v["baseline_2h"]["val_loss_mean"]
    results["presets"] = preset_table()
    results["measured"] = measured()
    return results


def report(results: dict) -> str:
    v, t = results["variants"], results["train"]

    def row(label: str, cells) -> str:
        return f"  {label:<28}" + "".join(f"{cell:>12}" for cell in cells)

    names = list(v)
    lines = [f"{results['preset']} on {results['task']} (built-in Shakespeare, byte tokens): {t['steps']} steps × "
             f"{t['batch_size']} sequences × {t['seq_len']} bytes = {results['tokens']:,} tokens, AdamW lr {t['lr']} "
             f"(warmup {t['warmup_steps']}, cosine), seed 0",
             f"  no context: uniform over 256 bytes = {results['uniform_loss']:.3f}, byte frequencies (unigram) = "
             f"{results['unigram_loss']:.3f} nats per byte",
             row("", [LABELS[n] for n in names]),
             row("parameters", [f"{v[n]['params']:,}" for n in names]),
             row("attention per layer", [f"{v[n]['attention_per_layer']:,}" for n in names]),
             row("training FLOPs per token", [f"{v[n]['flops_per_token'] / 1e3:,.0f}k" for n in names]),
             row("validation loss, first eval", [f"{v[n]['runs'][0]['curve']['val_loss'][0]:.2f}" for n in names]),
             row("validation loss, last", [f"{v[n]['val_loss_mean']:.2f}" for n in names]),
             row("  vs baseline", ["–" if n == "baseline" else f"{results['gaps'][n]:+.2f}" for n in names])]
    run1 = v["diff_v1"]["runs"][0]
    lines.append("  DIFF V1 λ per layer, last eval: " + ", ".join(f"{x:.2f}" for x in run1["lambda"][-1]))
    run2 = v["diff_v2"]["runs"][0]
    lines.append("  DIFF V2 mean σ(λ) per layer, last eval: " + ", ".join(f"{x:.2f}" for x in run2["sigma_lambda"][-1]))
    for name, m in results["measured"].items():
        mach = m["machine"]
        lines += ["", f"{name}, {m['seeds']} seeds, {m['tokens']:,} tokens per run (outputs/compare/{name}-text, "
                      f"{mach['cpu']}, {mach['torch_threads']} threads, {mach['date']}):",
                  row("", [LABELS[n] for n in m["variants"]]),
                  row("validation loss, mean", [f"{r['val_loss_mean']:.3f}" for r in m["variants"].values()]),
                  row("  std over seeds", [f"{r['val_loss_std']:.3f}" for r in m["variants"].values()]),
                  row("tokens/s", [f"{r['tokens_per_s']:,.0f}" for r in m["variants"].values()]),
                  f"  all {len(m['variants'])} variants × {m['seeds']} seeds: {m['wall_s']:.0f} s of wall time"]
    return "\n".join(lines)


def figures(results: dict, outdir: Path) -> list[Path]:
    return [compare.plot(results, outdir / "08-validation-loss.png")]
