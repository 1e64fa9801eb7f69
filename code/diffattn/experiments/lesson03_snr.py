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
from pathlib import Path
from typing import Any, Callable, Sequence

from diffattn.errors import require
from diffattn.progress import Progress
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
    spread,
    summarise,
    value_vectors,
)

TITLE = "Noise-floor SNR experiments: softmax vs DIFF"

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


def rho_key(rho: float) -> str:
    """0.9 -> 'rho090': numbers.json keys cannot contain dots (a dot separates the parts of a lesson tag)."""
    return f"rho{round(100 * rho):03d}"


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


def mu_key(mu: float) -> str:
    """4.0 -> 'mu4' (the grid's μ are whole numbers; a key cannot contain a dot)."""
    require(mu == int(mu), f"grid μ must be whole numbers (got {mu})")
    return f"mu{int(mu)}"


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


def _label(key: str) -> str:
    """'softmax' stays; 'rho090' -> 'ρ = 0.90'."""
    return key if key == "softmax" else f"ρ = {int(key[3:]) / 100:.2f}"


def _ratio(x: float) -> str:
    """A DIFF/softmax ratio: two decimals, or a whole number from 10 up (those sit next to some trial's λ*, where
    that trial's gain explodes, so their digits depend on which trials were drawn: more would be false precision)."""
    return f"{x:.2f}" if abs(x) < 10 else f"{x:,.0f}"


