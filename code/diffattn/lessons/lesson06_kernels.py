"""Lesson 06: how DIFF V1 and V2 map onto attention kernels, and what runs on this machine.

  machine     which backend `resolve_backend` picks here, and which SDPA kernels accept equal vs 2d-wide values
  agreement   every attention path against an fp64 math reference (kernels.backend_agreement), fp64/fp32/bf16
  v1_paths    V1's two-call path (values 2d wide) against the four-call split-value path: the same numbers
  v2_call     V2's one GQA call against a loop of two calls per differential head
  plans       kernel calls, attention FLOPs and decode-time K/V reads per variant, from the call plans below
  paper       the V1 paper's throughput table, with both ways of quoting the slowdown

`device_report` bundles the checks for a GPU (scripts/gpu_check.sh runs it; tests/test_gpu.py asserts on it).
Timings are not here on purpose: they vary run to run, so they live in notebooks/06-flashattention-kernels.ipynb.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from diffattn.pure.variants import REFERENCE
from diffattn.nn import functional as ours
from diffattn.nn import kernels
from diffattn.core.numberkinds import Bound
from diffattn.core.progress import Progress

REQUIRES = ("torch",)  # third-party packages (diffattn.lessons reads this without importing)
TITLE = "FlashAttention kernels for DIFF V1 and V2"

# Every max |difference| here is rounding: which digits come out depends on the CPU's kernels, so the lesson quotes
# only the bounds the suite asserts (diffattn.core.numberkinds), the same tolerances the kernels are tested against.
SAME_MATH = {"float64": Bound(below=1e-14), "float32": Bound(below=1e-5)}  # one computation, two orders of summing
NUMBER_KINDS = {
    **{f"agreement.{name}.worst.*": Bound(below=tol) for name, tol in
       (("float64", kernels.TOLERANCE[torch.float64]), ("float32", kernels.TOLERANCE[torch.float32]),
        ("bfloat16", kernels.TOLERANCE[torch.bfloat16]))},
    **{f"{check}.{name}": bound for check in ("v1_paths", "v2_call") for name, bound in SAME_MATH.items()},
}

# The official example.py comparison: baseline 16 heads / 8 KV heads of d = 64 at d_model 1024. V1 halves the heads
# (8 differential heads, 4 KV groups); V2 keeps 16 output heads from 32 query heads over the same 8 KV heads.
SHAPE = dict(h_base=16, h_kv_base=8, d=64, seq=4096, bytes_per_value=2)
VARIANTS = ("baseline", "v1_two_calls", "v1_four_calls", "v2_one_call")
LABELS = {"baseline": "baseline", "v1_two_calls": "V1 2 calls", "v1_four_calls": "V1 4 calls", "v2_one_call": "V2 1 call"}

# V1 paper, Appendix A, Table 7 (transcribed; H100-80GB, tokens/s, the same customised FlashAttention for both models):
# model size _ sequence length -> {"train" | "forward": (Transformer, DIFF)}.
PAPER_TABLE7 = {
    "3B_2K": {"train": (7247, 6635), "forward": (51228, 46811)},
    "3B_4K": {"train": (7491, 6718), "forward": (48762, 44521)},
    "13B_2K": {"train": (998, 942), "forward": (14346, 13653)},
}


@dataclass(frozen=True)
class KernelCall:
    """One attention-kernel launch: its head counts and widths, and which cached tensors it streams."""

    q_heads: int
    kv_heads: int
    d_qk: int
    d_v: int
    reads: str  # the K and V slices it reads, for the lesson's table


def call_plan(variant: str, h_base: int, h_kv_base: int, d: int) -> list[KernelCall]:
    """The kernel calls one attention layer makes, as in the official files (microsoft/unilm Diff-Transformer/:
    multihead_flashdiff_1.py, multihead_flashdiff_2.py, Diff-Transformer-V2/multihead_flashdiffv2.py)."""
    h, h_kv = h_base // 2, h_kv_base // 2  # V1's differential heads and KV groups
    if variant == REFERENCE:
        return [KernelCall(h_base, h_kv_base, d, d, "K, V")]
    if variant == "v1_two_calls":  # multihead_flashdiff_1.py: a kernel that accepts d_v = 2d
        return [KernelCall(h, h_kv, d, 2 * d, "K1, V"), KernelCall(h, h_kv, d, 2 * d, "K2, V")]
    if variant == "v1_four_calls":  # multihead_flashdiff_2.py: stock kernels, V split into d-wide halves
        return [KernelCall(h, h_kv, d, d, f"{k}, {v}") for k in ("K1", "K2") for v in ("V[:d]", "V[d:]")]
    if variant == "v2_one_call":  # multihead_flashdiffv2.py: one GQA call over 2h query heads
        return [KernelCall(2 * h_base, h_kv_base, d, d, "K, V")]
    raise ValueError(f"unknown variant {variant!r}")


def plan_costs(plan: list[KernelCall], seq: int, bytes_per_value: int) -> dict:
    """Causal prefill FLOPs (q kᵀ and P·V, 2 per multiply-add) and K/V bytes one decode step streams at cache `seq`."""
    visible_pairs = seq * (seq + 1) // 2  # query i sees keys 0..i
    return {
        "calls": len(plan),
        "qk_flops": sum(2 * c.q_heads * visible_pairs * c.d_qk for c in plan),
        "pv_flops": sum(2 * c.q_heads * visible_pairs * c.d_v for c in plan),
        "decode_kv_bytes": sum(c.kv_heads * seq * (c.d_qk + c.d_v) * bytes_per_value for c in plan),
    }


def plans() -> dict:
    s = SHAPE
    table = {}
    for variant in VARIANTS:
        plan = call_plan(variant, s["h_base"], s["h_kv_base"], s["d"])
        table[variant] = {"plan": [asdict(c) for c in plan], **plan_costs(plan, s["seq"], s["bytes_per_value"])}
    base = table["baseline"]
    for row in table.values():
        row["flops_vs_baseline"] = (row["qk_flops"] + row["pv_flops"]) / (base["qk_flops"] + base["pv_flops"])
        row["kv_reads_vs_baseline"] = row["decode_kv_bytes"] / base["decode_kv_bytes"]
    return {"shape": dict(s), "variants": table}


def paper_throughput() -> dict:
    """Table 7 prints (D − T)/D, DIFF's throughput change relative to DIFF itself; the slowdown relative to the
    Transformer is (T − D)/T, a smaller number."""
    rows = {}
    for setting, modes in PAPER_TABLE7.items():
        rows[setting] = {
            mode: {"transformer": t, "diff": d, "table_percent": (d - t) / d, "diff_slower": (t - d) / t}
            for mode, (t, d) in modes.items()
        }
    every = [m for modes in rows.values() for m in modes.values()]
    printed = [m["table_percent"] for m in every]
    slower = [m["diff_slower"] for m in every]
    return {"rows": rows, "table_range": [max(printed), min(printed)], "slower_range": [min(slower), max(slower)]}


def _random(shape: tuple[int, ...], generator: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


def v1_paths(dtype: torch.dtype, seed: int = 0) -> float:
    """Max |two-call − four-call| for V1's attn1 = A1·V with V 2d wide (b 2, N 64, h 4, h_kv 2, d 32)."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = _random((2, 64, 4, 32), g, dtype), _random((2, 64, 2, 32), g, dtype), _random((2, 64, 2, 64), g, dtype)
    # One call with d_v = 2d on the math path: on CPU the "sdpa" backend itself splits 2d-wide values, so comparing
    # it with split_value_attention would compare the split path with itself.
    two = kernels.attention(q, k, v, backend="math")
    four = kernels.split_value_attention(q, k, v, backend="sdpa")  # two calls, d_v = d each
    return (two - four).abs().max().item()


