"""Lesson 03: when does subtracting a second softmax map lift the signal out of the noise floor, and by how much?

The model (diffattn.pure.snr.signal_logits and noise_logits): one query, N keys, the signal at position s = 0
(nothing here depends on position, so any s gives the same statistics). τ is the noise std (σ is kept for the
sigmoid of DIFF V2's coefficient σ(λ_t)).

    map 1:  z1_s = μ,  z1_j = τ·ε1_j  (j ≠ s)                      ε1, η ~ N(0, 1) i.i.d.
    map 2:  z2_j = τ·(ρ·ε1_j + √(1−ρ²)·η_j)  (every j)             ρ = correlation of the two maps' noise
    softmax: w = softmax(z1)          DIFF: w = softmax(z1) − λ·softmax(z2)

Four experiments at one setting (μ = 8, τ = 1.5), all seeded, with common random numbers (every condition of a trial
reuses the same ε1, η and values, so differences between conditions are not sampling noise): the headline at
N = 1024, a noise sweep over τ, a context sweep N = 1k … 128k and a λ sweep 0 … 1. Then two checks of how far that
one setting generalises: a grid over (μ, τ) with independent noise (ρ = 0), which includes the public toy's own
setting (μ = 4, τ = 0.5, its λ grid), and the ρ = 1 best-λ gain under other seeds. An SNR is a ratio, so a set of
trials is summarised by its geometric mean (exp of the mean ln SNR) with a ×/÷ standard-error factor; shares and
cosines by the arithmetic mean ± standard error; the (μ, τ) grid, where a DIFF row can put a negative weight on the
signal, by the median of the trial-by-trial ratios.
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Any, Callable, Sequence

from diffattn.lessons import snr_report
from diffattn.core.progress import Progress
from diffattn.pure.snr import (
    best_lambda,
    lambda_sweep,
    noise_crossover,
    noise_logits,
    rho1_optimal_lambda,
    rho1_snr_gain,
    signal_logits,
    signal_share,
    signal_to_noise,
    subtract_maps,
)
from diffattn.pure.softmax import softmax
from diffattn.pure.trials import (
    LAMBDA,
    MU,
    NOISE_STD,
    SEED,
    SIGNAL,
    VALUE_DIM,
    N,
    arithmetic,
    draws,
    geometric,
    measures,
    mu_key,
    rho_key,
    spread,
    summarise,
    value_vectors,
)

TITLE = snr_report.TITLE

RHOS = (0.0, 0.5, 0.9, 0.99, 1.0)
LAMBDAS = [round(0.05 * i, 2) for i in range(21)]
TRIALS = 64
USABLE = 0.5  # usable = the signal holds at least half of the attention magnitude

NOISE_LEVELS = [0.125 * i for i in range(33)]  # τ = 0 … 4
NOISE_TRIALS = 16

CONTEXTS = [1024 * 2**k for k in range(8)]  # 1,024 … 131,072
CONTEXT_RHOS = (0.0, 0.9, 1.0)
CONTEXT_TOKENS = 32768  # trials × N per context length, down to 2 trials

# Part 5, the setting: DIFF/softmax at λ = 0.8 with independent noise (ρ = 0) over a grid of signal logits μ and noise
# stds τ, on the headline's first GRID_TRIALS trials. The τ grid and the point (μ, τ) = (4, 0.5) with its λ grid are
# the public toy's own (rohitg00/ai-engineering-from-scratch @ 6b10711e,
# phases/10-llms-from-scratch/16-differential-attention-v2/code/main.py: signal_logit 4.0, noise_std 0.5,
# an independent second map, λ ∈ {0, .3, .6, .8, 1}, noise sweep noise_std ∈ {0.25, 0.5, 1, 1.5, 2} at λ = 0.8).
GRID_MUS = (4.0, 6.0, 8.0)
GRID_NOISE_STDS = (0.25, 0.5, 1.0, 1.5, 2.0)
GRID_RHO = 0.0
GRID_TRIALS = TRIALS
TOY_MU, TOY_NOISE_STD = 4.0, 0.5
TOY_LAMBDAS = (0.0, 0.3, 0.6, 0.8, 1.0)

# Part 6, the ρ = 1 best-λ gain under other seeds: the same trial count, the same grid λ, seeds 0 … 9 except SEED
OTHER_SEEDS = tuple(seed for seed in range(10) if seed != SEED)


def context_trials(n: int) -> int:
    """Fewer trials at long contexts: a row of 128k tokens already averages its floor over 128k draws."""
    return max(2, CONTEXT_TOKENS // n)


def lambda_experiment(progress: bool) -> dict[str, Any]:
    """SNR vs λ at N = 1024 for every ρ (geometric mean over trials); the λ that maximises it; ρ = 1 theory."""
    snrs = {rho_key(r): [[] for _ in LAMBDAS] for r in RHOS}
    optimum = []
    with Progress(TRIALS, "λ sweep, N = 1,024", enabled=progress) as bar:
        for t in range(TRIALS):
            eps1, eta = draws(t, N)
            for rho in RHOS:
                z1, z2 = signal_logits(eps1, SIGNAL, MU, NOISE_STD), noise_logits(eps1, eta, NOISE_STD, rho)
                for column, snr in zip(snrs[rho_key(rho)], lambda_sweep(z1, z2, SIGNAL, LAMBDAS)):
                    column.append(snr)
                if rho == 1.0:
                    optimum.append(rho1_optimal_lambda(softmax(z1), softmax(z2), SIGNAL))
            bar.advance()
    curves = {key: [geometric(column)["gmean"] for column in columns] for key, columns in snrs.items()}
    return {
        "grid": LAMBDAS,
        "snr": curves,
        "best": {key: best_lambda(LAMBDAS, curve) for key, curve in curves.items()},
        "best_over_softmax": {key: max(curve) / curve[0] for key, curve in curves.items()},  # λ = 0 is softmax
        "rho100_optimum": {**arithmetic(optimum), **spread(optimum)},
    }


def headline(best: dict[str, float], progress: bool) -> dict[str, Any]:
    """N = 1024: softmax vs DIFF at λ = 0.8 and at each ρ's best λ, with SNR ratios taken trial by trial."""
    soft: list[dict[str, float]] = []
    diff = {rho_key(r): {"fixed": [], "best": []} for r in RHOS}
    ratios = {rho_key(r): {"fixed": [], "best": []} for r in RHOS}
    lambdas = {key: {"fixed": LAMBDA, "best": best[key]} for key in diff}
    with Progress(TRIALS, "headline, N = 1,024", enabled=progress) as bar:
        for t in range(TRIALS):
            eps1, eta = draws(t, N)
            values = value_vectors(t, N)
            a1 = softmax(signal_logits(eps1, SIGNAL, MU, NOISE_STD))
            base = measures(a1, values)
            soft.append(base)
            for rho in RHOS:
                a2 = softmax(noise_logits(eps1, eta, NOISE_STD, rho))
                for which, lam in lambdas[rho_key(rho)].items():
                    row = measures(subtract_maps(a1, a2, lam), values)
                    diff[rho_key(rho)][which].append(row)
                    ratios[rho_key(rho)][which].append(row["snr"] / base["snr"])
            bar.advance()
    summary = {
        key: {
            which: {"lambda": lambdas[key][which], **summarise(rows),
                    "ratio": {**geometric(ratios[key][which]), **spread(ratios[key][which])}}
            for which, rows in by_lambda.items()
        }
        for key, by_lambda in diff.items()
    }
    softmax_summary = summarise(soft)
    cosines = [softmax_summary["cos"]["mean"]] + [r["cos"]["mean"] for by in summary.values() for r in by.values()]
    return {"softmax": softmax_summary, "diff": summary, "lowest_cos": min(cosines)}


