"""Lesson 01: softmax never says zero, and the weight it leaves on irrelevant tokens grows with the context.

The noise-floor model: one relevant token whose logit leads by a margin m, and N − 1 irrelevant tokens.

    equal irrelevant logits (0):   w_j = 1 / (N − 1 + e^m)   for each of them,   mass = (N − 1) / (N − 1 + e^m)
    irrelevant logits ~ N(0, τ²):  E[e^x] = e^{τ²/2}, so for large N   mass ≈ (N − 1) / (N − 1 + e^{m − τ²/2})

Every number is measured with diffattn.pure.softmax on whole rows of up to 131,072 logits; the closed forms are what
the measurements are checked against (tests/test_01_softmax.py).
"""

from __future__ import annotations

import math
import random
import struct
from pathlib import Path
from typing import Any, Callable, Sequence

from diffattn.core.progress import Progress
from diffattn.pure.softmax import softmax

TITLE = "Softmax and its noise floor"

SIZES = [2**k for k in range(1, 18)]  # N = 2 ... 2^17 = 131,072; the common claim's "128k" (128,000) is checked on its own
REPORT_SIZES = (16, 128, 1024, 8192, 65536, 131072)
MARGINS = (2.0, 5.0, 10.0, 15.0)
NOISY_MARGIN = 10.0
SIGMA = 1.0
SEED = 0

# A common claim: "127,999 irrelevant tokens at 0.001% each add up to about 12%" (a 128,000-token context).
SEED002_TOKENS = 128_000
SEED002_PER_TOKEN = 0.001 / 100
SEED002_TOTAL = 0.12

BIG_LOGITS = (1000.0, 999.0, 998.0)
SMALL_LOGITS = (-1000.0, -1001.0, -1002.0)
MASKED_LOGITS = (1.0, -math.inf, 2.0)


def naive_softmax(logits: Sequence[float]) -> list[float]:
    """exp(z_i) / Σ_j exp(z_j) as written on the blackboard: overflows above z ≈ 709.78, divides 0/0 below ≈ −745."""
    exps = [math.exp(z) for z in logits]
    total = math.fsum(exps)
    return [e / total for e in exps]


def irrelevant_mass(logits: Sequence[float], relevant: int = 0) -> float:
    """Σ_{j ≠ relevant} softmax(logits)_j, summed directly: 1 − w_relevant would lose the digits of a tiny mass."""
    weights = softmax(logits)
    return math.fsum(weights[:relevant] + weights[relevant + 1 :])


def closed_form_mass(n: int, margin: float) -> float:
    """(N − 1) / (N − 1 + e^m): the irrelevant mass when the N − 1 irrelevant logits are all equal."""
    return (n - 1) / (n - 1 + math.exp(margin))


def margin_for_mass(n: int, mass: float) -> float:
    """The margin m at which N − 1 equal irrelevant tokens hold `mass` in total: m = ln((N − 1)(1 − mass)/mass)."""
    return math.log((n - 1) * (1.0 - mass) / mass)


def to_float32(x: float) -> float:
    """Round a float64 to the nearest float32 (subnormals included), as a float32 softmax would store it."""
    return struct.unpack("f", struct.pack("f", x))[0]


def underflow_gap(store: Callable[[float], float] = float) -> float:
    """The largest logit gap g for which softmax([0, −g]) still gives the trailing token a non-zero weight.

    Bisection on g until the bracket is two adjacent floats; `store` rounds the weight to the dtype it is kept in.
    """
    lo, hi = 0.0, 2000.0  # weight(lo) > 0 and weight(hi) == 0 in both float64 and float32
    while True:
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            return lo
        lo, hi = (mid, hi) if store(softmax([0.0, -mid])[1]) > 0.0 else (lo, mid)


def exp_overflow_threshold() -> float:
    """The largest x for which math.exp(x) returns instead of raising OverflowError (ln of the largest float64)."""
    lo, hi = 0.0, 1000.0
    while True:
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            return lo
        try:
            math.exp(mid)
            lo = mid
        except OverflowError:
            hi = mid


def _failure(function: Callable[[Sequence[float]], list[float]], logits: Sequence[float]) -> str:
    """The exception type `function` raises on `logits`, or 'ok' when it returns."""
    try:
        function(logits)
    except ArithmeticError as exc:
        return type(exc).__name__
    return "ok"


def _show(logits: Sequence[float]) -> str:
    return "[" + ", ".join("-inf" if z == -math.inf else f"{z:g}" for z in logits) + "]"


