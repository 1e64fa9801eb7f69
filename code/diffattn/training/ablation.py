"""Lesson 11: the paper's λ_init ablation (Table 6) in miniature. DIFF V1 trained three ways: the depth schedule
λ_init = 0.8 − 0.6·exp(−0.3·depth), and the constants 0.8 and 0.5 in every layer.

    diffattn compare --preset cpu-small --lambda-init schedule,0.8,0.5 --seeds 5
        → outputs/compare/cpu-small-text-lambda-init/{summary.json, table.txt, lambda-init.png}

The runs are paired: for one seed every setting starts from the same weights (λ_init draws no random numbers) and
reads the same batches, so the per-seed difference to the schedule cancels most of the seed-to-seed noise. The table
reports that paired difference (mean, standard deviation and range over seeds) beside the plain mean ± std.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from diffattn.training.compare import (
    machine,
    timing_line,
    train_seeds,
    train_settings,
)
from diffattn.config import Matched
from diffattn.core.errors import ConfigError, require
from diffattn.pure.attention import lambda_init as scheduled_lambda_init
from diffattn.core.stats import mean_std, t_interval

ABLATED = "diff_v1"  # λ_init is DIFF V1's (Table 6 ablates it)
SCHEDULE = "schedule"
PAPER_SETTINGS = (SCHEDULE, "0.8", "0.5")  # Table 6: DIFF (the schedule), λ_init = 0.8, λ_init = 0.5


def parse_settings(text: str) -> list[float | None]:
    """'schedule,0.8,0.5' → [None, 0.8, 0.5]; one-line error for anything else (numbers must lie in (0, 1))."""
    values: list[float | None] = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        if item == SCHEDULE:
            values.append(None)
            continue
        try:
            value = float(item)
        except ValueError:
            raise ConfigError(f"--lambda-init takes '{SCHEDULE}' or numbers in (0, 1), comma-separated "
                              f"(got {item!r})") from None
        require(0.0 < value < 1.0, f"--lambda-init values must lie in (0, 1) (got {item})")
        values.append(value)
    require(len(values) > 0, "--lambda-init needs at least one setting")
    require(len(set(values)) == len(values), f"--lambda-init lists a setting twice ({text!r})")
    return values


def label(value: float | None) -> str:
    return SCHEDULE if value is None else f"constant {value:g}"


def run_name(value: float | None) -> str:
    """The checkpoint folder of a setting. The schedule is lesson 08's own DIFF V1 (the same config, the same run);
    a constant has its own folder."""
    return "diff_v1" if value is None else f"diff_v1-lambda_init{value:g}"


def ablate(m: Matched, seeds: tuple[int, ...] = (0,), settings: list[float | None] | None = None,
           progress: bool = True, reuse: bool = False) -> dict[str, Any]:
    """Train DIFF V1 once per (setting, seed) and summarise; the first setting is the reference of the differences."""
    settings = [None, 0.8, 0.5] if settings is None else settings
    started = time.perf_counter()
    n_layer = m.model.n_layer
    results: dict[str, Any] = {"preset": m.preset, "task": m.train.task, "seeds": list(seeds), "settings": {}}
    for value in settings:
        r = train_seeds(m, ABLATED, seeds, progress, lambda_init=value, name=run_name(value), reuse=reuse)
        r["lambda_init"] = [scheduled_lambda_init(depth) if value is None else value for depth in range(n_layer)]
        r["final_lambda"] = [statistics.fmean(run["lambda"][-1][layer] for run in r["runs"]) for layer in range(n_layer)]
        results["settings"][label(value)] = r
    reference = results["settings"][label(settings[0])]
    for r in list(results["settings"].values())[1:]:
        gaps = [run["val_loss"] - ref["val_loss"] for run, ref in zip(r["runs"], reference["runs"])]
        mean, std = mean_std(gaps)
        r["paired_difference"] = {"per_seed": gaps, "mean": mean, "std": std, "min": min(gaps), "max": max(gaps),
                                  "t": t_interval(gaps)}
    results.update(train_settings(m))
    results["reference"] = label(settings[0])
    # reused runs were timed when they trained: then the figure is the sum of every run's own training time
    results["wall_s"] = (sum(run["wall_s"] for r in results["settings"].values() for run in r["runs"]) if reuse
                         else time.perf_counter() - started)
    results["wall_is_sum_of_runs"] = reuse
    results["machine"] = machine()
    return results


def format_table(results: dict[str, Any]) -> str:
    seeds = len(results["seeds"])
    lines = [f"DIFF V1 λ_init ablation, {results['preset']} on {results['task']}: {results['train']['steps']} steps, "
             f"{results['tokens']:,} tokens per run, {seeds} seed(s) per setting",
             f"  {'λ_init':<14}{'per layer':<26}{'val loss':>9}{'± std':>7}   {'paired Δ vs ' + results['reference']:<34}"
             f"learned λ per layer (mean over seeds)"]
    for name, r in results["settings"].items():
        gap = r.get("paired_difference")
        paired = (f"{gap['mean']:+.3f} ± {gap['std']:.3f} [{gap['min']:+.3f}, {gap['max']:+.3f}]" if gap else "–")
        lines.append(f"  {name:<14}{' '.join(f'{v:.2f}' for v in r['lambda_init']):<26}{r['val_loss_mean']:>9.3f}"
                     f"{r['val_loss_std']:>7.3f}   {paired:<34}{' '.join(f'{v:.2f}' for v in r['final_lambda'])}")
    lines.append(timing_line(results))
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> Path:
    """Left: validation loss vs tokens, one line per seed. Right: final loss per seed, settings joined per seed."""
    from diffattn.core.plotting import new_figure, save

    fig, _ = new_figure(width=11.0, height=4.0)
    fig.clf()
    curves, finals = fig.subplots(1, 2)
    names = list(results["settings"])
    colours = dict(zip(names, ("tab:orange", "tab:purple", "tab:brown", "tab:gray", "tab:olive")))
    for name, r in results["settings"].items():
        for i, run in enumerate(r["runs"]):
            curves.plot(run["curve"]["tokens"], run["curve"]["val_loss"], color=colours[name], alpha=0.7,
                        label=f"λ_init {name}" if i == 0 else None)
    for i, seed in enumerate(results["seeds"]):
        finals.plot(range(len(names)), [results["settings"][n]["runs"][i]["val_loss"] for n in names], "o-",
                    color="0.5", alpha=0.6, label="one seed" if i == 0 else None)
    finals.errorbar(range(len(names)), [results["settings"][n]["val_loss_mean"] for n in names],
                    yerr=[results["settings"][n]["val_loss_std"] for n in names], fmt="s", color="black",
                    capsize=4, label="mean ± std")
    finals.set_xticks(range(len(names)), [f"λ_init {n}" for n in names])
    curves.set_xlabel("training tokens")
    curves.set_ylabel("validation loss (nats per byte)")
    finals.set_ylabel("final validation loss")
    for ax in (curves, finals):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"DIFF V1 λ_init ablation: {results['preset']}, {len(results['seeds'])} seed(s) per setting")
    return save(fig, path)
