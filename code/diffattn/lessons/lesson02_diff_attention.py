"""Lesson 02: differential attention on one seeded example (N = 6 tokens, d = 8, λ = 0.8), stdlib only.

    V1:  W = softmax(q1 k1ᵀ/√d) − λ·softmax(q2 k2ᵀ/√d)        rows sum to 1 − λ, entries can be negative
    V2:  W = softmax(q1 kᵀ/√d) − σ(λ_t)·softmax(q2 kᵀ/√d)      one shared k and v; rows sum to 1 − σ(λ_t) ∈ (0, 1)
    misread:   softmax((q1 k1ᵀ − λ·q2 k2ᵀ)/√d)                one softmax: rows sum to 1, nothing negative

It also measures the (1 − λ) shrink of a DIFF head when its two maps are alike (as at initialisation), which is the
factor V1's code multiplies back in after the per-head RMSNorm, and prints the λ_init schedule by depth.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any, Sequence

from diffattn.pure.attention import (
    attention_weights,
    diff_attention_v1,
    diff_weights_v1,
    diff_weights_v2,
    lambda_init,
    logit_difference_weights,
    sigmoid,
)
from diffattn.pure.matrix import Matrix, matmul

TITLE = "Differential attention: V1, V2, and what it is not"

N, D, LAM = 6, 8, 0.8  # the size of the widely copied six-token example; λ near the deep-layer λ_init of 0.8
SEED = 0
V2_LAMBDA_LOGITS = (-2.0, -1.0, 0.0, 0.5, 1.0, 2.0)  # λ_t = W_λ x_t, one per token (one head shown)
INIT_STD = 0.1  # small q/k entries, as right after initialisation: logits ≈ 0, so A1 ≈ A2 ≈ uniform
SHRINK_LAMBDAS = (0.2, 0.8)  # λ_init at depth 0, and the deep-layer limit
DEPTHS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 27)  # 27: the last layer of the paper's 28-layer 3B model


def random_matrix(rng: random.Random, rows: int, cols: int, std: float = 1.0) -> Matrix:
    """(rows, cols) with independent N(0, std²) entries."""
    return [[rng.gauss(0.0, std) for _ in range(cols)] for _ in range(rows)]


def frobenius(m: Sequence[Sequence[float]]) -> float:
    """‖m‖_F = √(Σ m_ij²)."""
    return math.sqrt(math.fsum(x * x for row in m for x in row))


def max_abs_difference(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def shrink_ratio(q1: Matrix, k1: Matrix, q2: Matrix, k2: Matrix, v: Matrix, lam: float) -> float:
    """‖(A1 − λA2)v‖ / ‖A1 v‖: how much smaller a DIFF head's output is than one ordinary attention head's."""
    return frobenius(diff_attention_v1(q1, k1, q2, k2, v, lam)) / frobenius(matmul(attention_weights(q1, k1), v))


def _row_sums(m: Matrix) -> list[float]:
    return [math.fsum(row) for row in m]


def _negatives(m: Matrix) -> int:
    return sum(x < 0 for row in m for x in row)


def example_inputs() -> tuple[Matrix, Matrix, Matrix, Matrix, Matrix]:
    """The worked example's q1, k1, q2, k2, each (N, d), and v, (N, 2d): V1 has one value projection, 2d wide."""
    rng = random.Random(SEED)
    q1, k1, q2, k2 = (random_matrix(rng, N, D) for _ in range(4))
    return q1, k1, q2, k2, random_matrix(rng, N, 2 * D)


def _worked_example() -> dict[str, Any]:
    q1, k1, q2, k2, v = example_inputs()
    a1, a2 = attention_weights(q1, k1), attention_weights(q2, k2)
    w = diff_weights_v1(q1, k1, q2, k2, LAM)
    two_passes = [[x1 - LAM * x2 for x1, x2 in zip(r1, r2)] for r1, r2 in zip(matmul(a1, v), matmul(a2, v))]
    seed003 = logit_difference_weights(q1, k1, q2, k2, LAM)
    return {
        "a1": a1,
        "a2": a2,
        "w": w,
        "w_row_sums": _row_sums(w),
        "w_negatives": _negatives(w),
        "w_min": min(min(row) for row in w),
        "linearity_max_abs_error": max_abs_difference(diff_attention_v1(q1, k1, q2, k2, v, LAM), two_passes),
        "seed003": seed003,
        "seed003_row_sums": _row_sums(seed003),
        "seed003_negatives": _negatives(seed003),
        "seed003_min": min(min(row) for row in seed003),
        "shrink_lambdas": list(SHRINK_LAMBDAS),
        "shrink_trained": [shrink_ratio(q1, k1, q2, k2, v, lam) for lam in SHRINK_LAMBDAS],
        "shrink_identical": [shrink_ratio(q1, k1, q1, k1, v, lam) for lam in SHRINK_LAMBDAS],
    }


