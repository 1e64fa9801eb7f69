"""Lesson 04: parameters, KV cache and FLOPs of baseline vs DIFF V1 vs DIFF V2, for real model shapes.

Three configs, all counted by `diffattn.pure.accounting`:
  llama7b_mha   hidden 4096, 32 heads × 128, 32 layers, SwiGLU 11008, vocab 32000 (LLaMA-7B's shape)
  llama7b_gqa8  the same with 8 KV heads (the seed's "7B" exercise with GQA)
  diff3b        the V1 paper's 3B: 28 layers, hidden 3072, FFN 8192, vocab 100,288, DIFF 12 heads = baseline 24
plus the official `example.py` module sizes (d_model 1024, DIFF 8 heads vs baseline 16) and a line-by-line
reconstruction of a public lesson script's "+8.4M per layer" so the lesson can show where that number comes from.
"""

from __future__ import annotations

from pathlib import Path

from diffattn.pure.variants import REFERENCE
from diffattn.pure.accounting import (
    COMPONENTS,
    KERNEL_ROWS,
    LABELS,
    VARIANTS,
    ModelConfig,
    accounting_table,
    attention_components,
    attention_params,
    cache_layout,
    decode_step_bytes,
    format_table,
    forward_flops_per_token,
    model_params,
    swiglu_width,
)

TITLE = "Parameters, KV cache and FLOPs: baseline vs DIFF V1 vs V2"

CONTEXT = 131072  # "128k"
CONTEXTS = (2048, 8192, 32768, 131072)
CONFIGS = {
    "llama7b_mha": dict(hidden=4096, heads=32, head_dim=128, layers=32, ffn=swiglu_width(4096), vocab=32000),
    "llama7b_gqa8": dict(hidden=4096, heads=32, head_dim=128, layers=32, kv_heads=8, ffn=swiglu_width(4096), vocab=32000),
    "diff3b": dict(hidden=3072, heads=24, head_dim=128, layers=28, ffn=8192, vocab=100288),
}
EXAMPLE = dict(hidden=1024, heads=16, head_dim=64)  # official example.py: MultiheadDiffAttn(1024, depth, 8 heads)
SWEEP_KV = (1, 2, 4, 8, 16, 32)  # KV heads for the "V2 saves ≈25% vs a 2h Transformer" sweep at 4096/32/128


