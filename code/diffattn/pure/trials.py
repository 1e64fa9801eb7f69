"""Lesson 03's seeded trials, for the lesson and for `diffattn snr`: the draws, the measures of one row of
weights, and their statistics (stdlib only, like the rest of diffattn.pure).

One trial is one query over N keys with the signal at position SIGNAL (diffattn.pure.snr's model): ε1 and η are drawn
from a generator seeded by (seed, trial), so a shorter row is a prefix of a longer one and every condition of a trial
can reuse the same draws (common random numbers). An SNR is a ratio, so trials are summarised by a geometric mean with
a ×/÷ standard-error factor; shares and cosines by the arithmetic mean ± standard error.
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Any, Sequence

from diffattn.core.errors import require
from diffattn.pure.snr import (
    noise_logits,
    output_cosine,
    signal_logits,
    signal_share,
    signal_to_noise,
    subtract_maps,
)
from diffattn.pure.softmax import softmax

SEED = 3
SIGNAL = 0
VALUE_DIM = 8  # d_v of the output measure; its cosine concentrates at w_s/‖w‖₂ already for small d_v
# Lesson 03's setting, also the defaults of `diffattn snr`
N = 1024
MU, NOISE_STD = 8.0, 1.5  # (N − 1)·e^{τ²/2 − μ} ≈ 1 at N = 1024: the floor's expected mass equals the signal's
LAMBDA = 0.8  # V1's λ_init deep in the stack: 0.8 − 0.6·e^{−0.3·depth} → 0.8
# try_setting's limits: a trial's row costs about 0.75 KB of Python lists and 7 µs of CPython per token
MAX_N = 2**20  # about 0.8 GB and 8 s per trial
MAX_TRIALS = 100_000
MAX_WORK = 2**25  # N × trials: about four minutes


def draws(trial: int, n: int, seed: int = SEED) -> tuple[list[float], list[float]]:
    """Trial `trial`'s ε1 and η, length n. Seeded per trial, so a shorter row is a prefix of a longer one."""
    rng = random.Random(seed * 1_000_003 + trial)
    return [rng.gauss(0.0, 1.0) for _ in range(n)], [rng.gauss(0.0, 1.0) for _ in range(n)]


def value_vectors(trial: int, n: int) -> list[list[float]]:
    """v_j ~ N(0, I_dv), (n, d_v): unit RMS and uncorrelated, the V2 blog's context-RMS assumption."""
    rng = random.Random(SEED * 2_000_003 + trial)
    return [[rng.gauss(0.0, 1.0) for _ in range(VALUE_DIM)] for _ in range(n)]


def mean_se(xs: Sequence[float]) -> tuple[float, float]:
    n = len(xs)
    mean = math.fsum(xs) / n
    if n < 2:
        return mean, 0.0
    return mean, math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1) / n)


def arithmetic(xs: Sequence[float]) -> dict[str, float]:
    mean, se = mean_se(xs)
    return {"mean": mean, "se": se}


def spread(xs: Sequence[float]) -> dict[str, float]:
    return {"min": min(xs), "max": max(xs)}


def geometric(xs: Sequence[float]) -> dict[str, float]:
    """Geometric mean and its ×/÷ standard-error factor exp(SE of ln x)."""
    require(all(0.0 < x < math.inf for x in xs), "a geometric mean needs finite positive values")
    mean, se = mean_se([math.log(x) for x in xs])
    return {"gmean": math.exp(mean), "se_factor": math.exp(se)}


def measures(weights: Sequence[float], values: list[list[float]] | None = None) -> dict[str, float]:
    out = {"snr": signal_to_noise(weights, SIGNAL), "share": signal_share(weights, SIGNAL)}
    if values is not None:
        out["cos"] = output_cosine(weights, values, SIGNAL)
    return out


def summarise(rows: Sequence[dict[str, float]]) -> dict[str, Any]:
    """Trial rows of measures() -> SNR geometric mean, share and cosine arithmetic means."""
    out: dict[str, Any] = {"snr": geometric([r["snr"] for r in rows])}
    out.update({name: arithmetic([r[name] for r in rows]) for name in ("share", "cos") if name in rows[0]})
    return out