def _at_init() -> dict[str, Any]:
    """Independent but small q/k (std 0.1): both maps are nearly uniform, so (A1 − λA2)v ≈ (1 − λ)·A1 v."""
    rng = random.Random(SEED + 1)
    q1, k1, q2, k2 = (random_matrix(rng, N, D, INIT_STD) for _ in range(4))
    v = random_matrix(rng, N, 2 * D)
    return {
        "shrink_init": [shrink_ratio(q1, k1, q2, k2, v, lam) for lam in SHRINK_LAMBDAS],
        "init_map_max_abs_difference": max_abs_difference(attention_weights(q1, k1), attention_weights(q2, k2)),
    }


def _v2() -> dict[str, Any]:
    """One V2 head, causal: query heads 2i and 2i+1 share k and v (width d); one λ_t per token."""
    rng = random.Random(SEED + 2)
    q1, q2, k = (random_matrix(rng, N, D) for _ in range(3))
    w = diff_weights_v2(q1, q2, k, list(V2_LAMBDA_LOGITS), causal=True)
    gates = [sigmoid(x) for x in V2_LAMBDA_LOGITS]
    return {
        "v2_lambda_logits": list(V2_LAMBDA_LOGITS),
        "v2_gates": gates,
        "v2_w": w,
        "v2_row_sums": _row_sums(w),
        "v2_future_zeros": sum(w[i][j] == 0.0 for i in range(N) for j in range(i + 1, N)),
        "v2_negatives": _negatives(w),
        # Context RMS for uncorrelated unit-RMS values (V2 blog): √(Σ_j w_j²); its supremum is √(1 + σ²) < √2.
        "v2_rms": [math.sqrt(math.fsum(x * x for x in row)) for row in w],
        "v2_rms_sup": [math.sqrt(1.0 + g * g) for g in gates],
    }


def run(progress: bool = True) -> dict[str, Any]:
    return {
        "n": N,
        "d": D,
        "lam": LAM,
        "seed": SEED,
        **_worked_example(),
        **_at_init(),
        **_v2(),
        "lambda_init": {
            "depths": list(DEPTHS),
            "zero_based": [lambda_init(depth) for depth in DEPTHS],
            "one_based_l_in_code_formula": [lambda_init(depth + 1) for depth in DEPTHS],
            # the paper's 1-based formula fed a 0-based index: exp(−0.3·(depth − 1)) = exp(+0.3) at the first layer
            "zero_based_l_in_paper_formula": [0.8 - 0.6 * math.exp(-0.3 * (depth - 1)) for depth in DEPTHS],
        },
    }


def _matrix_lines(m: Sequence[Sequence[float]], indent: str = "   ") -> list[str]:
    return [indent + " ".join(f"{x:7.3f}" for x in row) + f"   | {math.fsum(row):6.3f}" for row in m]


