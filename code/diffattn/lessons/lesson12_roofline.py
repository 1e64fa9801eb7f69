"""Lesson 12: the roofline. Where prefill, training and decode of baseline, DIFF V1 and DIFF V2 sit against a
machine's ceilings, derived exactly and measured on this course's machine.

  derived    Exact arithmetic (lesson 04's accounting, diffattn.pure.roofline, diffattn.perf.phases): arithmetic
             intensity of prefill and decode, decode attention's FLOPs per byte per variant, and the crossover batch B*
             of a Llama-3.1-8B-like GQA model on an H200 at its datasheet ceilings (989 TFLOP/s dense bf16, 4.8 TB/s;
             NVIDIA's H200 SXM product specifications)
  measured   the committed runs of `diffattn bench roofline` (outputs/bench/<run>/roofline.json), read back,
             never re-measured here: timings differ per machine and per run, so `make course` quotes the files that
             ship, like lessons 09-11 evaluate the checkpoints that ship. B* on the measured CPU is computed from the
             run's own ceilings.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from diffattn.core.errors import require
from diffattn.lessons import roofline_packing, roofline_v1_fused
from diffattn.pure.variants import REFERENCE, LABELS, VARIANTS
from diffattn.core.paths import outputs_dir
from diffattn.pure import accounting
from diffattn.pure.accounting import KERNEL_ROWS, ModelConfig
from diffattn.pure.roofline import crossover_batch, decode_step, ridge_point, roofline_crossover
from diffattn.perf.phases import phase_counts

TITLE = "The roofline: throughput, MFU and decode against this machine's ceilings"
# The runs the lesson quotes: two full runs on the shared 2-core course machine while it was near idle, one after the
# other (both quoted: the run-to-run spread). A key is its folder's suffix.
RUNS = {"quiet1": "roofline-amd-epyc-1t-2026-12-02-quiet1", "quiet2": "roofline-amd-epyc-1t-2026-12-02-quiet2"}
# Two earlier runs of the same command while other jobs loaded the machine: reported in summary (loaded_summary)
LOADED_RUNS = {"run1": "roofline-amd-epyc-1t-2026-12-02-run1", "run2": "roofline-amd-epyc-1t-2026-12-02-run2"}
LLAMA_8B = ModelConfig(hidden=4096, heads=32, head_dim=128, layers=32, kv_heads=8, ffn=14336, vocab=128256)
H200 = {"peak": 989e12, "bandwidth": 4.8e12}  # dense bf16 FLOP/s, HBM3e B/s (datasheet)
CONTEXTS = (256, 1024, 4096, 32768)
PHASE_CONTEXT = 4096  # prefill vs decode intensity, batch 1
POINTS = {"b1_s1024": (1, 1024), "b64_s4096": (64, 4096)}  # decode points the lesson quotes
FP32 = 4  # bytes per value on the CPU
LONG_CONTEXT = CONTEXTS[-1]


def run_path(name: str) -> Path:
    return outputs_dir() / "bench" / (RUNS | LOADED_RUNS)[name] / "roofline.json"


def derived() -> dict:
    """Exact: intensities and crossover batches of the Llama-like shape, on the H200 (bf16) and per variant."""
    rows = {}
    for row, (variant, kernel) in KERNEL_ROWS.items():
        per_context = {}
        for context in CONTEXTS:
            b_star = crossover_batch(LLAMA_8B, variant, context, H200["peak"], H200["bandwidth"], 2, kernel)
            per_context[str(context)] = None if b_star is None else b_star
        rows[row] = {
            "decode_attention_flops_per_byte": accounting.decode_flops_per_byte(variant, LLAMA_8B.heads,
                                                                                LLAMA_8B.head_dim, LLAMA_8B.kv_heads,
                                                                                2, kernel),
            "b_star_h200": per_context,
            **{f"{phase}_intensity": phase_counts(LLAMA_8B, variant, phase, 1, PHASE_CONTEXT, 2, kernel,
                                                  tied_embeddings=False)["intensity"]
               for phase in ("prefill", "decode")},
        }
    return {"model": vars(LLAMA_8B), "h200_ridge": ridge_point(H200["peak"], H200["bandwidth"]), "rows": rows,
            "fp32": fp32_memory()}


def fp32_memory() -> dict:
    """Exact: what the Llama-like model needs in fp32 (the CPU's dtype): its parameters' bytes, one sequence's KV cache
    at the longest context, and per variant the attention's own FLOPs per KV byte a/k and the whole step's per-sequence
    intensity (2N + a)/k there, the number that must exceed the ridge for B* to exist."""
    one_step = {v: decode_step(LLAMA_8B, v, LONG_CONTEXT, 1, FP32) for v in ("baseline", "diff_v2")}
    kv = {v: step.bytes - FP32 * accounting.matmul_params(LLAMA_8B, v) for v, step in one_step.items()}
    return {"param_GB": FP32 * accounting.model_params(LLAMA_8B, "baseline")["total"] / 1e9,
            "kv_GB_per_sequence": kv["baseline"] / 1e9,
            "attention_flops_per_byte": {v: accounting.decode_flops_per_byte(v, LLAMA_8B.heads, LLAMA_8B.head_dim,
                                                                             LLAMA_8B.kv_heads, FP32)
                                         for v in one_step},
            "sequence_intensity": {v: step.flops / kv[v] for v, step in one_step.items()}}


def _spread(summary: dict) -> dict:
    """A ceiling's median with the min and max of its samples: on a loaded machine the range is the measurement."""
    return {"median": summary["median"], "min": min(summary["samples"]), "max": max(summary["samples"])}


def _widest(*spreads: dict) -> float:
    """The largest max/min of the samples among these ceilings: how far one run's ceilings are from being a number."""
    return max(s["max"] / s["min"] for s in spreads)


def decode_model_b_star(info: dict, peak: float, bandwidth: float) -> dict:
    """B* of the measured decode model per context, from the run's own counts: at batch 1 and 64 a step moves
    w·N + B·k bytes, which gives w·N and k; a sequence does the batch-1 step's FLOPs."""
    rows = {(r["batch"], r["context"]): r for r in info["decode"] if r["variant"] == REFERENCE}
    out = {}
    for context in sorted({c for _, c in rows}):
        one, many = rows[(1, context)], rows[(64, context)]
        per_sequence, rest = divmod(many["bytes"] - one["bytes"], 63)  # exact: the cache grows with B, the weights not
        require(rest == 0, f"decode bytes at S = {context} are not w·N + B·k")
        out[str(context)] = roofline_crossover(one["bytes"] - per_sequence, one["flops"], per_sequence, peak,
                                               bandwidth)
    return out


def measured(info: dict) -> dict:
    """What one committed run says: its machine and load, ceilings, B* at its ceilings, decode, prefill, training."""
    roof, machine = info["roofline"], info["machine"]
    peak, bandwidth = roof["peak_GFLOPs"] * 1e9, roof["bandwidth_GBps"] * 1e9
    gemm = {row["dtype"]: row["gflops"]["median"] for row in info["ceilings"]["gemm"]}
    gemm_spread = {row["dtype"]: _spread(row["gflops"]) | {"n": row["n"]} for row in info["ceilings"]["gemm"]}
    stream = info["ceilings"]["stream"]
    b_star = {row: {str(s): crossover_batch(LLAMA_8B, variant, s, peak, bandwidth, 4, kernel) for s in CONTEXTS}
              for row, (variant, kernel) in KERNEL_ROWS.items() if row in ("baseline", "diff_v2")}
    decode = {}
    for variant in VARIANTS:
        mine = {(r["batch"], r["context"]): r for r in info["decode"] if r["variant"] == variant and "ms" in r}
        ratios = [r for r in info["decode_ratios"] if r["variant"] == variant]
        decode[variant] = {key: {"ms": mine[point]["ms"], "achieved_GBps": mine[point]["achieved_GBps"],
                                 "of_roofline": mine[point]["of_roofline"], "intensity": mine[point]["intensity"],
                                 "compute_bound": mine[point]["bound"] == "compute"}
                           for key, point in POINTS.items()}
        if ratios:
            decode[variant] |= {"median_time_ratio": statistics.median(r["time_ratio"] for r in ratios),
                                "median_bytes_ratio": statistics.median(r["bytes_ratio"] for r in ratios),
                                "largest_time_ratio": next(r["time_ratio"] for r in ratios
                                                           if (r["batch"], r["context"]) == POINTS["b64_s4096"]),
                                "largest_bytes_ratio": next(r["bytes_ratio"] for r in ratios
                                                            if (r["batch"], r["context"]) == POINTS["b64_s4096"]),
                                "largest_flops_ratio": next(r["flops_ratio"] for r in ratios
                                                            if (r["batch"], r["context"]) == POINTS["b64_s4096"])}
        decode[variant]["best_of_roofline"] = max(r["of_roofline"] for r in mine.values())
        decode[variant]["b64_s256"] = {"of_roofline": mine[(64, 256)]["of_roofline"],
                                       "compute_bound": mine[(64, 256)]["bound"] == "compute"}
    points = [r for r in info["decode"] if "ms" in r]
    b1 = [r for r in points if r["batch"] == 1]
    b_star_decode = decode_model_b_star(info, peak, bandwidth)
    grid = {"GBps_min": min(r["achieved_GBps"] for r in points), "GBps_max": max(r["achieved_GBps"] for r in points),
            "b1_GBps_min": min(r["achieved_GBps"] for r in b1), "b1_GBps_max": max(r["achieved_GBps"] for r in b1),
            "b1_memory_bound": all(r["bound"] == "memory" for r in b1),
            # the fastest any point moved its bytes, as a fraction of STREAM copy's median
            "GBps_max_of_copy": max(r["achieved_GBps"] for r in points) / stream["copy"]["median"],
            "of_roofline_min": min(r["of_roofline"] for r in points),
            "of_roofline_max": max(r["of_roofline"] for r in points),
            "of_roofline_median": statistics.median(r["of_roofline"] for r in points),
            "within_2x": sum(r["of_roofline"] >= 0.5 for r in points), "points": len(points),
            "compute_bound": sum(r["bound"] == "compute" for r in points),
            "b_star_decode_model": b_star_decode,
            # V2's attention alone on the decode model, FLOPs per fp32 byte of KV read (2g)
            "v2_attention_flops_per_byte": accounting.decode_flops_per_byte(
                "diff_v2", info["decode_model"]["n_head"], info["decode_model"]["head_dim"],
                info["decode_model"]["n_kv_head"], FP32),
            # the roofline says a point is compute-bound exactly when its batch reaches B* at its context
            "b_star_agrees": all((r["bound"] == "compute") == (b_star_decode[str(r["context"])] is not None
                                                               and r["batch"] >= b_star_decode[str(r["context"])])
                                 for r in points if r["variant"] == REFERENCE)}
    train = {}
    for preset in sorted({r["preset"] for r in info["train"]}):
        rows = {r["variant"]: r for r in info["train"] if r["preset"] == preset}
        train[preset] = {v: {"tokens_per_s": r["tokens_per_s"], "mfu": r["mfu_measured_peak"], "steps": r["steps"],
                             "vs_baseline": r["tokens_per_s"] / rows["baseline"]["tokens_per_s"],
                             # the same tokens per step: the FLOP count predicts baseline FLOPs / variant FLOPs
                             "predicted": rows["baseline"]["flops"] / r["flops"]}
                         for v, r in rows.items()}
    counter = info["flop_counter"]
    loads = [x[0] for x in info["load_average"].values() if x]
    return {
        "machine": {**{k: machine[k] for k in ("cpu", "cores", "kernel_path", "threads", "torch", "blas", "date")},
                    "load_min": min(loads), "load_max": max(loads),
                    # cores per runnable task, if every task the load average counts wanted a CPU
                    "core_share_min": machine["cores"] / max(loads), "core_share_max": machine["cores"] / min(loads)},
        "gemm_gflops": gemm, "gemm": gemm_spread, "copy_GBps": stream["copy"]["median"],
        "triad_GBps": stream["triad"]["median"], "copy": _spread(stream["copy"]), "triad": _spread(stream["triad"]),
        "stream_array_MiB": stream["array_bytes"] / 2**20, "ridge": roof["ridge_flops_per_byte"],
        "widest_spread": _widest(gemm_spread["float32"], _spread(stream["copy"]), _spread(stream["triad"])),
        "b_star_fp32": b_star, "decode": decode, "decode_grid": grid,
        # the first compute-bound batch of V2 at the longest context, and the KV cache it would hold (None: no B*)
        "v2_long_context": None if b_star["diff_v2"][str(LONG_CONTEXT)] is None else {
            "batch": math.ceil(b_star["diff_v2"][str(LONG_CONTEXT)]),
            "kv_GB": math.ceil(b_star["diff_v2"][str(LONG_CONTEXT)]) * fp32_memory()["kv_GB_per_sequence"]},
        "prefill_gflops": {r["variant"]: r["achieved_GFLOPs"] for r in info["prefill"]},
        "train": train,
        "flop_counter": {"rows": len(counter["rows"]),
                         "agree": sum(r["counted"] == r["expected"] for r in counter["rows"]),
                         # rows whose expected count includes attention (the math path); on the others the counter
                         # sees no attention, so only the projections are checked
                         "with_attention": sum(r["expected"] > r["ours_projections"] for r in counter["rows"]),
                         "cpu_fused_sdpa_counted": counter["cpu_fused_sdpa_counted"]},
    }


def gpu_runs() -> dict:
    """The GPU half: every committed scripts/gpu_check.sh summary (outputs/gpu/<gpu>-<date>/gpu-check.json) from a
    machine with a GPU, its measured bf16 GEMM and copy ceilings, ridge, the Llama-like B* at those ceilings, and its
    training and decode targets (met, missed or missing).
    CPU rehearsals of the script name no GPU and are skipped; none is committed from a GPU yet."""
    found = {}
    for path in sorted((outputs_dir() / "gpu").glob("*/gpu-check.json")):
        summary = json.loads(path.read_text())
        peaks, gpu = summary.get("peaks", {}), summary.get("machine", {}).get("gpu")
        if not gpu or not peaks.get("measured_gemm_tflops") or not peaks.get("measured_copy_GBps"):
            continue
        peak, bandwidth = peaks["measured_gemm_tflops"] * 1e12, peaks["measured_copy_GBps"] * 1e9
        found[path.parent.name] = {"gpu": gpu, "gemm_tflops": peaks["measured_gemm_tflops"],
                                   "copy_GBps": peaks["measured_copy_GBps"], "ridge": peak / bandwidth,
                                   "b_star_256": {row: crossover_batch(LLAMA_8B, variant, 256, peak, bandwidth, 2, kernel)
                                                  for row, (variant, kernel) in KERNEL_ROWS.items()},
                                   # the course's GPU figures as gpu_run.targets scored them (older runs have none)
                                   "targets": summary.get("targets", [])}
    return found


def loaded_summary(run: dict) -> dict:
    """What a loaded run gave, from its measured(): the load, the ceilings and the decode ratios the lesson compares."""
    return {"load_min": run["machine"]["load_min"], "load_max": run["machine"]["load_max"],
            "gemm_float32": run["gemm_gflops"]["float32"], "copy_GBps": run["copy_GBps"], "ridge": run["ridge"],
            "widest_spread": run["widest_spread"],
            "train_tokens_per_s": run["train"]["cpu-small"]["baseline"]["tokens_per_s"],
            **{f"{v}_time_ratio": run["decode"][v]["median_time_ratio"] for v in ("diff_v1", "diff_v2")}}


def verdicts(runs: dict, loaded: dict) -> dict:
    """Cross-run facts the prose states, counted here so that a re-measure cannot silently contradict it."""
    every = list(runs.values()) + list(loaded.values())
    v1, v2 = (lambda r: r["decode"]["diff_v1"]["median_time_ratio"]), (lambda r: r["decode"]["diff_v2"]["median_time_ratio"])
    quiet = list(runs.values())
    train = {}
    for preset in quiet[0]["train"]:
        rows = [(v, [r["train"][preset][v] for r in quiet]) for v in quiet[0]["train"][preset] if v != REFERENCE]
        train[preset] = {"runs_differ_max": max(max(x["vs_baseline"] for x in xs) - min(x["vs_baseline"] for x in xs)
                                                for _, xs in rows),
                         "below_prediction": sum(x["vs_baseline"] < x["predicted"] for _, xs in rows for x in xs),
                         "shortfall_max": max(x["predicted"] - x["vs_baseline"] for _, xs in rows for x in xs),
                         "rows": sum(len(xs) for _, xs in rows)}
    return {"runs": len(every),
            # V1 slowest, V2 slower than its bytes say, in every run, loaded or quiet
            "v1_slower_than_v2": sum(v1(r) > v2(r) for r in every),
            "v2_slower_than_its_bytes": sum(v2(r) > r["decode"]["diff_v2"]["median_bytes_ratio"] for r in every),
            # how far a loaded run's median ratio lies from a quiet run's, at most
            "v1_ratio_moved": max(abs(v1(a) - v1(b)) for a in loaded.values() for b in quiet),
            "v2_ratio_moved": max(abs(v2(a) - v2(b)) for a in loaded.values() for b in quiet),
            # quiet runs where V2's batch-64, 4,096-token step is bandwidth-bound by its counts and the run's ceilings
            "v2_b64_s4096_memory_bound": sum(not r["decode"]["diff_v2"]["b64_s4096"]["compute_bound"] for r in quiet),
            # V2 beside the same-query-width baseline at that point: the largest gap between their time ratios
            "v2_vs_2h_b64_s4096": max(abs(r["decode"]["diff_v2"]["largest_time_ratio"]
                                          - r["decode"]["baseline_2h"]["largest_time_ratio"]) for r in quiet),
            # the quiet runs' cpu-small baseline MFU, largest minus smallest
            "mfu_gap": (max(r["train"]["cpu-small"]["baseline"]["mfu"] for r in quiet)
                        - min(r["train"]["cpu-small"]["baseline"]["mfu"] for r in quiet)),
            "train": train}


def run(progress: bool = True) -> dict:
    runs = {name: measured(json.loads(run_path(name).read_text())) for name in RUNS}
    loaded = {name: measured(json.loads(run_path(name).read_text())) for name in LOADED_RUNS}
    return {"derived": derived(), "runs": runs, "run_names": dict(RUNS),
            "loaded": {name: loaded_summary(r) for name, r in loaded.items()}, "loaded_names": dict(LOADED_RUNS),
            "verdicts": verdicts(runs, loaded), "gpu": gpu_runs(), "packing": roofline_packing.run(),
            "v1_fused": roofline_v1_fused.run()}


def _b_star(value: float | None) -> str:
    return "none" if value is None else f"{value:,.0f}"


def _range(x: dict) -> str:
    return f"{x['median']:.1f} ({x['min']:.1f}–{x['max']:.1f})"


def report(results: dict) -> str:
    d, runs = results["derived"], results["runs"]
    names = list(runs)
    both = lambda f: " / ".join(f(runs[n]) for n in names)  # noqa: E731  run1 / run2
    m = runs[names[0]]["machine"]
    lines = [f"Lesson 12 · {TITLE}", "",
             "Derived (exact): Llama-3.1-8B-like GQA model (D 4096, 32 heads × 128, 8 KV heads, 32 layers, FFN 14336, "
             "vocab 128256), bf16",
             f"  H200 datasheet: 989 TFLOP/s / 4.8 TB/s = ridge {d['h200_ridge']:.1f} FLOP/B",
             f"  {'row':<14}{'decode attn':>12}{'prefill':>9}{'decode':>8}   B* on the H200 at S = "
             + ", ".join(f"{s:,}" for s in CONTEXTS),
             f"  {'':<14}{'FLOP/B':>12}{'FLOP/B':>9}{'FLOP/B':>8}   (prefill, decode: batch 1, S = {PHASE_CONTEXT:,})"]
    for row, r in d["rows"].items():
        lines.append(f"  {accounting.LABELS[row]:<14}{r['decode_attention_flops_per_byte']:>12.2f}"
                     f"{r['prefill_intensity']:>9.0f}{r['decode_intensity']:>8.2f}   "
                     + ", ".join(_b_star(r["b_star_h200"][str(s)]) for s in CONTEXTS))
    lines += ["", f"Measured ({' / '.join(names)}): {m['cpu']} ({m['kernel_path']}), {m['cores']} cores, "
              f"{m['threads']} torch thread, torch {m['torch']}, BLAS {m['blas']}, {m['date']}",
              "  load average (1 min) during the runs: " + both(lambda r: f"{r['machine']['load_min']:.1f}–"
                                                              f"{r['machine']['load_max']:.1f}"),
              "  cores per runnable task (cores / load): " + both(lambda r: f"{r['machine']['core_share_min']:.2f}–"
                                                                    f"{r['machine']['core_share_max']:.2f}"),
              "  GEMM GFLOP/s, median (min–max of the samples):"]
    lines += [f"    {dtype} n = {runs[names[0]]['gemm'][dtype]['n']:,}: " + both(lambda r, t=dtype: _range(r["gemm"][t]))
              for dtype in runs[names[0]]["gemm"]]
    lines += [f"  STREAM ({runs[names[0]]['stream_array_MiB']:.0f} MiB arrays), GB/s: copy "
              + both(lambda r: _range(r["copy"])) + ", triad " + both(lambda r: _range(r["triad"])),
              "  widest max/min of one ceiling's samples (fp32 GEMM, copy, triad): "
              + both(lambda r: f"{r['widest_spread']:.2f}"),
              "  ridge (fp32 GEMM / copy): " + both(lambda r: f"{r['ridge']:.1f}") + " FLOP/B",
              "  B* of the Llama-like model on this CPU (fp32, the run's ceilings), S = "
              + ", ".join(f"{s:,}" for s in CONTEXTS) + ":"]
    for row in ("baseline", "diff_v2"):
        lines.append(f"    {accounting.LABELS[row]:<10}" + both(
            lambda r, w=row: ", ".join(_b_star(r["b_star_fp32"][w][str(s)]) for s in CONTEXTS)))
    fp32 = d["fp32"]
    lines.append(f"    memory: {fp32['param_GB']:.1f} GB of fp32 parameters, {fp32['kv_GB_per_sequence']:.1f} GB of KV "
                 f"cache per {LONG_CONTEXT:,}-token sequence; V2 at S = {LONG_CONTEXT:,}, first compute-bound batch: "
                 + both(lambda r: "none" if r["v2_long_context"] is None
                        else f"{r['v2_long_context']['batch']} ({r['v2_long_context']['kv_GB']:.0f} GB of cache)"))
    lines.append(f"    per-sequence intensity (2n_w + a)/c at S = {LONG_CONTEXT:,}: baseline "
                 f"{fp32['sequence_intensity']['baseline']:.2f}, DIFF V2 {fp32['sequence_intensity']['diff_v2']:.2f} "
                 f"(attention alone a/k: {fp32['attention_flops_per_byte']['baseline']:.2f}, "
                 f"{fp32['attention_flops_per_byte']['diff_v2']:.2f}) FLOP/B")
    lines += ["", "  decode (static cache, fp32): step ms (fraction of the roofline speed); vs the baseline: time / bytes "
              "(median over the grid), time / bytes / FLOPs at B 64, S 4,096"]
    for name in names:
        lines.append(f"  {name}: {'variant':<10}{'B 1, S 1,024':>15}{'B 64, S 4,096':>16}{'median':>13}"
                     f"{'at B 64, S 4,096':>20}")
        for variant in VARIANTS:
            x = runs[name]["decode"][variant]
            small, large = (f"{x[k]['ms']:.1f} ({x[k]['of_roofline']:.2f})" for k in ("b1_s1024", "b64_s4096"))
            ratios = (f"{x['median_time_ratio']:.2f}/{x['median_bytes_ratio']:.2f}",
                      f"{x['largest_time_ratio']:.2f}/{x['largest_bytes_ratio']:.2f}/{x['largest_flops_ratio']:.2f}"
                      ) if "median_time_ratio" in x else ("-", "-")
            lines.append(f"  {'':<{len(name) + 2}}{LABELS[variant]:<10}{small:>15}{large:>16}{ratios[0]:>13}"
                         f"{ratios[1]:>20}")
    lines += ["  decode grid (4 variants × 4 batches × 3 contexts): achieved GB/s " + both(
        lambda r: f"{r['decode_grid']['GBps_min']:.2f}–{r['decode_grid']['GBps_max']:.2f}")
        + " (batch 1: " + both(lambda r: f"{r['decode_grid']['b1_GBps_min']:.2f}–{r['decode_grid']['b1_GBps_max']:.2f}")
        + "), at most " + both(lambda r: f"{r['decode_grid']['GBps_max_of_copy']:.2f}") + " of the copy median"
        + "; fraction of the roofline " + both(lambda r: f"{r['decode_grid']['of_roofline_min']:.2f}–"
                                                      f"{r['decode_grid']['of_roofline_max']:.2f}")
        + ", median " + both(lambda r: f"{r['decode_grid']['of_roofline_median']:.2f}")
        + "; points within 2× of it " + both(lambda r: f"{r['decode_grid']['within_2x']}")
        + " of " + str(runs[names[0]]["decode_grid"]["points"]),
        "  decode model's B* (baseline) at S = 256, 1,024, 4,096: " + both(lambda r: ", ".join(
            _b_star(x) for x in r["decode_grid"]["b_star_decode_model"].values()))
        + "; points the roofline calls compute-bound " + both(lambda r: str(r["decode_grid"]["compute_bound"]))
        + "; baseline's exactly those at or past its B*: " + both(lambda r: str(r["decode_grid"]["b_star_agrees"])),
        f"  DIFF V2 at B 64, S 4,096 ({runs[names[0]]['decode']['diff_v2']['b64_s4096']['intensity']:.2f} FLOP/B): "
        + both(lambda r: "compute" if r["decode"]["diff_v2"]["b64_s4096"]["compute_bound"] else "memory")
        + "-bound by the run's ceilings"]
    lines += ["", "  prefill (B 1, S 1,024) GFLOP/s: " + ", ".join(
        f"{LABELS[v]} " + both(lambda r, x=v: f"{r['prefill_gflops'][x]:.1f}") for v in VARIANTS)]
    lines.append(f"  training ({runs[names[0]]['train'][next(iter(runs[names[0]]['train']))]['baseline']['steps']} steps "
                 "per variant): tokens/s, utilisation of the measured fp32 GEMM rate, tokens/s vs baseline "
                 "(FLOP-predicted)")
    for preset in runs[names[0]]["train"]:
        for variant in VARIANTS:
            lines.append(f"    {preset:<10}{LABELS[variant]:<12}" + both(
                lambda r, p=preset, v=variant: f"{r['train'][p][v]['tokens_per_s']:,.0f} tok/s, "
                                               f"GEMM util {r['train'][p][v]['mfu']:.0%}, {r['train'][p][v]['vs_baseline']:.2f}× "
                                               f"({r['train'][p][v]['predicted']:.2f})"))
    gpus = results["gpu"]
    lines.append("  GPU runs (scripts/gpu_check.sh): " + ("; ".join(
        f"{g['gpu']}: GEMM {g['gemm_tflops']:.0f} TFLOP/s, copy {g['copy_GBps']:.0f} GB/s, ridge {g['ridge']:.0f}, "
        f"B* at S = 256 {_b_star(g['b_star_256']['baseline'])} (baseline)" for g in gpus.values())
        if gpus else "none committed yet; the H200 rows above use its datasheet ceilings"))
    lines += [f"    {name}: {t['rule']}: " + ("missing (" + t["missing"] + ")" if t["met"] is None else
                                              f"{t['value']:.2f}, {'met' if t['met'] else 'MISSED'}")
              for name, g in gpus.items() for t in g["targets"]]
    fc = runs[names[0]]["flop_counter"]
    lines.append(f"  FlopCounterMode vs our counts: {fc['agree']} of {fc['rows']} (variant, backend) rows agree "
                 f"exactly ({fc['with_attention']} with attention, math path; {fc['rows'] - fc['with_attention']} "
                 f"projections only, SDPA); CPU fused SDPA counted: {fc['cpu_fused_sdpa_counted']}")
    loaded, v = results["loaded"], results["verdicts"]
    lines += ["", f"Loaded runs ({' / '.join(loaded)}, the same command while other jobs ran): load average "
              + " / ".join(f"{x['load_min']:.1f}–{x['load_max']:.1f}" for x in loaded.values())
              + "; fp32 GEMM " + " / ".join(f"{x['gemm_float32']:.1f}" for x in loaded.values())
              + " GFLOP/s, copy " + " / ".join(f"{x['copy_GBps']:.1f}" for x in loaded.values())
              + " GB/s, ridge " + " / ".join(f"{x['ridge']:.1f}" for x in loaded.values())
              + "; decode time / baseline, median: DIFF V1 " + " / ".join(f"{x['diff_v1_time_ratio']:.2f}"
                                                                        for x in loaded.values())
              + ", DIFF V2 " + " / ".join(f"{x['diff_v2_time_ratio']:.2f}" for x in loaded.values()),
              f"  over all {v['runs']} runs: V1 slower than V2 in {v['v1_slower_than_v2']}, V2 slower than its bytes "
              f"say in {v['v2_slower_than_its_bytes']}; the median ratios moved by at most {v['v1_ratio_moved']:.2f} "
              f"(V1) and {v['v2_ratio_moved']:.2f} (V2) between a loaded and a quiet run"]
    return "\n".join(lines + roofline_packing.report(results["packing"]) + roofline_v1_fused.report(results["v1_fused"]))


def figures(results: dict, outdir: Path) -> list[Path]:
    from diffattn.perf import plots

    info = json.loads(run_path(next(iter(RUNS))).read_text())  # the first quoted run; the others' are in their folders
    return [plots.roofline(info, outdir / "12-roofline.png"), plots.decode_latency(info, outdir / "12-decode.png")]