def report(results: dict[str, Any]) -> str:
    setup, head, noise, ctx, lam, grid, seeds = (
        results[k] for k in ("setup", "headline", "noise", "context", "lambda", "setting", "seeds"))
    soft = head["softmax"]
    lines = [
        f"Lesson 03 · {TITLE}",
        "",
        f"setup: N = {setup['n']:,} keys; signal logit μ = {setup['mu']:g} at s = 0; noise logits τ·N(0, 1),"
        f" noise std τ = {setup['noise_std']:g}; {setup['trials']} seeded trials",
        "       map 2 sees only noise, correlated ρ with map 1's;"
        f" mean-field floor/signal (N − 1)·e^(τ²/2 − μ) = {setup['floor_over_signal']:.2f}",
        "       SNR = w_s / mean_{j≠s} |w_j| (geometric mean)   share = w_s / Σ_j |w_j|",
        f"       cos = cos(Σ_j w_j v_j, v_s) with values v_j ~ N(0, I_{setup['value_dim']})",
        "",
        f"1. Headline, N = {setup['n']:,} (DIFF/softmax: SNR ratio, trial by trial; 2nd row per ρ: best λ of part 4)",
        f"   {'map':<16}{'λ':>6}{'SNR':>9}{'DIFF/softmax':>14}{'share':>8}{'cos':>8}",
        f"   {'softmax':<16}{'–':>6}{soft['snr']['gmean']:>9.0f}{1.0:>14.2f}{soft['share']['mean']:>8.3f}"
        f"{soft['cos']['mean']:>8.3f}",
    ]
    for key, by_lambda in head["diff"].items():
        for which, label in (("fixed", f"DIFF {_label(key)}"), ("best", "")):
            row = by_lambda[which]
            lines.append(
                f"   {label:<16}{row['lambda']:>6.2f}{row['snr']['gmean']:>9.0f}{_ratio(row['ratio']['gmean']):>14}"
                f"{row['share']['mean']:>8.3f}{row['cos']['mean']:>8.3f}"
            )
    lines += [
        f"   softmax SNR, theory for large N: e^(μ − τ²/2) = {setup['softmax_snr_theory']:.0f}",
        "",
        f"2. Noise sweep, N = {setup['n']:,}, τ = 0 … {noise['noise_stds'][-1]:g}, DIFF at λ = {setup['lambda']:g}",
        f"   {'map':<16}{'share < ' + format(setup['usable'], 'g') + ' from τ =':>22}"
        "   DIFF share > softmax share for τ in",
    ]
    lines.append(f"   {'softmax':<16}{_fmt(noise['crossover']['softmax'], '.2f'):>22}")
    for key, wins in noise["diff_above_softmax"].items():
        span = "never" if wins is None else f"{wins[0]:.2f} … {wins[1]:.2f}"
        lines.append(f"   {'DIFF ' + _label(key):<16}{_fmt(noise['crossover'][key], '.2f'):>22}   {span}")
    lines += [
        "",
        f"3. Context length, DIFF at λ = {setup['lambda']:g}: ratio = DIFF/softmax SNR; ρ = 1 theory:"
        " (1 − λ·a2_s/a1_s)/|1 − λ/λ*|, λ* = (1 − a1_s)/(1 − a2_s)",
        f"   {'N':>8}{'trials':>7}{'softmax':>9}{'share':>7}"
        + "".join(f"{'ρ=' + format(int(k[3:]) / 100, 'g') + ' ratio':>14}{'share':>7}" for k in ctx["ratio"])
        + f"{'ρ=1 theory':>12}{'λ*':>7}",
    ]
    for i, n in enumerate(ctx["n"]):
        lines.append(
            f"   {n:>8,}{ctx['trials'][i]:>7}{ctx['snr']['softmax'][i]:>9.0f}{ctx['share']['softmax'][i]:>7.3f}"
            + "".join(f"{_ratio(ctx['ratio'][k][i]):>14}{ctx['share'][k][i]:>7.3f}" for k in ctx["ratio"])
            + f"{_ratio(ctx['rho100_theory_ratio'][i]):>12}{ctx['rho100_optimum'][i]:>7.3f}"
        )
    lines += [
        "   share < 0.5 from N ≈ "
        + ", ".join(f"{_label(key)}: {_fmt(n, ',.0f')}" for key, n in ctx["crossover_n"].items()),
        f"   ρ = 1 limit of the ratio for N → ∞: 1/(1 − λ) = {setup['ratio_limit']:.2f}",
        "",
        f"4. λ sweep, N = {setup['n']:,}, λ = {lam['grid'][0]:g}, {lam['grid'][1]:g}, …, {lam['grid'][-1]:g}",
        f"   {'ρ':<8}{'best λ':>8}{'SNR(best λ)/SNR(softmax)':>27}",
    ]
    for key, best in lam["best"].items():
        lines.append(f"   {int(key[3:]) / 100:<8.2f}{best:>8.2f}{_ratio(lam['best_over_softmax'][key]):>27}")
    optimum, best = lam["rho100_optimum"], head["diff"]["rho100"]["best"]
    lines += [
        "   ρ = 1 theory: the noise cancels exactly at λ* = (1 − a1_s)/(1 − a2_s) ="
        f" {optimum['mean']:.3f} ± {optimum['se']:.3f} (single trials {optimum['min']:.3f} … {optimum['max']:.3f})",
        "",
        f"5. The setting: μ and τ, with independent noise (ρ = {grid['rho']:g}) and λ = {grid['lambda']:g}, N = "
        f"{setup['n']:,}, {grid['trials']} trials",
        "   median DIFF/softmax SNR ratio [in brackets: the floor's share of map 1, 1 − a1_s]",
        "   μ \\ τ   " + "".join(f"{tau:>14g}" for tau in grid["noise_stds"]),
    ]
    for mu in grid["mus"]:
        key = mu_key(mu)
        lines.append(f"   {mu:<8g}" + "".join(f"{_ratio(r):>7} [{f:.2f}]"
                                             for r, f in zip(grid["ratio"][key], grid["floor_share"][key])))
    negative = [f"μ = {mu:g}, τ = {tau:g}: {count}" for mu in grid["mus"]
                for tau, count in zip(grid["noise_stds"], grid["negative_signal"][mu_key(mu)]) if count]
    lines.append(f"   trials whose DIFF row puts a negative weight on the signal: {', '.join(negative) or 'none'}")
    toy, toy_key = grid["toy"], mu_key(grid["toy"]["mu"])
    lines += [
        f"   the public toy's setting, μ = {toy['mu']:g}, τ = {toy['noise_std']:g}, ρ = {grid['rho']:g}"
        " (medians over the same trials):",
        f"   {'λ':<22}" + "".join(f"{lam_:>8g}" for lam_ in toy["lambdas"]),
        f"   {'SNR':<22}" + "".join(f"{snr:>8.1f}" for snr in toy["snr"]),
        f"   {'DIFF/softmax':<22}" + "".join(f"{_ratio(r):>8}" for r in toy["ratio"]),
        f"   its noise sweep at λ = {grid['lambda']:g}, μ = {toy['mu']:g}:",
        f"   {'τ':<22}" + "".join(f"{tau:>8g}" for tau in grid["noise_stds"]),
        f"   {'softmax SNR':<22}" + "".join(f"{snr:>8.1f}" for snr in grid["softmax_snr"][toy_key]),
        f"   {'DIFF SNR':<22}" + "".join(f"{snr:>8.1f}" for snr in grid["diff_snr"][toy_key]),
        "",
        f"6. ρ = 1 at the best grid λ = {best['lambda']:.2f}, amid the trials' λ* (part 4): one trial's gain",
        "   (1 − λ·a2_s/a1_s)/|1 − λ/λ*| is unbounded as λ → its own λ*; the mean over trials is finite",
        f"   seed {setup['seed']} (the headline): {_ratio(best['ratio']['gmean'])} (geometric mean of {setup['trials']}"
        f" trials; single trials {_ratio(best['ratio']['min'])} … {_ratio(best['ratio']['max'])})",
        f"   seeds {', '.join(map(str, seeds['seeds']))}: {_ratio(seeds['min'])} … {_ratio(seeds['max'])}"
        f" (geometric means of {seeds['trials']} trials each, λ = {seeds['lambda']:.2f})",
    ]
    return "\n".join(line.rstrip() for line in lines)


def _fmt(value: float | None, spec: str) -> str:
    return "never" if value is None else format(value, spec)