def v2_call(dtype: torch.dtype, seed: int = 0) -> float:
    """Max |one GQA call − per-head loop| for V2 (2h = 8 query heads over 2 KV heads, d 32)."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = _random((2, 64, 8, 32), g, dtype), _random((2, 64, 2, 32), g, dtype), _random((2, 64, 2, 32), g, dtype)
    logits = _random((2, 64, 4), g, dtype)
    one_call = kernels.diff_v2_gqa_attention(q, k, v, logits, backend="sdpa")
    groups = ours.query_head_groups(8, 2)
    heads = []
    for i in range(4):  # head i: two single-head calls on its own KV head
        kv = slice(groups[2 * i], groups[2 * i] + 1)
        a1 = kernels.attention(q[:, :, 2 * i : 2 * i + 1], k[:, :, kv], v[:, :, kv], backend="sdpa")
        a2 = kernels.attention(q[:, :, 2 * i + 1 : 2 * i + 2], k[:, :, kv], v[:, :, kv], backend="sdpa")
        heads.append(a1 - ours.sigmoid(logits[:, :, i : i + 1, None]) * a2)
    return (one_call - torch.cat(heads, dim=2)).abs().max().item()


def machine() -> dict:
    """What runs for CPU tensors: backend choices and which SDPA kernels take equal vs 2d-wide values.

    Only CPU facts, so the numbers are the same on every machine; a GPU's are in `device_report` (gpu_check.sh)."""
    q, k = torch.zeros(1, 8, 4, 64), torch.zeros(1, 8, 2, 64)
    v_equal, v_wide = torch.zeros(1, 8, 2, 64), torch.zeros(1, 8, 2, 128)
    return {
        "auto": {
            "fp32_equal_dims": kernels.resolve_backend(q, k, v_equal),
            "fp32_v1_values_2d": kernels.resolve_backend(q, k, v_wide),
            "bf16_equal_dims": kernels.resolve_backend(q.bfloat16(), k.bfloat16(), v_equal.bfloat16()),
        },
        "flash_attn_refuses": kernels.flash_attn_unsupported(q.bfloat16(), k.bfloat16(), v_equal.bfloat16()),
        "sdpa_kernels": {
            "equal_dims": kernels.sdpa_kernel_support(q, k, v_equal),
            "v1_values_2d": kernels.sdpa_kernel_support(q, k, v_wide),
        },
    }