def as_measure(levels: Sequence[float], curve: Sequence[float]) -> Callable[[float], float]:
    """A measured curve as the callable noise_crossover takes (it only ever asks about the grid points)."""
    return dict(zip(levels, curve)).__getitem__


def noise_sweep(progress: bool) -> dict[str, Any]:
    """Signal share vs τ at N = 1024: softmax, and DIFF (λ = 0.8) per ρ; the τ where each falls below 1/2."""
    names = ["softmax"] + [rho_key(r) for r in RHOS]
    shares = {name: [[] for _ in NOISE_LEVELS] for name in names}
    with Progress(NOISE_TRIALS, "noise sweep, τ = 0 … 4", enabled=progress) as bar:
        for t in range(NOISE_TRIALS):
            eps1, eta = draws(t, N)
            for i, tau in enumerate(NOISE_LEVELS):
                a1 = softmax(signal_logits(eps1, SIGNAL, MU, tau))
                shares["softmax"][i].append(signal_share(a1, SIGNAL))
                for rho in RHOS:
                    diff = subtract_maps(a1, softmax(noise_logits(eps1, eta, tau, rho)), LAMBDA)
                    shares[rho_key(rho)][i].append(signal_share(diff, SIGNAL))
            bar.advance()
    curves = {name: [arithmetic(column)["mean"] for column in columns] for name, columns in shares.items()}
    wins = {}
    for key in names[1:]:
        above = [s for s, d, b in zip(NOISE_LEVELS, curves[key], curves["softmax"]) if d > b]
        wins[key] = [above[0], above[-1]] if above else None
    return {
        "noise_stds": NOISE_LEVELS,
        "share": curves,
        "crossover": {
            name: noise_crossover(NOISE_LEVELS, as_measure(NOISE_LEVELS, curve), USABLE)
            for name, curve in curves.items()
        },
        "diff_above_softmax": wins,  # [first τ, last τ] of the grid where DIFF's share beats softmax's
    }


