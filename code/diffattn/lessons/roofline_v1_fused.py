"""Lesson 12, the fused V1 A/B: what combining V1's two maps before V (`diffattn.nn.diff_v1_kernel`) changed, beside
the four-call path it replaced and transformers' DiffLlamaAttention, at 1 and 2 torch threads with the machine idle
and at 2 threads with one core busy. Read back from the committed runs of `diffattn bench`
(outputs/bench/<run>/bench.json), never re-measured by `make course`."""

from __future__ import annotations

import json

from diffattn.core.hardware import reliability
from diffattn.core.paths import outputs_dir
from diffattn.lessons.roofline_packing import joined, load_range
from diffattn.perf.load import Setting

# Two runs of the command, each once the load had settled, on the course machine of 2026-12-06 (2-core AMD EPYC)
RUNS = {"run7": "v1-threads-amd-epyc-2026-12-06-run7",
        "run8": "v1-threads-amd-epyc-2026-12-06-run8"}
# The same command that day with the kernels that came before the threaded one, above one thread: the one-thread
# kernel in its 64-row blocks, then in 128-row blocks (lesson 12's notes, "Every thread count")
EARLIER = {"rows64": {"run1": "v1-threads-amd-epyc-2026-12-06-run1", "run2": "v1-threads-amd-epyc-2026-12-06-run2",
                      "run3": "v1-threads-amd-epyc-2026-12-06-run3", "run4": "v1-threads-amd-epyc-2026-12-06-run4"},
           "rows128": {"run5": "v1-threads-amd-epyc-2026-12-06-run5", "run6": "v1-threads-amd-epyc-2026-12-06-run6"}}
# The kernel's first form (the maps in two tensors) at 2 threads, idle and with one core busy, on a 2-core Xeon
FIRST_VERSION = {"idle": "v1-fused-intel-xeon-processor-2t-2026-12-03-idle",
                 "one_core_busy": "v1-fused-intel-xeon-processor-2t-2026-12-03-one-core-busy"}
# The course's targets: the fused module's speed over DiffLlama's by setting, and over the four calls' with a core busy
TARGET_VS_HF = {"1t": 1.30, "2t": 1.25}
TARGET_BUSY_VS_FOUR_CALLS = 1.0


def _shape_name(shape: dict) -> str:
    return f"b{shape['batch']}_s{shape['seq']}"


def _row(r: dict, op: dict) -> dict:
    return {"shape": r["shape"], "fused_ms": r["ours_fwd_bwd_ms"], "four_call_ms": r["ours_separate_fwd_bwd_ms"],
            "hf_ms": r.get("hf_fwd_bwd_ms"), "fused_speedup": r["fused_speedup"],
            "speedup_vs_hf": r.get("speedup_vs_hf"), "four_call_speedup_vs_hf": r.get("separate_speedup_vs_hf"),
            # the attention op alone (no projections, RoPE or norm), at the run's own threads: fused over four calls
            "op_speedup": op["diff_v1"]["fwd_bwd_ms"] / op["diff_v1_fused"]["fwd_bwd_ms"] if op else None}


def summary(info: dict) -> dict:
    """One run: its machine, load and verdict, and per setting ("1t", "2t", "2t_busy", …) and shape the A/B."""
    loads = [x[0] for x in info["load_average"].values() if x]
    ops: dict[str, dict] = {}
    for row in info["attention_ops"]:
        if "fwd_bwd_ms" in row:
            ops.setdefault(_shape_name(row["shape"]), {})[row["op"]] = row
    settings: dict[str, dict] = {}
    for r in info["v1_module"]:
        setting = r.get("setting", f"{info['threads']}t")  # runs before the thread sweep ran one setting
        op = ops.get(_shape_name(r["shape"]), {}) if r.get("threads", info["threads"]) == info["threads"] else {}
        settings.setdefault(setting, {})[_shape_name(r["shape"])] = _row(r, op)
    return {"machine": {"cpu": info["device"], "threads": info["threads"], "torch": info["torch"],
                        "date": info["date"], "transformers": info["v1_module"][0].get("transformers")},
            "load_min": min(loads), "load_max": max(loads), "reliable": reliability(info)["reliable"],
            "settings": settings}


def targets_met(run: dict) -> dict[str, bool]:
    """Per setting: every shape at or past its target (busy settings: against the four calls)."""
    met = {}
    for name, shapes in run["settings"].items():
        if name.endswith("_busy"):
            met[name] = all(s["fused_speedup"] >= TARGET_BUSY_VS_FOUR_CALLS for s in shapes.values())
        elif name in TARGET_VS_HF:
            met[name] = all((s["speedup_vs_hf"] or 0) >= TARGET_VS_HF[name] for s in shapes.values())
    return met


