"""Lesson 03's report and figures, drawn from its results alone (diffattn.lessons.lesson03_snr computes them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from diffattn.pure.trials import mu_key

TITLE = "Noise-floor SNR experiments: softmax vs DIFF"


def rho_label(key: str) -> str:
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
        for which, label in (("fixed", f"DIFF {rho_label(key)}"), ("best", "")):
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
        lines.append(f"   {'DIFF ' + rho_label(key):<16}{_fmt(noise['crossover'][key], '.2f'):>22}   {span}")
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
        + ", ".join(f"{rho_label(key)}: {_fmt(n, ',.0f')}" for key, n in ctx["crossover_n"].items()),
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
    styles = [(k, c, f"DIFF λ = {lam:g}, {rho_label(k)}") for k, c in zip(diff, _colours(len(diff)))]
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
        ax.plot(lam["grid"], lam["snr"][key], "o-", color=colour, ms=3, label=rho_label(key))
        ax.plot([lam["best"][key]], [max(lam["snr"][key])], "*", color=colour, ms=11)
    ax.axvline(lam["rho100_optimum"]["mean"], color="grey", lw=0.8, ls="--", label="ρ = 1 theory λ*")
    ax.axvline(setup["lambda"], color="grey", lw=0.8, ls=":", label=f"λ = {setup['lambda']:g}")
    ax.set_yscale("log")
    ax.set_xlabel("λ")
    ax.set_ylabel("SNR of softmax(z1) − λ·softmax(z2)")
    ax.set_title(f"λ sweep, N = {setup['n']:,}: λ = 0 is softmax; ★ = the SNR-maximising λ")
    ax.legend(fontsize=8)


def figures(results: dict[str, Any], outdir: Path) -> list[Path]:
    from diffattn.core.plotting import new_figure, save

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