def _colours(n: int) -> list[Any]:
    import matplotlib

    return [matplotlib.colormaps["viridis"](0.9 * i / max(n - 1, 1)) for i in range(n)]


def _series(keys: Sequence[str], lam: float) -> list[tuple[str, Any, str]]:
    """(key, colour, legend label) per curve: softmax in black, DIFF's ρ values along viridis."""
    diff = [k for k in keys if k != "softmax"]
    styles = [(k, c, f"DIFF λ = {lam:g}, {_label(k)}") for k, c in zip(diff, _colours(len(diff)))]
    return ([("softmax", "k", "softmax")] if "softmax" in keys else []) + styles


def draw_noise_sweep(ax: Any, results: dict[str, Any]) -> None:
    """Share vs τ per method, each crossover circled on the 1/2 line, the headline τ dashed."""
    setup, noise = results["setup"], results["noise"]
    for key, colour, label in _series(list(noise["share"]), setup["lambda"]):
        ax.plot(noise["noise_stds"], noise["share"][key], color=colour, lw=2.2 if key == "softmax" else 1.5, label=label)
        if noise["crossover"][key] is not None:
            ax.plot([noise["crossover"][key]], [setup["usable"]], "o", color=colour, ms=6, mfc="none", mew=1.5)
    ax.axhline(setup["usable"], color="grey", lw=0.8, ls=":")
    ax.axvline(setup["noise_std"], color="grey", lw=0.8, ls="--", label=f"τ = {setup['noise_std']:g} (headline)")
    ax.set_xlabel("noise std τ (spread of the irrelevant logits)")
    ax.set_ylabel("signal share  w_s / Σ|w_j|")
    ax.set_title(f"N = {setup['n']:,}, μ = {setup['mu']:g}: where the signal stops holding half the attention")
    ax.legend(fontsize=8)


def draw_context_sweep(left: Any, right: Any, results: dict[str, Any]) -> None:
    """SNR (left, log-log) and share (right) vs N, with softmax's e^(μ − τ²/2) and the ρ = 1 limit."""
    setup, ctx = results["setup"], results["context"]
    for key, colour, label in _series(list(ctx["snr"]), setup["lambda"]):
        left.plot(ctx["n"], ctx["snr"][key], "o-", color=colour, ms=3, label=label)
        right.plot(ctx["n"], ctx["share"][key], "o-", color=colour, ms=3, label=label)
    left.axhline(setup["softmax_snr_theory"], color="k", lw=0.8, ls=":", label="e^(μ − τ²/2)")
    left.axhline(setup["softmax_snr_theory"] * setup["ratio_limit"], color="grey", lw=0.8, ls="--",
                 label="× 1/(1 − λ): ρ = 1 limit")
    right.axhline(setup["usable"], color="grey", lw=0.8, ls=":")
    for ax, title in ((left, "SNR  w_s / mean|w_j|  (geometric mean)"), (right, "signal share  w_s / Σ|w_j|")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context length N")
        ax.set_title(title)
    left.set_yscale("log")
    left.legend(fontsize=7)


def draw_lambda_sweep(ax: Any, results: dict[str, Any]) -> None:
    """SNR vs λ per ρ (λ = 0 is softmax), a star at each best λ, the ρ = 1 theory λ* dashed."""
    setup, lam = results["setup"], results["lambda"]
    for key, colour in zip(lam["snr"], _colours(len(lam["snr"]))):
        ax.plot(lam["grid"], lam["snr"][key], "o-", color=colour, ms=3, label=_label(key))
        ax.plot([lam["best"][key]], [max(lam["snr"][key])], "*", color=colour, ms=11)
    ax.axvline(lam["rho100_optimum"]["mean"], color="grey", lw=0.8, ls="--", label="ρ = 1 theory λ*")
    ax.axvline(setup["lambda"], color="grey", lw=0.8, ls=":", label=f"λ = {setup['lambda']:g}")
    ax.set_yscale("log")
    ax.set_xlabel("λ")
    ax.set_ylabel("SNR of softmax(z1) − λ·softmax(z2)")
    ax.set_title(f"λ sweep, N = {setup['n']:,}: λ = 0 is softmax; ★ = the SNR-maximising λ")
    ax.legend(fontsize=8)


def figures(results: dict[str, Any], outdir: Path) -> list[Path]:
    from diffattn.plotting import new_figure, save

    fig, ax = new_figure(7.2, 4.4)
    draw_noise_sweep(ax, results)
    made = [save(fig, outdir / "03-noise-sweep.png")]

    fig, left = new_figure(11.5, 4.2)
    grid = fig.add_gridspec(1, 2)
    left.set_subplotspec(grid[0])  # new_figure makes one axis; split the figure into two panels
    right = fig.add_subplot(grid[1])
    right.grid(True, alpha=0.3)
    draw_context_sweep(left, right, results)
    made.append(save(fig, outdir / "03-context-length.png"))

    fig, ax = new_figure(7.2, 4.4)
    draw_lambda_sweep(ax, results)
    made.append(save(fig, outdir / "03-lambda-sweep.png"))
    return made