def _read(runs: dict[str, str]) -> dict:
    return {name: summary(json.loads((outputs_dir() / "bench" / folder / "bench.json").read_text()))
            for name, folder in runs.items()}


def run() -> dict:
    runs = _read(RUNS)
    for r in runs.values():
        r["targets_met"] = targets_met(r)
    return {**runs, "earlier": {kernel: _read(folders) for kernel, folders in EARLIER.items()},
            "first_version": _read(FIRST_VERSION)}


def report(results: dict) -> list[str]:
    runs = {name: results[name] for name in RUNS}
    both, first = joined(runs), runs[next(iter(RUNS))]
    m = first["machine"]
    lines = ["", f"DIFF V1 fused vs four calls vs DiffLlamaAttention ({' / '.join(runs)}; diffattn bench): "
             f"{m['cpu']}, torch {m['torch']}, transformers {m['transformers']}, {m['date']}, load average "
             + both(load_range) + ", reliable: " + both(lambda r: "yes" if r["reliable"] else "no")
             + "; module forward+backward, fp32, timed in turn",
             f"  {'shape':<14}{'setting':<26}{'fused ms':>16}{'4 calls ms':>16}{'HF ms':>16}{'fused / 4 calls':>17}"
             f"{'vs HF: fused':>15}{'4 calls':>13}"]
    for setting, shapes in first["settings"].items():
        threads, busy = int(setting.split("t")[0]), setting.endswith("_busy")
        for shape, row in shapes.items():
            s = row["shape"]
            label = f"{s['batch']}×{s['seq']}, {s['heads'] * s['head_dim']}"
            pick = lambda key, fmt: both(lambda r: format(r["settings"][setting][shape][key], fmt))  # noqa: E731
            lines.append(f"  {label:<14}{Setting(threads, busy).label:<26}{pick('fused_ms', '.1f'):>16}"
                         f"{pick('four_call_ms', '.1f'):>16}{pick('hf_ms', '.1f'):>16}{pick('fused_speedup', '.2f'):>17}"
                         f"{pick('speedup_vs_hf', '.2f'):>15}{pick('four_call_speedup_vs_hf', '.2f'):>13}")
    shape_names = list(next(iter(first["settings"].values())))
    ops = ", ".join(f"{name.removeprefix('b').replace('_s', '×')} "
                    + both(lambda r: format(r["settings"][f"{m['threads']}t"][name]["op_speedup"], ".2f"))
                    for name in shape_names)
    lines.append(f"  attention op alone at {m['threads']} threads, fwd+bwd, diff_v1_fused row vs diff_v1 row (the four "
                 f"calls on CPU): {ops}")
    words = {"1t": "on 1 thread", "2t": "on 2 threads", "2t_busy": "with a core busy"}
    goals = " and ".join(f"≥ {v:.2f}× DiffLlama {words[k]}" for k, v in TARGET_VS_HF.items())
    verdict = "; ".join(f"{words.get(name, name)} " + both(lambda r: "met" if r["targets_met"][name] else "NOT met")
                        for name in first["targets_met"])
    lines.append(f"  (speed-ups are time ratios; shape = batch×seq, d_model. Targets: fused {goals}, "
                 f"≥ {TARGET_BUSY_VS_FOUR_CALLS:.2f}× the four calls with a core busy: {verdict})")
    for kernel, earlier in results["earlier"].items():
        def cells(key: str, setting: str) -> str:
            return "; ".join(", ".join(f"{s[key]:.2f}" for s in r["settings"][setting].values())
                             for r in earlier.values())
        lines.append(f"  before, 2 threads, the one-thread kernel in {kernel.removeprefix('rows')}-row blocks "
                     f"({', '.join(earlier)}; reliable: " + ", ".join("yes" if r["reliable"] else "no"
                                                                      for r in earlier.values())
                     + f"), per run and shape: vs HF idle {cells('speedup_vs_hf', '2t')}; fused / 4 calls, core busy "
                     f"{cells('fused_speedup', '2t_busy')}")
    old = results["first_version"]
    lines.append("  2 threads, the kernel's first form (a 2-core Xeon, 2026-12-03), fused / 4 calls, per shape: "
                 + "; ".join(f"{name.replace('_', ' ')} " + ", ".join(f"{s['fused_speedup']:.2f}"
                                                                      for s in r["settings"]["2t"].values())
                             for name, r in old.items()))
    return lines