def try_setting(n: int = N, mu: float = MU, noise_std: float = NOISE_STD, rho: float = 0.9, lam: float = LAMBDA,
                variant: str = "v1", trials: int = 16) -> dict[str, Any]:
    """One setting of this lesson's model, for `diffattn snr`: softmax vs DIFF, medians over trials.

    V1's λ is any finite number (the learned λ is unconstrained); V2's coefficient σ(λ_t) lies strictly inside (0, 1).
    Medians, not geometric means: a DIFF row can put a negative weight on the signal, and then its SNR is negative.
    Bad settings raise ConfigError naming the command-line flag, so the CLI and library say the same thing; that
    includes settings whose float64 softmax underflows (see float64_range_error).
    """
    require(variant in ("v1", "v2"), f"--variant must be v1 or v2 (got {variant!r})")
    require(n >= 2, f"--n (N) must be >= 2: the signal and at least one other token (got {n})")
    require(trials >= 1, f"--trials must be >= 1 (got {trials})")
    require(n <= MAX_N, f"--n (N) must be <= {MAX_N:,}: a pure-Python trial holds about 0.75 KB per token of its row, "
                        f"so this N takes about 0.8 GB and seconds per trial (got {n:,})")
    require(trials <= MAX_TRIALS, f"--trials must be <= {MAX_TRIALS:,} (got {trials:,})")
    require(n * trials <= MAX_WORK, f"--n × --trials must be <= {MAX_WORK:,}, about four minutes of pure Python "
                                    f"(got {n:,} × {trials:,} = {n * trials:,})")
    require(math.isfinite(mu), f"--signal (the signal logit μ) must be a finite number (got {mu})")
    require(math.isfinite(noise_std) and noise_std >= 0,
            f"--noise (the noise std τ) must be a finite number >= 0 (got {noise_std})")
    require(-1.0 <= rho <= 1.0, f"--rho (the noise correlation ρ) must be in [-1, 1] (got {rho})")
    require(math.isfinite(lam), f"--lam (λ) must be a finite number (got {lam})")
    if variant == "v2":
        require(0.0 < lam < 1.0,
                f"--lam is DIFF V2's coefficient σ(λ_t) with --variant v2 and must be strictly between 0 and 1 (got {lam})")
    rows: dict[str, list[dict[str, float]]] = {"softmax": [], "diff": []}
    ratios = []
    for t in range(trials):
        eps1, eta = draws(t, n)
        values = value_vectors(t, n)
        z1 = signal_logits(eps1, SIGNAL, mu, noise_std)
        a1 = softmax(z1)
        a2 = softmax(noise_logits(eps1, eta, noise_std, rho))
        soft, diff = measures(a1, values), measures(subtract_maps(a1, a2, lam), values)
        ratio = diff["snr"] / soft["snr"] if 0.0 < soft["snr"] < math.inf else math.nan
        require(math.isfinite(ratio), float64_range_error(z1, mu, noise_std))
        rows["softmax"].append(soft)
        rows["diff"].append(diff)
        ratios.append(ratio)
    summary = {
        method: {"snr_median": statistics.median(r["snr"] for r in rs),
                 **{name: arithmetic([r[name] for r in rs]) for name in ("share", "cos")}}
        for method, rs in rows.items()
    }
    return {"setting": {"n": n, "mu": mu, "noise_std": noise_std, "rho": rho, "lam": lam, "variant": variant,
                        "trials": trials},
            **summary, "snr_ratio_median": statistics.median(ratios)}


def float64_range_error(z1: Sequence[float], mu: float, noise_std: float) -> str:
    """Why no DIFF/softmax ratio exists for this row: its softmax under- or overflows in float64.

    exp underflows to 0 below about e^−745 (and loses precision below e^−708), so a signal logit more than about
    700 below the largest noise logit gets weight 0 (softmax SNR 0, or so small that the ratio overflows), and one
    more than about 700 above every noise logit leaves the noise weight 0 (softmax SNR infinite).
    """
    top_noise = max(z for j, z in enumerate(z1) if j != SIGNAL)
    gap = mu - top_noise
    size = f"{abs(gap):,.0f}" if abs(gap) < 1e6 else f"{abs(gap):.3g}"
    if gap > 0:
        return (f"--signal {mu:g} sits {size} above the largest noise logit (--noise {noise_std:g}): float64 softmax "
                "gives the noise no weight, so softmax's SNR is infinite and the DIFF/softmax ratio undefined; "
                "keep the signal within about 700 of the noise logits")
    return (f"--signal {mu:g} sits {size} below the largest noise logit (--noise {noise_std:g} spreads them): the "
            "signal's float64 softmax weight underflows, so softmax's SNR is 0 or subnormal and the DIFF/softmax "
            "ratio undefined; keep the signal within about 700 of the largest noise logit")


def format_setting(result: dict[str, Any]) -> str:
    s = result["setting"]
    coefficient = "λ" if s["variant"] == "v1" else "σ(λ_t)"
    lines = [f"N = {s['n']:,}, μ = {s['mu']:g}, τ = {s['noise_std']:g} (noise std), ρ = {s['rho']:g}, "
             f"DIFF {s['variant'].upper()} with {coefficient} = {s['lam']:g}, {s['trials']} trials (lesson 03's model)",
             f"  {'':<8} {'SNR (median)':>13} {'signal share':>14} {'cos(o, v_s)':>12}"]
    for method in ("softmax", "diff"):
        r = result[method]
        lines.append(f"  {method:<8} {r['snr_median']:>13.4g} {r['share']['mean']:>14.3f} {r['cos']['mean']:>12.3f}")
    lines.append(f"  DIFF / softmax SNR, median over trials: {result['snr_ratio_median']:.3g}×")
    return "\n".join(lines)


def rho_key(rho: float) -> str:
    """0.9 -> 'rho090': numbers.json keys cannot contain dots (a dot separates the parts of a lesson tag)."""
    return f"rho{round(100 * rho):03d}"


def mu_key(mu: float) -> str:
    """4.0 -> 'mu4' (the grid's μ are whole numbers; a key cannot contain a dot)."""
    require(mu == int(mu), f"grid μ must be whole numbers (got {mu})")
    return f"mu{int(mu)}"
