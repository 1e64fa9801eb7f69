"""Lesson 12, the fused V1 A/B: what combining V1's two maps before V (`diffattn.nn.diff_v1_kernel`) changed, beside
the four-call path it replaced and transformers' DiffLlamaAttention. Read back from the committed runs of
`diffattn bench` (outputs/bench/<run>/bench.json), never re-measured by `make course`."""

from __future__ import annotations

import json

from diffattn.lessons.roofline_packing import joined, load_range
from diffattn.core.paths import outputs_dir

# Two runs of the command, one after the other, on the course machine of 2026-12-03 (AVX-512 Intel Xeon, 1 thread)
RUNS = {"run1": "v1-fused-intel-xeon-processor-1t-2026-12-03-run1",
        "run2": "v1-fused-intel-xeon-processor-1t-2026-12-03-run2"}
# Two threads, measured with the kernel's first version (commit 2f699d9: the maps in two tensors, fused at any thread
# count): once with both cores free, once with another process spinning on one core. Why it now needs one thread.
THREAD_RUNS = {"idle": "v1-fused-intel-xeon-processor-2t-2026-12-03-idle",
               "one_core_busy": "v1-fused-intel-xeon-processor-2t-2026-12-03-one-core-busy"}
TARGET_VS_HF = 1.10  # the course's target: our V1 attention fwd+bwd at least 1.10× DiffLlamaAttention's speed on CPU


def _shape_name(shape: dict) -> str:
    return f"b{shape['batch']}_s{shape['seq']}"


def summary(info: dict) -> dict:
    """One run: its machine and load, the V1 module's A/B per shape, and the attention ops' fused vs four calls."""
    loads = [x[0] for x in info["load_average"].values() if x]
    ops = {}
    for row in info["attention_ops"]:
        if "fwd_bwd_ms" in row:
            ops.setdefault(_shape_name(row["shape"]), {})[row["op"]] = row
    shapes = {}
    for r in info["v1_module"]:
        name = _shape_name(r["shape"])
        op = ops.get(name, {})
        shapes[name] = {
            "shape": r["shape"], "fused_ms": r["ours_fwd_bwd_ms"], "four_call_ms": r["ours_separate_fwd_bwd_ms"],
            "hf_ms": r["hf_fwd_bwd_ms"], "fused_speedup": r["fused_speedup"], "speedup_vs_hf": r["speedup_vs_hf"],
            "four_call_speedup_vs_hf": r["separate_speedup_vs_hf"], "target_met": r["speedup_vs_hf"] >= TARGET_VS_HF,
            # the attention op alone (no projections, RoPE or norm): fused over the four calls, fwd+bwd
            "op_speedup": op["diff_v1"]["fwd_bwd_ms"] / op["diff_v1_fused"]["fwd_bwd_ms"] if op else None,
        }
    return {"machine": {"cpu": info["device"], "threads": info["threads"], "torch": info["torch"],
                        "date": info["date"], "transformers": info["v1_module"][0]["transformers"]},
            "load_min": min(loads), "load_max": max(loads), "shapes": shapes}


def _read(runs: dict[str, str]) -> dict:
    return {name: summary(json.loads((outputs_dir() / "bench" / folder / "bench.json").read_text()))
            for name, folder in runs.items()}


def run() -> dict:
    return {**_read(RUNS), "two_threads": _read(THREAD_RUNS)}


def report(results: dict) -> list[str]:
    runs = {name: results[name] for name in RUNS}
    both, shapes = joined(runs), results["run1"]["shapes"]  # run1 / run2, the shapes both runs timed
    m = results["run1"]["machine"]
    lines = ["", f"DIFF V1 fused vs four calls vs DiffLlamaAttention ({' / '.join(runs)}; diffattn bench): "
             f"{m['cpu']}, {m['threads']} torch thread, torch {m['torch']}, transformers {m['transformers']}, "
             f"{m['date']}, load average " + both(load_range)
             + "; module forward+backward, fp32, timed in turn",
             f"  {'shape':<16}{'fused ms':>16}{'4 calls ms':>16}{'HF ms':>16}{'fused / 4 calls':>18}"
             f"{'vs HF: fused':>16}{'4 calls':>14}{'op alone':>14}"]
    for shape, row in shapes.items():
        s = row["shape"]
        label = f"{s['batch']}×{s['seq']}, {s['heads'] * s['head_dim']}"
        pick = lambda key, fmt: both(lambda r: format(r["shapes"][shape][key], fmt))  # noqa: E731
        lines.append(f"  {label:<16}{pick('fused_ms', '.1f'):>16}{pick('four_call_ms', '.1f'):>16}"
                     f"{pick('hf_ms', '.1f'):>16}{pick('fused_speedup', '.2f'):>18}{pick('speedup_vs_hf', '.2f'):>16}"
                     f"{pick('four_call_speedup_vs_hf', '.2f'):>14}{pick('op_speedup', '.2f'):>14}")
    met = all(s["target_met"] for r in runs.values() for s in r["shapes"].values())
    lines.append(f"  (speed-ups are time ratios; shape = batch×seq, d_model; the target, fused ≥ {TARGET_VS_HF:.2f}× "
                 f"DiffLlama on every shape and run: {'met' if met else 'NOT met'})")
    two = results["two_threads"]
    lines.append("  2 threads, the kernel's first version (commit 2f699d9), fused / 4 calls: "
                 + "; ".join(f"{name.replace('_', ' ')} " + " / ".join(f"{s['fused_speedup']:.2f}"
                                                                      for s in r["shapes"].values())
                             for name, r in two.items()) + " (the two shapes above)")
    return lines