def context_sweep(progress: bool) -> dict[str, Any]:
    """SNR and share vs N = 1k … 128k: softmax and DIFF (λ = 0.8) for a few ρ, plus the ρ = 1 theory."""
    names = ["softmax"] + [rho_key(r) for r in CONTEXT_RHOS]
    rows: dict[str, dict[int, list[dict[str, float]]]] = {name: {n: [] for n in CONTEXTS} for name in names}
    ratios: dict[str, dict[int, list[float]]] = {rho_key(r): {n: [] for n in CONTEXTS} for r in CONTEXT_RHOS}
    theory: dict[int, list[float]] = {n: [] for n in CONTEXTS}
    optimum: dict[int, list[float]] = {n: [] for n in CONTEXTS}
    with Progress(sum(context_trials(n) for n in CONTEXTS), "context sweep, N = 1k … 128k", enabled=progress) as bar:
        for t in range(context_trials(CONTEXTS[0])):
            sizes = [n for n in CONTEXTS if t < context_trials(n)]
            eps1, eta = draws(t, sizes[-1])  # one draw per trial; each N uses its prefix (common random numbers)
            for n in sizes:
                a1 = softmax(signal_logits(eps1[:n], SIGNAL, MU, NOISE_STD))
                base = measures(a1)
                rows["softmax"][n].append(base)
                for rho in CONTEXT_RHOS:
                    a2 = softmax(noise_logits(eps1[:n], eta[:n], NOISE_STD, rho))
                    row = measures(subtract_maps(a1, a2, LAMBDA))
                    rows[rho_key(rho)][n].append(row)
                    ratios[rho_key(rho)][n].append(row["snr"] / base["snr"])
                    if rho == 1.0:
                        theory[n].append(rho1_snr_gain(a1, a2, SIGNAL, LAMBDA))
                        optimum[n].append(rho1_optimal_lambda(a1, a2, SIGNAL))
                bar.advance()
    share = {name: [arithmetic([r["share"] for r in rows[name][n]])["mean"] for n in CONTEXTS] for name in names}
    log2n = [math.log2(n) for n in CONTEXTS]  # N doubles along the grid, so interpolate the crossing in log2 N
    crossing = {name: noise_crossover(log2n, as_measure(log2n, share[name]), USABLE) for name in names}
    return {
        "n": CONTEXTS,
        "trials": [context_trials(n) for n in CONTEXTS],
        "snr": {name: [geometric([r["snr"] for r in rows[name][n]])["gmean"] for n in CONTEXTS] for name in names},
        "share": share,
        "ratio": {key: [geometric(ratios[key][n])["gmean"] for n in CONTEXTS] for key in ratios},
        "rho100_theory_ratio": [geometric(theory[n])["gmean"] for n in CONTEXTS],
        "rho100_optimum": [arithmetic(optimum[n])["mean"] for n in CONTEXTS],
        "crossover_n": {name: None if c is None else 2.0**c for name, c in crossing.items()},
    }


