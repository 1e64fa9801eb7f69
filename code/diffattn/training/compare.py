"""Lesson 08: matched comparisons. Train every variant with the same data order, tokens and schedule, then tabulate.

    diffattn compare --preset cpu-small --seeds 3      → outputs/compare/cpu-small-text/{summary.json,
                                                                   table.txt, compare.png}

"Matched" means: for one seed, every variant starts from `torch.manual_seed(seed)`, reads the same batches (the data
generator is seeded with seed + 1 and nothing else draws from it), and runs the same steps, batch, learning-rate
schedule and evaluation set. Only the attention layer differs (lesson 07's matched configs). Seeds vary both the
initial weights and the data order, so the spread over seeds is the noise any difference must beat.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from diffattn.training import checkpoint
from diffattn.config import Matched, build_configs, default_out
from diffattn.data import make_task
from diffattn.core.errors import ConfigError, one_line
from diffattn.core.hardware import cpu_name, datasheet_peak
from diffattn.model.gpt import GPT, parameter_breakdown
from diffattn.pure.variants import REFERENCE, LABELS, VARIANTS, colour
from diffattn.core.results import write_json_atomic
from diffattn.training.runs import finished, train_fresh
from diffattn.core.stats import mean_std
from diffattn.training.loop import TrainingDiverged, train

PARTIAL = "partial.json"  # the variants finished so far, while a comparison runs (removed when it completes)
TIMING_KEYS = ("wall_s", "tokens_per_s", "time_s", "mfu")


def run_summary(out: Path) -> dict[str, Any]:
    """One finished run, from its metrics.jsonl: the evaluation curve, the λ trajectory and the speed."""
    records = checkpoint.read_metrics(out)
    evals = [r for r in records if "val_loss" in r]
    steady = [r["tokens_per_s"] for r in records[len(records) // 10:]]  # the first tenth warms caches up
    summary = {
        "val_loss": evals[-1]["val_loss"],
        "train_loss": records[-1]["train_loss"],
        "curve": {"step": [r["step"] for r in evals], "tokens": [r["tokens"] for r in evals],
                  "val_loss": [r["val_loss"] for r in evals], "time_s": [r["time_s"] for r in evals]},
        "train_curve": [r["train_loss"] for r in records],
        "wall_s": records[-1]["time_s"],
        "tokens_per_s": statistics.median(steady),
    }
    for key in ("lambda", "sigma_lambda"):
        if key in evals[-1]:
            summary[key] = [r[key] for r in evals]  # (evaluations, layers)
    return summary


def machine() -> dict[str, Any]:
    """What the timings were measured on."""
    info = {"cpu": cpu_name(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version(), "date": datetime.date.today().isoformat()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def train_seeds(m: Matched, variant: str, seeds: tuple[int, ...], progress: bool = True,
                lambda_init: float | None = None, name: str | None = None, reuse: bool = False) -> dict[str, Any]:
    """Train one variant once per seed into default_out(preset, task, name or variant, seed), overwriting (with
    `reuse`, a folder that already holds the same run finished is kept: `make train-small` trains every run once, in
    `diffattn study`), and summarise: size, FLOPs, every run, the final loss's mean and spread over seeds."""
    model_config, _ = m.configs(variant, lambda_init=lambda_init)
    with torch.device("meta"):  # counting only
        parts = parameter_breakdown(GPT(model_config))
    runs = []
    for seed in seeds:
        out = default_out(m.preset, m.train.task, name or variant, seed)
        job = (m.preset, model_config, m.configs(variant, seed, lambda_init)[1], out)
        if not (reuse and finished(job)):
            train_fresh(*job, progress=progress)
        runs.append({"seed": seed, **run_summary(out)})
    finals = [r["val_loss"] for r in runs]
    mean, std = mean_std(finals)
    first = default_out(m.preset, m.train.task, name or variant, seeds[0])
    return {
        "params": parts["total"], "attention_per_layer": parts["attention_per_layer"],
        "flops_per_token": checkpoint.read_metrics(first)[-1]["flops_per_token"],
        "runs": runs,
        "val_loss_mean": mean,
        "val_loss_std": std,
        "tokens_per_s": statistics.fmean(r["tokens_per_s"] for r in runs),
    }


def train_settings(m: Matched) -> dict[str, Any]:
    """The budget every run of a comparison shares."""
    c = m.train
    return {"train": {k: getattr(c, k) for k in ("steps", "batch_size", "seq_len", "lr", "warmup_steps",
                                                 "weight_decay", "grad_clip", "eval_sequences")},
            "tokens": c.steps * c.batch_size * c.seq_len, "device": c.device}