def _worst(agreement: dict) -> dict[str, float]:
    """Max over the cases of each path's difference."""
    paths = {name for case in agreement["cases"].values() for name in case}
    return {name: max(case[name] for case in agreement["cases"].values() if name in case) for name in sorted(paths)}


def run(progress: bool = True) -> dict:
    dtypes = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16}
    with Progress(len(dtypes), "backend agreement", enabled=progress) as bar:
        agreement = {}
        for name, dtype in dtypes.items():
            result = kernels.backend_agreement("cpu", dtype)
            agreement[name] = {"tolerance": result["tolerance"], "worst": _worst(result),
                               "within_tolerance": all(x <= result["tolerance"] for x in _worst(result).values())}
            bar.advance()
    return {
        "machine": machine(),
        "agreement": agreement,
        "v1_paths": {"float64": v1_paths(torch.float64), "float32": v1_paths(torch.float32)},
        "v2_call": {"float64": v2_call(torch.float64), "float32": v2_call(torch.float32)},
        "plans": plans(),
        "paper": paper_throughput(),
    }


def report(results: dict) -> str:
    m = results["machine"]
    lines = [
        "CPU tensors (the same on every machine; GPUs are covered by `diffattn gpu-check`):",
        f"  auto picks: fp32 equal dims -> {m['auto']['fp32_equal_dims']}, fp32 V1 values (64, 128) -> "
        f"{m['auto']['fp32_v1_values_2d']}, bf16 -> {m['auto']['bf16_equal_dims']}",
        f"  flash_attn not used: {m['flash_attn_refuses'] or 'it would run'}",
        "  SDPA kernels that accept the tensors (forced one at a time):",
    ]
    for case, support in m["sdpa_kernels"].items():
        accepted = [name for name, ok in support.items() if ok]
        lines.append(f"    {case:<13} {', '.join(accepted) or 'none'}")
    lines += ["", "every path vs an fp64 math reference, max |difference| over 5 shapes, against its tolerance:"]
    for dtype, a in results["agreement"].items():
        paths = ", ".join(a["worst"])
        lines.append(f"  {dtype:<8} below {a['tolerance']:.0e}: {'ok  ' if a['within_tolerance'] else 'FAIL'} {paths}")

    def same_math(check: str) -> str:
        return ", ".join(f"{'fp64' if name == 'float64' else 'fp32'} < {bound.below:.0e}: "
                         f"{'yes' if bound.holds(results[check][name]) else 'NO'}" for name, bound in SAME_MATH.items())

    lines += [
        "",
        f"V1: two calls with 2d-wide V vs four calls on d-wide halves, max |difference|: {same_math('v1_paths')}",
        f"V2: one GQA call over 2h query heads vs two calls per head, max |difference|: {same_math('v2_call')}",
    ]
    p = results["plans"]
    s = p["shape"]
    lines += ["", f"kernel plans per layer (baseline {s['h_base']} heads / {s['h_kv_base']} KV heads, d = {s['d']}; "
              f"causal prefill at N = {s['seq']:,}; one decode step at cache {s['seq']:,}, bf16):",
              f"  {'variant':<11} {'calls':>5} {'q·k GFLOP':>10} {'P·V GFLOP':>10} {'× base':>7} "
              f"{'KV MiB/step':>12} {'× base':>7}"]
    for variant, row in p["variants"].items():
        lines.append(f"  {LABELS[variant]:<11} {row['calls']:>5} {row['qk_flops'] / 1e9:>10.2f} "
                     f"{row['pv_flops'] / 1e9:>10.2f} {row['flops_vs_baseline']:>7.2f} "
                     f"{row['decode_kv_bytes'] / 2**20:>12.2f} {row['kv_reads_vs_baseline']:>7.2f}")
    paper = results["paper"]
    lines += ["", "V1 paper, Table 7 (H100, tokens/s, Transformer vs DIFF): the table prints (D − T)/D; "
              "DIFF is slower by (T − D)/T:"]
    for setting, modes in paper["rows"].items():
        for mode, m in modes.items():
            table = f"−{abs(m['table_percent']) * 100:.0f}%"
            lines.append(f"  {setting.replace('_', ', '):<8} {mode:<8} {m['transformer']:>7,} vs {m['diff']:>7,}   "
                         f"table {table:<5}   DIFF slower {m['diff_slower']:5.1%}")
    lo, hi = paper["slower_range"]
    first, last = (f"−{abs(x):.0%}" for x in paper["table_range"])
    lines.append(f"  table range {first} … {last}; DIFF slower by {lo:.1%} … {hi:.1%}")
    return "\n".join(lines)


def figures(results: dict, outdir: Path) -> list[Path]:
    from diffattn.core.plotting import new_figure, save

    rows = results["plans"]["variants"]
    names = [LABELS[v] for v in rows]
    fig, ax = new_figure(7.0, 3.8)
    x = range(len(names))
    flops = [r["flops_vs_baseline"] for r in rows.values()]
    reads = [r["kv_reads_vs_baseline"] for r in rows.values()]
    ax.bar([i - 0.2 for i in x], flops, width=0.4, label="attention FLOPs (prefill)")
    ax.bar([i + 0.2 for i in x], reads, width=0.4, label="K/V bytes read (decode step)")
    ax.set_xticks(list(x), names)
    ax.set_ylabel("× baseline")
    ax.axhline(1.0, color="grey", linestyle=":")
    ax.set_title("Kernel cost per layer, relative to the baseline (from the call plans)")
    ax.legend(fontsize=8)
    return [save(fig, outdir / "06-kernel-costs.png")]