def seed002_counts(hidden: int, heads: int, head_dim: int, kv_heads: int) -> dict[str, int]:
    """A public lesson script's accounting (rohitg00/ai-engineering-from-scratch, `attention_params_diff_v1/_v2`), rebuilt from our components.

    Its V2 widens W_O to 2h·d like the 2h Transformer and adds four d-vectors of λ per head; its V1 adds four
    (d/2)-vectors per head to a 4·D² module; both are compared with an MHA module of 4·D², whatever kv_heads is.
    """
    mha = attention_params("baseline", hidden, heads, head_dim)
    v2_parts = {**attention_components("baseline_2h", hidden, heads, head_dim, kv_heads),
                "lambda_vectors": 4 * heads * head_dim}
    v2 = sum(v2_parts.values())
    v1 = mha + 4 * heads * (head_dim // 2)
    return {"mha_baseline": mha, "v2": v2, "v2_extra": v2 - mha, "v2_components": v2_parts, "v1": v1,
            "v1_extra": v1 - mha}


def run(progress: bool = True) -> dict:
    """Pure arithmetic on integers: deterministic, instant, so no progress bar is needed."""
    tables = {name: accounting_table(ModelConfig(**cfg), context=CONTEXT) for name, cfg in CONFIGS.items()}
    gqa = CONFIGS["llama7b_gqa8"]
    shape = (gqa["hidden"], gqa["heads"], gqa["head_dim"])
    official = {
        layout: {v: attention_params(v, *EXAMPLE.values(), kv) for v in VARIANTS}
        for layout, kv in (("mha", None), ("gqa8", 8))
    }
    saving = {}
    for kv in SWEEP_KV:
        two_h, v2 = (attention_params(v, *shape, kv) for v in ("baseline_2h", "diff_v2"))
        saving[str(kv)] = (two_h - v2) / two_h
    seed = seed002_counts(*shape, gqa["kv_heads"])
    gqa_params = tables["llama7b_gqa8"]["params"]
    seed["official_v2_extra_vs_gqa8"] = gqa_params["diff_v2"]["attention"] - gqa_params["baseline"]["attention"]
    seed["official_v1_extra"] = gqa_params["diff_v1"]["attention"] - gqa_params["baseline"]["attention"]
    # Seed: V1 "halves the value cache per head". Its cache if V were d wide instead of 2d, relative to the truth:
    v1 = cache_layout("diff_v1", gqa["heads"], gqa["head_dim"], gqa["kv_heads"])
    seed["v1_cache_if_value_halved_vs_true"] = (v1.key_width + v1.value_width // 2) / (v1.key_width + v1.value_width)
    config_3b = ModelConfig(**CONFIGS["diff3b"])
    diff3b = {}
    for variant in ("baseline", "diff_v1"):
        untied = model_params(config_3b, variant)
        diff3b[variant] = {
            "non_embedding": untied["total"] - untied["embedding"] - untied["lm_head"],
            "tied": model_params(config_3b, variant, tied_embeddings=True)["total"],
            "untied": untied["total"],
        }
    config_7b = ModelConfig(**gqa)
    by_context = {}
    for context in CONTEXTS:
        flops = {row: forward_flops_per_token(config_7b, v, context, kernel) for row, (v, kernel) in KERNEL_ROWS.items()}
        step = {row: decode_step_bytes(config_7b, v, context, 2, kernel) for row, (v, kernel) in KERNEL_ROWS.items()}
        by_context[str(context)] = {
            row: {
                "total_vs_baseline": flops[row]["total"] / flops["baseline"]["total"],
                "attention_share": flops[row]["attention_core"] / flops[row]["total"],
                "decode_step_vs_baseline": step[row] / step["baseline"],
            }
            for row in KERNEL_ROWS
        }
    return {"context": CONTEXT, "tables": tables, "official_example": official, "v2_saving_vs_2h": saving,
            "seed002": seed, "diff3b": diff3b, "by_context": by_context}


def report(results: dict) -> str:
    tables, seed = results["tables"], results["seed002"]
    mha = tables["llama7b_mha"]["params"]
    lines = ["7B-class shape with GQA (8 KV heads), LLaMA-7B sizes otherwise:", format_table(tables["llama7b_gqa8"]), ""]
    lines.append("7B-class shape with MHA (32 KV heads): attention parameters per layer and whole model")
    for v in VARIANTS:
        lines.append(f"  {LABELS[v]:<10} {mha[v]['attention']:>13,}  model {mha[v]['model']:>15,}"
                     f"  KV {tables['llama7b_mha']['kv_cache'][v]['bytes_per_token'] // 1024} KiB/token")
    ex = results["official_example"]
    lines += ["", "official example.py sizes (d_model 1024; baseline 16 heads of 64 = DIFF V1 8 heads):"]
    for layout, counts in ex.items():
        lines.append(f"  {layout:<5} " + "  ".join(f"{LABELS[v]} {counts[v]:,}" for v in VARIANTS))
    lines += ["", "DIFF V2 vs a Transformer with 2h query heads at 4096/32/128 (saving = 1 − V2/2h):"]
    lines.append("  " + "  ".join(f"kv {kv}: {s:.1%}" for kv, s in results["v2_saving_vs_2h"].items()))
    lines += [
        "",
        "a public lesson's script, rebuilt (W_O doubled, λ = 4·d per head, against an MHA module):",
        f"  script V2 {seed['v2']:,} − MHA {seed['mha_baseline']:,} = +{seed['v2_extra']:,}  (its 'delta 8.4M')",
        f"  official V2 − its own GQA(8) baseline = +{seed['official_v2_extra_vs_gqa8']:,}",
        f"  script V1 extra +{seed['v1_extra']:,}; official V1 extra +{seed['official_v1_extra']:,} (4d λ + 2d subln)",
        f"  V1 cache if values were d wide (the 'halved value cache' claim): {seed['v1_cache_if_value_halved_vs_true']:.2f}× the real one",
        "",
        "paper's 3B (28 layers, hidden 3072, FFN 8192, vocab 100,288; DIFF 12 heads = baseline 24; MHA assumed):",
    ]
    for v, n in results["diff3b"].items():
        lines.append(f"  {LABELS[v]:<9} non-embedding {n['non_embedding']:,}  tied {n['tied']:,}  untied {n['untied']:,}")
    rows = list(KERNEL_ROWS)
    header = f"  {'context':>8} " + "".join(f"{LABELS[r]:>18}" for r in rows)
    lines += ["", "forward FLOPs per token vs baseline, 7B GQA-8, by context (attention share of the total in brackets):",
              header]
    for context, by_row in results["by_context"].items():
        cells = "".join(f"{by_row[r]['total_vs_baseline']:>10.3f}× ({by_row[r]['attention_share']:>4.0%})" for r in rows)
        lines.append(f"  {int(context):>8,} {cells}")
    lines += ["", "decode step bytes at batch 1 (weights + KV reads) vs baseline, 7B GQA-8, bf16:", header]
    for context, by_row in results["by_context"].items():
        lines.append(f"  {int(context):>8,} " + "".join(f"{by_row[r]['decode_step_vs_baseline']:>17.3f}×" for r in rows))
    return "\n".join(lines)


def figures(results: dict, outdir: Path) -> list[Path]:
    from diffattn.core.plotting import new_figure, save

    made = [_params_figure(results, outdir / "04-params-per-layer.png", new_figure, save)]
    made.append(_kv_figure(results, outdir / "04-kv-cache.png", new_figure, save))
    made.append(_flops_figure(results, outdir / "04-cost-vs-context.png", new_figure, save))
    return made


def _params_figure(results, path, new_figure, save):
    """Stacked attention parameters per layer (7B, GQA-8), with the public script's V2 and the MHA line it compares."""
    params = results["tables"]["llama7b_gqa8"]["params"]
    seed = results["seed002"]
    bars = {LABELS[v]: params[v] for v in params}  # the variants the table shows (those that fit its shape)
    bars["a public script's V2\n(W_O doubled)"] = seed["v2_components"]
    stacks = {name: [bar[name] for bar in bars.values()] for name in ("q_proj", "k_proj", "v_proj", "o_proj")}
    stacks["λ and subln (tiny)"] = [sum(bar.get(n, 0) for n in COMPONENTS[4:]) for bar in bars.values()]
    fig, ax = new_figure(9.0, 4.4)
    bottoms = [0.0] * len(bars)
    for name, heights in stacks.items():
        ax.bar(list(bars), [h / 1e6 for h in heights], bottom=bottoms, label=name)
        bottoms = [b + h / 1e6 for b, h in zip(bottoms, heights)]
    baseline = params["baseline"]["attention"]
    for x, (top, bar) in enumerate(zip(bottoms, bars.values())):
        extra = sum(bar.get(name, 0) for name in COMPONENTS) - baseline
        extra_text = f"{extra:+,}" if abs(extra) < 1e6 else f"{extra / 1e6:+.1f}M"
        ax.text(x, top + 1.0, f"{top:.1f}M\n({extra_text})", ha="center", fontsize=8)
    mha = seed["mha_baseline"] / 1e6
    ax.axhline(mha, color="black", linestyle="--", linewidth=1)
    ax.text(0.5, mha + 1.0, f"MHA module, {mha:.1f}M: what that script subtracts", fontsize=8, ha="center")
    ax.set_ylabel("attention parameters per layer (millions)")
    ax.set_title("hidden 4096, 32 heads × 128, 8 KV heads (in brackets: vs the GQA baseline)")
    ax.set_ylim(0, max(bottoms) * 1.18)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(fig, path)


def _kv_figure(results, path, new_figure, save):
    """KV cache stored vs KV bytes read per decode step at 128k, per kernel path (7B, GQA-8)."""
    table = results["tables"]["llama7b_gqa8"]
    rows = list(KERNEL_ROWS)
    stored = [table["kv_cache"][KERNEL_ROWS[r][0]]["bytes_at_context"] / 2**30 for r in rows]
    read = [table["decode"][r]["kv_bytes_read_per_token"] * results["context"] / 2**30 for r in rows]
    fig, ax = new_figure(7.0, 4.0)
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], stored, width=0.4, label="KV cache stored")
    ax.bar([x + 0.2 for x in xs], read, width=0.4, label="KV read per decode step")
    ax.set_xticks(list(xs), [LABELS[r] for r in rows])
    ax.set_ylabel(f"GiB at {results['context']:,} tokens (bf16)")
    ax.set_title("Same cache for every variant; V1's kernels read it 1.5× or 2×")
    ax.legend(fontsize=8)
    return save(fig, path)


def _flops_figure(results, path, new_figure, save):
    """Forward FLOPs and batch-1 decode bytes per token relative to the baseline, as the context grows (7B, GQA-8)."""
    by_context = results["by_context"]
    contexts = [int(c) for c in by_context]
    fig, ax = new_figure(7.2, 4.2)
    for i, row in enumerate(r for r in KERNEL_ROWS if r != REFERENCE):
        color = f"C{i}"
        ax.plot(contexts, [by_context[str(c)][row]["total_vs_baseline"] for c in contexts], marker="o", color=color,
                label=f"{LABELS[row]}: prefill FLOPs")
        ax.plot(contexts, [by_context[str(c)][row]["decode_step_vs_baseline"] for c in contexts], marker="s",
                linestyle="--", color=color, label=f"{LABELS[row]}: decode bytes")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel("per token, relative to the baseline")
    ax.set_title("Prefill compute and batch-1 decode traffic vs context")
    ax.legend(fontsize=7, ncol=2)
    return save(fig, path)