def report(results: dict[str, Any]) -> str:
    r = results
    cells = r["n"] * r["n"]
    lam_init = r["lambda_init"]
    lines = [
        f"Lesson 02 · {TITLE}",
        f"seeded example: N = {r['n']} tokens, d = {r['d']}, λ = {r['lam']:g},"
        f" q/k/v entries standard normal, seed {r['seed']}",
        "",
        "1. DIFF V1 weights W = softmax(q1 k1ᵀ/√d) − λ·softmax(q2 k2ᵀ/√d)   (last column: row sum)",
        *_matrix_lines(r["w"]),
        f"   every row sums to 1 − λ = {1 - r['lam']:.2f}; {r['w_negatives']} of {cells} weights are negative"
        f" (smallest {r['w_min']:.3f})",
        f"   linearity: max |W v − (A1 v − λ·A2 v)| = {r['linearity_max_abs_error']:.1e}",
        "",
        "2. The logit difference softmax((q1 k1ᵀ − λ·q2 k2ᵀ)/√d) on the same q, k",
        *_matrix_lines(r["seed003"]),
        f"   every row sums to 1; {r['seed003_negatives']} of {cells} weights are negative (smallest"
        f" {r['seed003_min']:.3f}): one softmax, not a difference",
        "",
        "3. DIFF V2 (causal), pair of query heads sharing k and v; coefficient σ(λ_t) per token",
        f"   {'token':>5} {'λ_t':>6} {'σ(λ_t)':>7} {'row sum':>8} {'1 − σ':>7} {'√Σw²':>7} {'√(1+σ²)':>8}",
    ]
    for t, (x, g, total, rms, sup) in enumerate(
        zip(r["v2_lambda_logits"], r["v2_gates"], r["v2_row_sums"], r["v2_rms"], r["v2_rms_sup"])
    ):
        lines.append(f"   {t:>5} {x:>6.2f} {g:>7.4f} {total:>8.4f} {1 - g:>7.4f} {rms:>7.4f} {sup:>8.4f}")
    lines += [
        f"   future weights exactly 0.0: {r['v2_future_zeros']} of {r['n'] * (r['n'] - 1) // 2};"
        f" negative weights: {r['v2_negatives']}",
        "",
        "4. How much a DIFF head shrinks its output: ‖(A1 − λA2)v‖ / ‖A1 v‖",
        f"   {'λ':>5} {'1 − λ':>7} {'A2 = A1':>9} {'init (std 0.1)':>15} {'example (std 1)':>16}",
    ]
    shrink = zip(r["shrink_lambdas"], r["shrink_identical"], r["shrink_init"], r["shrink_trained"])
    for lam, same, init, trained in shrink:
        lines.append(f"   {lam:>5.2f} {1 - lam:>7.4f} {same:>9.4f} {init:>15.4f} {trained:>16.4f}")
    lines += [
        f"   at init the two maps differ by at most {r['init_map_max_abs_difference']:.1e} per weight",
        "",
        "5. λ_init = 0.8 − 0.6·exp(−0.3·depth), depth 0-based (official code)",
        "   depth           " + "".join(f"{d:>7}" for d in lam_init["depths"]),
        "   λ_init          " + "".join(f"{x:>7.4f}" for x in lam_init["zero_based"]),
        "   1-based l used  " + "".join(f"{x:>7.4f}" for x in lam_init["one_based_l_in_code_formula"]),
        "   0-based l in the paper's exp(−0.3·(l − 1))",
        "                   " + "".join(f"{x:>7.4f}" for x in lam_init["zero_based_l_in_paper_formula"]),
    ]
    return "\n".join(lines)


def draw_effective_maps(axes: Sequence[Any], results: dict[str, Any]) -> Any:
    """Heatmaps of A1, A2, A1 − λA2 and softmax(z1 − λz2) on one diverging scale centred at 0; returns the image."""
    lam = results["lam"]
    panels = [
        (results["a1"], "A1 = softmax(q1 k1ᵀ/√d)"),
        (results["a2"], "A2 = softmax(q2 k2ᵀ/√d)"),
        (results["w"], f"DIFF: A1 − {lam:g}·A2"),
        (results["seed003"], f"not DIFF: softmax(z1 − {lam:g}·z2)"),
    ]
    limit = max(abs(x) for m, _ in panels for row in m for x in row)
    image = None
    for ax, (m, title) in zip(axes, panels):
        image = ax.imshow(m, cmap="RdBu_r", vmin=-limit, vmax=limit)
        for i, row in enumerate(m):
            for j, x in enumerate(row):
                ax.text(j, i, f"{x:.2f}", ha="center", va="center", fontsize=6.5,
                        color="white" if abs(x) > 0.6 * limit else "black")
        ax.set_title(f"{title}\nrow sums {math.fsum(m[0]):.2f}, {_negatives(m)} negative", fontsize=8.5)
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
        ax.set_xticks(range(len(m)))
        ax.set_yticks(range(len(m)))
        ax.grid(False)
    return image


def figures(results: dict[str, Any], outdir: Path) -> list[Path]:
    from diffattn.core.plotting import new_figure, save

    fig, _ = new_figure(13.5, 3.9)
    fig.clear()  # new_figure sets up the headless backend; this figure needs four panels and a colour bar
    *axes, bar = fig.subplots(1, 5, gridspec_kw={"width_ratios": [1, 1, 1, 1, 0.05]})
    fig.colorbar(draw_effective_maps(axes, results), cax=bar, label="attention weight")
    return [save(fig, outdir / "02-effective-maps.png")]