def _noise_floor(progress: bool) -> dict[str, Any]:
    """Irrelevant mass at every N and margin: equal irrelevant logits, and N(0, τ²) irrelevant logits (seeded)."""
    rng = random.Random(SEED)
    mass: dict[str, dict[str, float]] = {f"m{m:g}": {} for m in MARGINS}
    noisy: dict[str, float] = {}
    mean_field: dict[str, float] = {}
    per_token: dict[str, float] = {}
    worst = 0.0
    with Progress(len(SIZES), "noise floor, N = 2 … 131,072", enabled=progress) as bar:
        for n in SIZES:
            for m in MARGINS:
                weights = softmax([m] + [0.0] * (n - 1))  # a real row of N logits, not the formula
                measured = math.fsum(weights[1:])
                expected = closed_form_mass(n, m)
                worst = max(worst, abs(measured - expected) / expected)
                mass[f"m{m:g}"][str(n)] = measured
                if m == NOISY_MARGIN:
                    per_token[str(n)] = weights[1]
            noise = [rng.gauss(0.0, SIGMA) for _ in range(n - 1)]
            noisy[str(n)] = irrelevant_mass([NOISY_MARGIN] + noise)
            mean_field[str(n)] = closed_form_mass(n, NOISY_MARGIN - SIGMA**2 / 2)
            bar.advance()
    return {
        "mass": mass,
        "closed_form_max_rel_error": worst,
        "per_token": per_token,
        "half_mass_n": {f"m{m:g}": math.floor(1.0 + math.exp(m)) + 1 for m in MARGINS},  # first N with N − 1 > e^m
        "noisy_mass": noisy,
        "noisy_mean_field": mean_field,
    }


def _seed002() -> dict[str, float]:
    irrelevant = SEED002_TOKENS - 1
    margin = margin_for_mass(SEED002_TOKENS, SEED002_TOTAL)
    row = softmax([margin] + [0.0] * irrelevant)
    return {
        "irrelevant_tokens": irrelevant,
        "claimed_total": irrelevant * SEED002_PER_TOKEN,
        "claimed_over_actual": irrelevant * SEED002_PER_TOKEN / SEED002_TOTAL,
        "tokens_for_claimed_total": SEED002_TOTAL / SEED002_PER_TOKEN,
        "max_equal_per_token": 1.0 / irrelevant,
        "per_token_for_claimed_total": SEED002_TOTAL / irrelevant,
        "margin_for_claimed_total": margin,
        "measured_total_at_margin": math.fsum(row[1:]),
        "measured_per_token_at_margin": row[1],
    }


def _stability() -> dict[str, Any]:
    gap = underflow_gap()
    return {
        "overflow_exp_arg": exp_overflow_threshold(),
        "underflow_gap_float64": gap,
        "underflow_gap_float32": underflow_gap(to_float32),
        "smallest_weight_float64": softmax([0.0, -gap])[1],
        "big_logits": _show(BIG_LOGITS),
        "naive_big": _failure(naive_softmax, BIG_LOGITS),
        "stable_big": softmax(BIG_LOGITS),
        "small_logits": _show(SMALL_LOGITS),
        "naive_small": _failure(naive_softmax, SMALL_LOGITS),
        "stable_small": softmax(SMALL_LOGITS),
        "masked_logits": _show(MASKED_LOGITS),
        "stable_masked": softmax(MASKED_LOGITS),
    }


def run(progress: bool = True) -> dict[str, Any]:
    return {
        "sizes": SIZES,
        "margins": list(MARGINS),
        "noisy_margin": NOISY_MARGIN,
        "sigma": SIGMA,
        "seed": SEED,
        "stability": _stability(),
        **_noise_floor(progress),
        "seed002": _seed002(),
    }


def _vector(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:.4f}" for v in values) + "]"