def compare(m: Matched, seeds: tuple[int, ...] = (0,), variants: tuple[str, ...] = VARIANTS, progress: bool = True,
            timings: bool = True, partial: Path | None = None, reuse: bool = False) -> dict[str, Any]:
    """Train every variant for every seed (overwriting their checkpoints) and summarise; `timings=False` drops every
    wall-clock figure, leaving only numbers that training computes. With `partial`, the variants finished so far are
    written there (JSON) after each one, so a run stopped by a time limit keeps them. A variant whose training raises
    (a torch.compile failure, out of memory) is listed under "failed" with its error and the others still train."""
    started = time.perf_counter()
    results: dict[str, Any] = {"preset": m.preset, "task": m.train.task, "seeds": list(seeds), "variants": {}}
    settings = {k: v for k, v in m.overrides.items() if k in ("device", "compile", "bf16")}
    if settings:
        results["settings"] = settings
    for variant in variants:
        try:
            results["variants"][variant] = train_seeds(m, variant, seeds, progress, reuse=reuse)
        except (KeyboardInterrupt, ConfigError) as exc:
            if not isinstance(exc, TrainingDiverged):  # bad input fails the same for every variant and an
                raise                                   # interrupt stops the comparison; a NaN costs one variant
            results.setdefault("failed", {})[variant] = one_line(exc)
        except Exception as exc:  # noqa: BLE001  reported with the variant's name; the next variant still trains
            results.setdefault("failed", {})[variant] = one_line(exc)
        if variant in results.get("failed", {}):
            sys.stderr.write(f"{variant} failed: {results['failed'][variant]}\n")
        if partial is not None:
            write_json_atomic(partial, {**results, "finished": list(results["variants"]), "complete": False})
    budget = train_settings(m)
    results["train"], results["tokens"] = budget["train"], budget["tokens"]
    if timings:
        # reused runs were timed when they trained: then the figure is the sum of every run's own training time
        results["wall_s"] = (sum(r["wall_s"] for v in results["variants"].values() for r in v["runs"]) if reuse
                             else time.perf_counter() - started)
        results["wall_is_sum_of_runs"] = reuse
        results["machine"] = machine()
        peak = datasheet_peak(results["machine"].get("gpu"))
        if peak and budget["device"].startswith("cuda"):  # model FLOPs utilisation: useful FLOP/s over the datasheet
            # bf16 peak (gpu_check.sh's gpu-check.json also divides by the GEMM peak it measured on that run)
            for r in results["variants"].values():
                r["mfu"] = r["flops_per_token"] * r["tokens_per_s"] / peak
        return results
    return without_timings(results)


