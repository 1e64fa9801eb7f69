"""The mechanisms drawn, one diagram each (`make course` writes them to outputs/figures/ with the lessons' figures).

    02-diff-map.png        one DIFF V1 head: two softmax maps, subtracted with λ, then multiplied by V
    04-kv-layout.png       what each variant caches per token and layer, from the variant registry's cache layouts
    05-v1-heads.png        DIFF V1's head pairing: h query heads → h/2 differential heads with a 2d value
    06-gqa-groups.png      grouped-query attention: which KV head each query head reads
    07-v2-heads.png        DIFF V2: 2h query heads over the baseline's KV heads, pairs subtracted with σ(λ_t)
    12-roofline-decode.png a roofline with each variant's decode step on it (lesson 12's H200 and 8B model)

The KV-cache and roofline diagrams are drawn from the code's declarations (diffattn.pure.variants,
diffattn.pure.roofline), so a change there changes the picture; the others are schematics of the modules.
tests/test_diagrams.py draws them all and compares them with the committed ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from diffattn.core.plotting import new_figure, save
from diffattn.pure import variants
from diffattn.pure.accounting import cache_layout

COLOURS = {"q1": "#4c72b0", "q2": "#dd8452", "kv": "#55a868", "v": "#8172b3", "out": "#937860"}


def _box(ax, x: float, y: float, w: float, h: float, text: str, colour: str, size: int = 9) -> None:
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02", facecolor=colour, alpha=0.25,
                                edgecolor=colour, linewidth=1.5))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size)


def _arrow(ax, start: tuple[float, float], end: tuple[float, float], colour: str = "0.3") -> None:
    ax.annotate("", xy=end, xytext=start, arrowprops=dict(arrowstyle="->", color=colour, lw=1.2))


def _blank(width: float, height: float, xlim: tuple[float, float], ylim: tuple[float, float]):
    fig, ax = new_figure(width, height)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.axis("off")
    return fig, ax


def diff_map(path: Path) -> Path:
    """One DIFF V1 head: A1 = softmax(q1 k1ᵀ/√d), A2 = softmax(q2 k2ᵀ/√d), out = (A1 − λ·A2) V."""
    fig, ax = _blank(8.0, 3.4, (0, 10), (0, 4.2))
    _box(ax, 0.2, 2.6, 1.6, 0.9, "q1, k1", COLOURS["q1"])
    _box(ax, 0.2, 0.6, 1.6, 0.9, "q2, k2", COLOURS["q2"])
    _box(ax, 2.6, 2.6, 2.0, 0.9, "A1 = softmax(q1k1ᵀ/√d)\nrows sum to 1", COLOURS["q1"], 8)
    _box(ax, 2.6, 0.6, 2.0, 0.9, "A2 = softmax(q2k2ᵀ/√d)\nrows sum to 1", COLOURS["q2"], 8)
    _box(ax, 5.5, 1.6, 1.7, 0.9, "A1 − λ·A2\nrows sum to 1 − λ", COLOURS["out"], 8)
    _box(ax, 8.0, 1.6, 1.6, 0.9, "× V\n(one value)", COLOURS["v"])
    _arrow(ax, (1.8, 3.05), (2.6, 3.05))
    _arrow(ax, (1.8, 1.05), (2.6, 1.05))
    _arrow(ax, (4.6, 3.05), (5.5, 2.3))
    _arrow(ax, (4.6, 1.05), (5.5, 1.8))
    _arrow(ax, (7.2, 2.05), (8.0, 2.05))
    ax.text(5.0, 3.9, "one DIFF V1 head: two softmax maps of the same tokens, subtracted after the softmax",
            ha="center", fontsize=8.5)
    ax.text(5.0, 0.15, "V1: λ is one learned scalar per layer. V2: the two queries share one key, and the coefficient "
            "is σ(λ_t), λ_t = W_λ x_t per token and head", ha="center", fontsize=8, color="0.3")
    return save(fig, path)


def kv_cache(path: Path, heads: int = 32, head_dim: int = 128, kv_heads: int = 8) -> Path:
    """Per token and layer, what each registered variant caches: its KV heads × (key + value widths)."""
    names = [n for n in variants.VARIANTS if variants.fits(n, heads, kv_heads)]
    fig, ax = new_figure(8.0, 0.7 + 0.55 * len(names))
    for row, name in enumerate(names):
        layout = cache_layout(name, heads, head_dim, kv_heads)
        x = 0.0
        for _ in range(layout.kv_heads):
            ax.barh(row, layout.key_width, left=x, color=COLOURS["kv"], edgecolor="white", height=0.6)
            ax.barh(row, layout.value_width, left=x + layout.key_width, color=COLOURS["v"], edgecolor="white",
                    height=0.6)
            x += layout.key_width + layout.value_width
        ax.text(x + 40, row, f"{layout.kv_heads} heads × ({layout.key_width} + {layout.value_width})",
                va="center", fontsize=8)
    ax.set_yticks(range(len(names)), [variants.LABELS[n] for n in names])
    ax.invert_yaxis()
    ax.set_xlabel("values cached per token and layer (green: keys, purple: values)")
    ax.set_title(f"KV cache per variant, baseline {heads} query heads of d = {head_dim} over {kv_heads} KV heads",
                 fontsize=9)
    ax.set_xlim(0, max(ax.get_xlim()[1], 1) * 1.25)
    return save(fig, path)


def _head_row(ax, y: float, count: int, label: str, colour_of: Callable[[int], str], width: float = 0.8) -> None:
    for i in range(count):
        _box(ax, 0.3 + i * (width + 0.15), y, width, 0.5, str(i), colour_of(i), 7)
    ax.text(-0.2, y + 0.25, label, ha="right", va="center", fontsize=8.5)


def v1_heads(path: Path, heads: int = 8) -> Path:
    """V1 keeps the baseline's width: h query heads of d become h/2 differential heads, each two maps and a 2d value."""
    fig, ax = _blank(8.5, 3.6, (-3.2, 9.5), (0, 4.2))
    _head_row(ax, 3.2, heads, f"q: {heads} heads of d", lambda i: COLOURS["q1"] if i % 2 == 0 else COLOURS["q2"])
    for p in range(heads // 2):
        left, right = 0.3 + 2 * p * 0.95, 0.3 + (2 * p + 1) * 0.95
        _box(ax, left, 1.7, right + 0.8 - left, 0.6, f"head {p}: A1 − λA2", COLOURS["out"], 7)
        _arrow(ax, (left + 0.4, 3.2), (left + 0.4, 2.3))
        _arrow(ax, (right + 0.4, 3.2), (right + 0.4, 2.3))
        _box(ax, left, 0.5, right + 0.8 - left, 0.6, "× V (2d) → norm", COLOURS["v"], 7)
        _arrow(ax, (left + 0.85, 1.7), (left + 0.85, 1.1))
    ax.text(-0.2, 2.0, f"{heads // 2} differential heads", ha="right", va="center", fontsize=8.5)
    ax.text(-0.2, 0.8, "out: (1 − λ_init)·RMSNorm", ha="right", va="center", fontsize=8.5)
    ax.text(4.0, 4.0, "DIFF V1: pairs (2i, 2i+1) of the baseline's query heads are one head's two maps",
            ha="center", fontsize=8.5)
    return save(fig, path)


def gqa_groups(path: Path, heads: int = 8, kv_heads: int = 2) -> Path:
    """Grouped-query attention: query head i reads KV head i // (heads / kv_heads)."""
    group = heads // kv_heads
    palette = [COLOURS["q1"], COLOURS["q2"], COLOURS["kv"], COLOURS["v"]]
    fig, ax = _blank(8.0, 2.8, (-3.0, 9.0), (0, 3.2))
    _head_row(ax, 2.2, heads, f"{heads} query heads", lambda i: palette[(i // group) % len(palette)])
    step = heads * 0.95 / kv_heads
    for k in range(kv_heads):
        x = 0.3 + k * step + step / 2 - 0.6
        _box(ax, x, 0.4, 1.2, 0.5, f"K, V head {k}", palette[k % len(palette)], 7)
        for i in range(k * group, (k + 1) * group):
            _arrow(ax, (0.7 + i * 0.95, 2.2), (x + 0.6, 0.9), palette[k % len(palette)])
    ax.text(-0.2, 0.65, f"{kv_heads} KV heads (cached)", ha="right", va="center", fontsize=8.5)
    ax.text(4.0, 3.0, f"GQA: each group of {group} query heads shares one cached K and V head", ha="center",
            fontsize=8.5)
    return save(fig, path)


def v2_heads(path: Path, heads: int = 4, kv_heads: int = 2) -> Path:
    """V2: 2h query heads over the same h_kv KV heads; pair (2i, 2i+1) sits in one group and becomes output head i."""
    queries, group = 2 * heads, 2 * heads // kv_heads
    palette = [COLOURS["q1"], COLOURS["q2"]]
    fig, ax = _blank(8.5, 3.8, (-3.4, 9.5), (0, 4.4))
    _head_row(ax, 3.3, queries, f"{queries} query heads (2h)", lambda i: palette[i % 2])
    for k in range(kv_heads):
        x = 0.3 + k * group * 0.95
        _box(ax, x, 2.2, group * 0.95 - 0.15, 0.5, f"K, V head {k} (one GQA call)", COLOURS["kv"], 7)
    for i in range(heads):
        x = 0.3 + 2 * i * 0.95
        _box(ax, x, 0.8, 1.75, 0.6, f"out head {i}:\na − σ(λ_t,{i})·b", COLOURS["out"], 7)
        _arrow(ax, (x + 0.85, 2.2), (x + 0.85, 1.4))
    ax.text(-0.2, 1.1, f"{heads} output heads (h)", ha="right", va="center", fontsize=8.5)
    ax.text(-0.2, 2.45, f"{kv_heads} KV heads: the baseline's", ha="right", va="center", fontsize=8.5)
    ax.text(4.0, 4.25, "DIFF V2: twice the query heads, the same KV cache, W_O reads h·d; σ(λ) per token and head",
            ha="center", fontsize=8.5)
    return save(fig, path)


def roofline_decode(path: Path) -> Path:
    """FLOP/s against arithmetic intensity at lesson 12's H200 datasheet ceilings, with the bf16 decode step of each
    variant of lesson 12's 8B GQA model: batch 1 and 64 at 4,096 cached tokens, and batch 512 at 256."""
    from diffattn.lessons.lesson12_roofline import H200, LLAMA_8B
    from diffattn.pure.roofline import decode_step

    peak, bandwidth = H200["peak"], H200["bandwidth"]
    fig, ax = new_figure(7.0, 4.2)
    xs = [0.25, peak / bandwidth, 4096.0]  # the roofline bends once, at the ridge
    ax.loglog(xs, [min(peak, bandwidth * x) for x in xs], color="black", lw=1.5, label="min(peak, bandwidth × I)")
    points = ((4096, 1, "none"), (4096, 64, None), (256, 512, None))
    markers = ("o", "s", "D")
    for name in (n for n in variants.VARIANTS if variants.fits(n, LLAMA_8B.heads, LLAMA_8B.kv_heads)):
        for (context, batch, fill), marker in zip(points, markers):
            x = decode_step(LLAMA_8B, name, context, batch, 2).intensity  # bf16 weights and cache
            ax.plot([x], [min(peak, bandwidth * x)], marker, color=variants.colour(name), markerfacecolor=fill,
                    label=variants.LABELS[name] if (context, batch) == (4096, 64) else None)
    for (context, batch, _), marker in zip(points, markers):
        ax.plot([], [], marker, color="0.4", markerfacecolor="none", label=f"S = {context:,}, batch {batch}")
    ax.axvline(peak / bandwidth, color="0.6", ls=":", lw=1)
    ax.text(peak / bandwidth * 1.1, peak / 30, "ridge: peak / bandwidth", fontsize=8, color="0.4")
    ax.set_xlabel("arithmetic intensity I of a decode step (FLOPs per byte moved)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title("memory-bound left of the ridge: at 4,096 cached tokens at every batch; at 256, batch 512 crosses "
                 "(all but V1, whose two calls read the cache 1.5 times)",
                 fontsize=9)
    ax.legend(fontsize=6.5, ncol=2, loc="lower right")
    return save(fig, path)


DIAGRAMS: dict[str, Callable[[Path], Path]] = {
    "02-diff-map.png": diff_map, "04-kv-layout.png": kv_cache, "05-v1-heads.png": v1_heads,
    "06-gqa-groups.png": gqa_groups, "07-v2-heads.png": v2_heads, "12-roofline-decode.png": roofline_decode,
}


RENDERER = "diagrams-renderer.json"  # beside the diagrams: the matplotlib and FreeType they were drawn with


def renderer() -> dict[str, str]:
    """The text renderer's versions: another FreeType places glyphs a pixel apart, so pixels compare only under one."""
    import matplotlib
    from matplotlib import ft2font

    return {"matplotlib": matplotlib.__version__, "freetype": ft2font.__freetype_version__}


def draw(lesson: str, folder: Path) -> list[Path]:
    """The diagrams of lesson `lesson` ("02"), written into `folder`, and the renderer they were drawn with."""
    from diffattn.core.results import write_json_atomic

    made = [make(folder / name) for name, make in DIAGRAMS.items() if name.startswith(f"{lesson}-")]
    if made:
        write_json_atomic(folder / RENDERER, renderer())
    return made