def report(results: dict[str, Any]) -> str:
    s, e = results["stability"], results["seed002"]
    margins = [f"m{m:g}" for m in results["margins"]]
    m_noisy, sigma = results["noisy_margin"], results["sigma"]
    lines = [
        f"Lesson 01 · {TITLE}",
        "",
        "1. A softmax weight is exp(z_i − max z) / Σ > 0: it reaches 0.0 only by underflow",
        f"   largest logit gap that still gets a non-zero weight  float64: {s['underflow_gap_float64']:.2f}"
        f"   float32: {s['underflow_gap_float32']:.2f}",
        f"   smallest non-zero float64 weight: {s['smallest_weight_float64']:.1e}",
        f"   math.exp(z) raises OverflowError above z = {s['overflow_exp_arg']:.2f}",
        "",
        "2. Naive exp(z)/Σexp(z) vs the stable softmax (subtract max z first)",
    ]
    for case in ("big", "small"):
        naive, stable = s[f"naive_{case}"], _vector(s[f"stable_{case}"])
        lines.append(f"   {s[case + '_logits']:<22} naive: {naive:<18} stable: {stable}")
    lines += [
        f"   {s['masked_logits']:<22} {'':<25} stable: {_vector(s['stable_masked'])}  (masked weight == 0.0)",
        "",
        "3. Irrelevant mass: one relevant token m logits ahead of N − 1 irrelevant tokens (logit 0)",
        f"   {'N':>7}  {'w_j (m=' + f'{m_noisy:g})':>10}" + "".join(f"{'m=' + k[1:]:>9}" for k in margins)
        + f"   noisy τ={sigma:g}, m={m_noisy:g} (mean-field)",
    ]
    for n in REPORT_SIZES:
        key = str(n)
        lines.append(
            f"   {n:>7,}  {results['per_token'][key]:>10.2e}"
            + "".join(f"{results['mass'][k][key]:>9.4f}" for k in margins)
            + f"   {results['noisy_mass'][key]:.4f} ({results['noisy_mean_field'][key]:.4f})"
        )
    lines += [
        f"   max relative gap to the closed form (N − 1)/(N − 1 + e^m): {results['closed_form_max_rel_error']:.1e}",
        "   irrelevant mass > 1/2 (N − 1 > e^m) from N = "
        + ", ".join(f"{results['half_mass_n'][k]:,} (m={k[1:]})" for k in margins),
        "",
        f"4. A common claim: \"{e['irrelevant_tokens']:,} tokens × 0.001% ≈ 12%\"",
        f"   {e['irrelevant_tokens']:,} × 0.001%{'':<21} = {e['claimed_total']:.1%}"
        f"  (> 100%: impossible; {e['claimed_over_actual']:.1f}× the claimed 12%)",
        f"   {'tokens at 0.001% each that total 12%':<37} = {e['tokens_for_claimed_total']:,.0f}",
        f"   {'largest equal weight possible':<37} = 1/{e['irrelevant_tokens']:,} = {e['max_equal_per_token']:.5%}",
        f"   {'equal weight that totals 12%':<37} = {e['per_token_for_claimed_total']:.7%}",
        f"   {'margin that leaves exactly 12%':<37} = ln({e['irrelevant_tokens']:,}·0.88/0.12) ="
        f" {e['margin_for_claimed_total']:.2f}",
        f"   {'measured: softmax of a 128,000-token row':<37}"
        f" → irrelevant mass {e['measured_total_at_margin']:.4%}, {e['measured_per_token_at_margin']:.7%} each",
    ]
    return "\n".join(lines)


def draw_irrelevant_mass(ax: Any, results: dict[str, Any]) -> None:
    """Irrelevant mass vs N (log2 axis): one solid line per margin, the noisy variant dashed, the claim's point."""
    sizes = results["sizes"]
    for margin in results["margins"]:
        ax.plot(sizes, [results["mass"][f"m{margin:g}"][str(n)] for n in sizes], marker="o", ms=3,
                label=f"m = {margin:g}")
    ax.plot(sizes, [results["noisy_mass"][str(n)] for n in sizes], "k--", lw=1.2,
            label=f"m = {results['noisy_margin']:g}, irrelevant logits\n~ N(0, {results['sigma']:g}²), seeded")
    e = results["seed002"]
    ax.plot([e["irrelevant_tokens"] + 1], [e["measured_total_at_margin"]], "r*", ms=11,
            label=f"the claimed 12% at 128,000 tokens\nneeds m = {e['margin_for_claimed_total']:.2f}")
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length N (tokens)")
    ax.set_ylabel("softmax weight on the N − 1 irrelevant tokens")
    ax.set_ylim(0, 1.02)
    ax.set_title("The softmax noise floor grows with context length")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: the curves fill the axes


def figures(results: dict[str, Any], outdir: Path) -> list[Path]:
    from diffattn.core.plotting import new_figure, save

    fig, ax = new_figure(9.6, 4.4)
    draw_irrelevant_mass(ax, results)
    return [save(fig, outdir / "01-irrelevant-mass.png")]