def bare_loop_tokens_per_s(preset: str, variant: str, steps: int, **overrides: Any) -> float:
    """Median tokens/s of the plainest loop on the same model and batches: batch, forward, loss, backward, AdamW
    (`overrides` change the preset's training settings, e.g. batch_size, as `build_configs` takes them)."""
    model_config, c = build_configs(preset, variant, steps=steps, **overrides)
    torch.manual_seed(c.seed)
    model = GPT(model_config).to(c.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=c.lr)
    task, data_rng = make_task(c.task, c.seq_len), torch.Generator().manual_seed(c.seed + 1)
    times = []
    for _ in range(steps):
        x, y = task.batch(c.batch_size, c.seq_len, data_rng)
        started = time.perf_counter()  # as the trainer: the step, not the batch building
        loss = F.cross_entropy(model(x.to(c.device)).flatten(0, 1), y.to(c.device).flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss.item()  # wait for the step, as the trainer does when it logs the loss
        times.append(time.perf_counter() - started)
    return c.batch_size * c.seq_len / statistics.median(times)


def overhead(preset: str = "cpu-tiny", variant: str = "baseline", steps: int = 60, repeats: int = 3) -> dict[str, Any]:
    """The trainer's step (median tokens/s from its metrics) against the bare loop, alternating `repeats` times so
    that both see the same machine load."""
    import tempfile

    trainer, bare = [], []
    for _ in range(repeats):
        model_config, c = build_configs(preset, variant, steps=steps, eval_every=steps, checkpoint_every=steps)
        with tempfile.TemporaryDirectory() as tmp:
            train(preset, model_config, c, tmp, progress=False)
            trainer.append(statistics.median(r["tokens_per_s"] for r in checkpoint.read_metrics(tmp)[steps // 10:]))
        bare.append(bare_loop_tokens_per_s(preset, variant, steps))
    return {"preset": preset, "variant": variant, "steps": steps, "trainer_tokens_per_s": trainer,
            "bare_tokens_per_s": bare, "ratio": statistics.median(trainer) / statistics.median(bare),
            "machine": machine()}


def without_timings(tree: Any) -> Any:
    """`tree` minus every wall-clock figure (they differ on every run, so no lesson number may depend on them)."""
    if isinstance(tree, dict):
        return {k: without_timings(v) for k, v in tree.items() if k not in TIMING_KEYS}
    if isinstance(tree, list):
        return [without_timings(v) for v in tree]
    return tree


def format_table(results: dict[str, Any]) -> str:
    v = results["variants"]
    base = v[REFERENCE]["val_loss_mean"] if REFERENCE in v else None
    seeds = len(results["seeds"])
    timed = "wall_s" in results
    lines = [f"{results['preset']} on {results['task']}: {results['train']['steps']} steps × "
             f"{results['train']['batch_size']} × {results['train']['seq_len']} tokens = {results['tokens']:,} tokens "
             f"per run; {seeds} seed(s)",
             f"  {'variant':<10}{'params':>10}{'attn/layer':>12}{'FLOPs/token':>13}"
             f"{'val loss':>10}{'± std':>8}{'vs base':>9}" + (f"{'tokens/s':>10}" if timed else "")]
    for name, r in v.items():
        diff = f"{r['val_loss_mean'] - base:+.3f}" if base is not None and name != REFERENCE else "–"
        lines.append(f"  {LABELS[name]:<10}{r['params']:>10,}{r['attention_per_layer']:>12,}"
                     f"{r['flops_per_token'] / 1e6:>12.2f}M{r['val_loss_mean']:>10.3f}{r['val_loss_std']:>8.3f}"
                     f"{diff:>9}" + (f"{r['tokens_per_s']:>10,.0f}" if timed else "")
                     + (f"  MFU {r['mfu']:.1%} of the datasheet peak" if "mfu" in r else ""))
    for name, error in results.get("failed", {}).items():
        lines.append(f"  {LABELS[name]:<10}failed: {error}")
    if timed:
        lines.append(timing_line(results))
    return "\n".join(lines)


def timing_line(results: dict[str, Any]) -> str:
    """The last line of a results table: wall time of all runs and the machine they ran on."""
    m = results["machine"]
    return (f"  all runs: {results['wall_s']:.0f} s on {m['cpu']} ({m['torch_threads']} torch threads), "
            f"torch {m['torch']}, {m['date']}" + (f", {m['gpu']}" if "gpu" in m else "")
            + (f" ({m['note']})" if "note" in m else ""))


def plot(results: dict[str, Any], path: Path) -> Path:
    """Validation loss vs tokens (and vs wall time when measured), one line per seed; λ trajectories."""
    from diffattn.core.plotting import new_figure, save

    timed = "wall_s" in results
    fig, axes = new_figure(width=12.8 if timed else 9.6, height=4.0)
    fig.clf()
    panels = fig.subplots(1, 3 if timed else 2)
    for name, r in results["variants"].items():
        for i, run in enumerate(r["runs"]):
            label = LABELS[name] if i == 0 else None
            panels[0].plot(run["curve"]["tokens"], run["curve"]["val_loss"], color=colour(name), label=label, alpha=0.8)
            if timed:
                panels[1].plot(run["curve"]["time_s"], run["curve"]["val_loss"], color=colour(name), alpha=0.8)
            for key, style in (("lambda", "-"), ("sigma_lambda", "--")):
                if key in run:
                    for layer, values in enumerate(zip(*run[key])):
                        panels[-1].plot(run["curve"]["tokens"], values, style, color=colour(name), alpha=0.4 + 0.6 *
                                        layer / max(1, len(run[key][0]) - 1),
                                        label=(f"{LABELS[name]} {'λ' if key == 'lambda' else 'mean σ(λ)'}"
                                               if i == 0 and layer == 0 else None))
    panels[0].set_xlabel("training tokens")
    panels[0].set_ylabel("validation loss (nats per byte)")
    panels[0].legend(fontsize=8)
    if timed:
        panels[1].set_xlabel("training wall time (s)")
    panels[-1].set_xlabel("training tokens")
    panels[-1].set_ylabel("λ per layer (darker: deeper)")
    panels[-1].legend(fontsize=8)
    for ax in panels:
        ax.grid(True, alpha=0.3)
    fig.suptitle(f"{results['preset']} on {results['task']}: {len(results['seeds'])} seed(s) per variant")
    return save(fig, path)


def save_results(results: dict[str, Any], out: Path, note: str | None, tabulate, draw, figure: str) -> None:
    """summary.json, table.txt and the figure in `out` (no figure without matplotlib), then the table on stdout.
    `note` (e.g. "shared with other jobs") is stored with the machine and printed in the table."""
    if note:
        results["machine"]["note"] = note
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "summary.json", results)
    table = tabulate(results)
    (out / "table.txt").write_text(table + "\n")
    try:
        draw(results, out / figure)
    except ImportError:
        pass  # no matplotlib: the table and the JSON are the results
    print(table)
    print(f"written to {out}")
