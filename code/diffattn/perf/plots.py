"""The figures of `bench roofline` (lesson 12): the log–log roofline with every measured point, and decode step time
against batch beside the roofline's time."""

from __future__ import annotations

from pathlib import Path

from diffattn.pure.variants import REFERENCE, LABELS, VARIANTS, colour
from diffattn.core.plotting import new_figure, save

MARKERS = {"decode": "o", "prefill": "s", "train": "^"}


def roofline(info: dict, path: Path) -> Path:
    """Attainable GFLOP/s = min(peak, bandwidth × intensity), with the GEMMs and every decode, prefill and training
    point at its counted intensity and measured GFLOP/s."""
    roof, machine = info["roofline"], info["machine"]
    points = [r for key in ("decode", "prefill", "train") for r in info.get(key, []) if "ms" in r]
    intensities = [r["intensity"] for r in points] + [gemm_intensity(g) for g in info["ceilings"]["gemm"]]
    low, high = min(intensities + [roof["ridge_flops_per_byte"]]) / 2, max(intensities + [roof["ridge_flops_per_byte"]]) * 2
    fig, ax = new_figure(7.0, 4.6)
    xs = [low * (high / low) ** (i / 200) for i in range(201)]
    ax.plot(xs, [min(roof["peak_GFLOPs"], roof["bandwidth_GBps"] * x) for x in xs], color="black", lw=1.5,
            label=f"roofline: {roof['peak_GFLOPs']:.0f} GFLOP/s fp32, {roof['bandwidth_GBps']:.1f} GB/s")
    for g in info["ceilings"]["gemm"]:
        ax.scatter([gemm_intensity(g)], [g["gflops"]["median"]], marker="*", s=80, color="black")
        ax.annotate(f"GEMM {g['dtype']}", (gemm_intensity(g), g["gflops"]["median"]), fontsize=7,
                    textcoords="offset points", xytext=(4, -8))
    for phase, marker in MARKERS.items():
        for variant in VARIANTS:
            rows = [r for r in points if r["phase"] == phase and r["variant"] == variant]
            if rows:
                ax.scatter([r["intensity"] for r in rows], [r["achieved_GFLOPs"] for r in rows], marker=marker,
                           s=18, color=colour(variant), alpha=0.8,
                           label=f"{phase} {LABELS[variant]}" if phase == "decode" or variant == REFERENCE else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs per byte, counted)")
    ax.set_ylabel("GFLOP/s (measured)")
    ax.set_title(f"{machine['cpu']}, {machine['threads']} thread(s), {machine['date']}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")  # clear of the ridge corner, where the points gather
    return save(fig, path)


def gemm_intensity(row: dict) -> float:
    """An n³ GEMM moves at least its three n × n matrices once: 2n³ / (3n² · bytes) = 2n / (3 · bytes)."""
    size = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}[row["dtype"]]
    return 2 * row["n"] / (3 * size)


def decode_latency(info: dict, path: Path) -> Path:
    """Step time against batch, one panel per context; solid: measured, dashed: bytes / measured bandwidth."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in info.get("decode", []) if "ms" in r]
    contexts = sorted({r["context"] for r in rows})
    fig, axes = plt.subplots(1, max(len(contexts), 1), figsize=(3.2 * max(len(contexts), 1), 3.6), dpi=110,
                             sharey=True, squeeze=False)
    for ax, context in zip(axes[0], contexts):
        for variant in VARIANTS:
            mine = sorted((r for r in rows if r["variant"] == variant and r["context"] == context),
                          key=lambda r: r["batch"])
            if not mine:
                continue
            batches = [r["batch"] for r in mine]
            ax.plot(batches, [r["ms"] for r in mine], marker="o", ms=3, color=colour(variant), label=LABELS[variant])
            ax.plot(batches, [r["roofline_ms"] for r in mine], ls="--", color=colour(variant), lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.set_title(f"context {context:,}", fontsize=9)
        ax.set_xlabel("batch")
    axes[0][0].set_ylabel("decode step, ms (dashed: roofline)")
    axes[0][0].legend(fontsize=7)
    return save(fig, path)