def setting_grid(progress: bool) -> dict[str, Any]:
    """DIFF (λ = 0.8) over softmax with independent noise (ρ = 0) for each (μ, τ) of the grid, at N = 1024.

    Per cell: the median of the trial-by-trial SNR ratios (at large τ a DIFF row can put a negative weight on the
    signal, which a geometric mean cannot take), how many trials do that, and the floor's share of map 1, 1 − a1_s:
    the part of map 1 that a subtraction could remove. The public toy's point (μ, τ) = (4, 0.5) also gets its λ grid.
    """
    keys = [mu_key(mu) for mu in GRID_MUS]
    ratio = {key: [[] for _ in GRID_NOISE_STDS] for key in keys}
    soft = {key: [[] for _ in GRID_NOISE_STDS] for key in keys}
    diff = {key: [[] for _ in GRID_NOISE_STDS] for key in keys}
    floor = {key: [[] for _ in GRID_NOISE_STDS] for key in keys}
    toy: list[list[float]] = [[] for _ in TOY_LAMBDAS]
    with Progress(GRID_TRIALS, "(μ, τ) grid, ρ = 0", enabled=progress) as bar:
        for t in range(GRID_TRIALS):
            eps1, eta = draws(t, N)
            for i, tau in enumerate(GRID_NOISE_STDS):
                a2 = softmax(noise_logits(eps1, eta, tau, GRID_RHO))  # map 2 does not depend on μ
                for mu, key in zip(GRID_MUS, keys):
                    a1 = softmax(signal_logits(eps1, SIGNAL, mu, tau))
                    base = signal_to_noise(a1, SIGNAL)
                    snr = signal_to_noise(subtract_maps(a1, a2, LAMBDA), SIGNAL)
                    soft[key][i].append(base)
                    diff[key][i].append(snr)
                    ratio[key][i].append(snr / base)
                    floor[key][i].append(1.0 - a1[SIGNAL])
                    if (mu, tau) == (TOY_MU, TOY_NOISE_STD):
                        for column, lam in zip(toy, TOY_LAMBDAS):
                            column.append(signal_to_noise(subtract_maps(a1, a2, lam), SIGNAL))
            bar.advance()

    def medians(table: dict[str, list[list[float]]]) -> dict[str, list[float]]:
        return {key: [statistics.median(column) for column in columns] for key, columns in table.items()}

    toy_ratio = [statistics.median(x / s for x, s in zip(column, toy[0])) for column in toy]  # λ = 0 is softmax
    return {
        "mus": list(GRID_MUS), "noise_stds": list(GRID_NOISE_STDS), "rho": GRID_RHO, "lambda": LAMBDA,
        "trials": GRID_TRIALS,
        "ratio": medians(ratio),
        "negative_signal": {key: [sum(r < 0 for r in column) for column in columns] for key, columns in ratio.items()},
        "floor_share": {key: [arithmetic(column)["mean"] for column in columns] for key, columns in floor.items()},
        "softmax_snr": medians(soft),
        "diff_snr": medians(diff),
        "toy": {"mu": TOY_MU, "noise_std": TOY_NOISE_STD, "lambdas": list(TOY_LAMBDAS),
                "snr": [statistics.median(column) for column in toy], "ratio": toy_ratio,
                "best_lambda": best_lambda(list(TOY_LAMBDAS), toy_ratio)},
    }


def first_draws(trial: int, n: int, seed: int) -> list[float]:
    """draws(trial, n, seed)[0] (the same generator's first n draws) without drawing η."""
    rng = random.Random(seed * 1_000_003 + trial)
    return [rng.gauss(0.0, 1.0) for _ in range(n)]


def other_seeds(lam: float, progress: bool) -> dict[str, Any]:
    """The headline's ρ = 1 DIFF/softmax ratio at one grid λ, recomputed from the draws of other seeds.

    At ρ = 1 map 2's logits are τ·ε1, so η is never needed (noise_logits multiplies it by √(1 − ρ²) = 0).
    """
    ratios = []
    with Progress(len(OTHER_SEEDS) * TRIALS, "ρ = 1 at the best λ, other seeds", enabled=progress) as bar:
        for seed in OTHER_SEEDS:
            per_trial = []
            for t in range(TRIALS):
                eps1 = first_draws(t, N, seed)
                a1 = softmax(signal_logits(eps1, SIGNAL, MU, NOISE_STD))
                a2 = softmax(noise_logits(eps1, eps1, NOISE_STD, 1.0))
                diff = signal_to_noise(subtract_maps(a1, a2, lam), SIGNAL)
                per_trial.append(diff / signal_to_noise(a1, SIGNAL))
                bar.advance()
            ratios.append(geometric(per_trial)["gmean"])
    return {"seeds": list(OTHER_SEEDS), "lambda": lam, "trials": TRIALS, "ratio": ratios, **spread(ratios)}


def run(progress: bool = True) -> dict[str, Any]:
    lam = lambda_experiment(progress)
    return {
        "setup": {
            "n": N, "mu": MU, "noise_std": NOISE_STD, "rhos": list(RHOS), "lambda": LAMBDA, "trials": TRIALS,
            "noise_trials": NOISE_TRIALS, "value_dim": VALUE_DIM, "usable": USABLE, "seed": SEED,
            "floor_over_signal": (N - 1) * math.exp(NOISE_STD**2 / 2 - MU),  # mean-field Σ_{j≠s} e^{z_j} / e^{μ}
            "softmax_snr_theory": math.exp(MU - NOISE_STD**2 / 2),  # e^μ / E[e^{τε}]
            "ratio_limit": 1.0 / (1.0 - LAMBDA),
        },
        "headline": headline(lam["best"], progress),
        "noise": noise_sweep(progress),
        "context": context_sweep(progress),
        "lambda": lam,
        "setting": setting_grid(progress),
        "seeds": other_seeds(lam["best"]["rho100"], progress),
    }


report, figures = snr_report.report, snr_report.figures  # the lesson's text and figures, from its results alone
