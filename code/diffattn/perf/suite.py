"""`diffattn bench decode|train|roofline`: this machine's ceilings and every measured point, in one run.

    ceilings   GEMM GFLOP/s per dtype, STREAM copy and triad GB/s (perf.ceilings)
    counts     our FLOP counts against FlopCounterMode on the real modules (perf.counts)
    decode     step time and achieved bandwidth, batch × context × variant, on the preallocated cache (perf.decode)
    prefill    one forward pass per variant (perf.decode)
    train      tokens/s and MFU of the presets (perf.training)

The roofline uses this run's fp32 GEMM median as the peak and STREAM copy's median as the bandwidth. Everything runs
at one thread count (`threads`): on a loaded machine two OpenMP threads can wait on each other far longer than one
thread computes, so the count is part of the result. The JSON records the machine, the torch build, the date and
the load average before and after each part (the machine may be shared), and whether the run can be believed
(`diffattn.core.hardware.reliability`: no point above its own roofline, no MFU above 100 %, a GEMM ceiling not far below
the run's own points, a load average below the usable cores): `"reliable"` and its `"reasons"`, and a warning line
in the report when it cannot.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import sys
from pathlib import Path
from typing import Callable

import torch

from diffattn.config import GPTConfig
from diffattn.nn.cpu import native_path, threads as torch_threads
from diffattn.core.errors import require
from diffattn.core.hardware import cpu_name, reliability, usable_cores, warning_line
from diffattn.pure.variants import VARIANTS
from diffattn.core.paths import outputs_dir
from diffattn.perf import ceilings, counts, decode, training

PARTS = ("ceilings", "counts", "decode", "prefill", "train")
WHAT = {"decode": ("ceilings", "decode"), "train": ("ceilings", "train"), "roofline": PARTS}
# the quick run's decode model, and the FlopCounterMode check's model in every run (its counts are exact at any size)
QUICK_MODEL = GPTConfig(vocab_size=64, n_layer=2, d_model=64, n_head=4, n_kv_head=2, max_seq_len=64)


def machine(n_threads: int, device: str = "cpu") -> dict:
    gpu = {"device": device, "gpu": torch.cuda.get_device_name(0)} if device == "cuda" else {"device": device}
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "usable_cores": usable_cores(), "kernel_path": native_path(),
            "threads": n_threads,
            "torch": torch.__version__, "python": platform.python_version(), "blas": ceilings.blas_library(),
            "date": datetime.date.today().isoformat(), **gpu}


# On a GPU an eager decode step of the CPU grid's sizes is mostly kernel launches: longer contexts and larger batches
# give the bytes a chance to dominate (the largest point's caches: about 4 GiB per variant in fp32).
GPU_DECODE = {"batches": (1, 8, 32, 64), "contexts": (1024, 4096, 16384), "repeats": 10}


def plan(quick: bool, device: str = "cpu") -> dict:
    """Sizes of the run: the full one fits in about 5 minutes on the 2-core course machine, the quick one in seconds;
    a full run on CUDA takes the GPU decode grid."""
    if quick:
        return {"gemm_sizes": {torch.float32: 64, torch.float64: 64}, "stream_n": 1 << 16, "repeats": 2,
                "decode_model": QUICK_MODEL, "batches": (1, 2), "contexts": (16, 32), "prefill": (1, 32),
                "presets": ("cpu-tiny",), "train_steps": 2, "train_overrides": {"batch_size": 2, "seq_len": 32}}
    return {"gemm_sizes": None, "stream_n": None, "repeats": 5, "decode_model": decode.DECODE_MODEL,
            "batches": decode.BATCHES, "contexts": decode.CONTEXTS, "prefill": (1, 1024), "presets": training.PRESETS,
            "train_steps": 10, "train_overrides": {}} | (GPU_DECODE if device == "cuda" else {})


def _total(parts: tuple[str, ...], p: dict, device: torch.device) -> int:
    sizes = {"ceilings": len(p["gemm_sizes"] or ceilings.default_gemm_sizes(device)) + 1, "counts": 1,
             "decode": len(VARIANTS) * len(p["batches"]) * len(p["contexts"]), "prefill": len(VARIANTS),
             "train": len(p["presets"]) * len(VARIANTS)}
    return sum(sizes[part] for part in parts)


def run(what: str = "roofline", quick: bool = False, n_threads: int | None = None, progress: bool = True,
        saved: Callable[[dict], None] = lambda info: None, device: str = "cpu") -> dict:
    """Measure the parts `what` names (decode, train or roofline = all) on `device` (cpu or cuda: every timing
    synchronised), calling `saved(info)` after each part."""
    require(what in WHAT, f"what must be one of {', '.join(WHAT)} (got {what!r})")
    require(device in ("cpu", "cuda"), f"device must be cpu or cuda (got {device!r})")
    require(device == "cpu" or torch.cuda.is_available(), "--device cuda needs a CUDA GPU and none is visible")
    n_threads = torch.get_num_threads() if n_threads is None else n_threads
    require(n_threads >= 1, f"threads must be >= 1 (got {n_threads})")
    from tqdm import tqdm

    p, parts, where = plan(quick, device), WHAT[what], torch.device(device)
    info = {"what": what, "quick": quick, "machine": machine(n_threads, device),
            "load_average": {"start": ceilings.load_average()}}
    with torch_threads(n_threads), tqdm(total=_total(parts, p, where), desc=f"bench {what}", file=sys.stderr,
                                        disable=not progress, leave=False) as bar:
        advance = lambda: bar.update(1)  # noqa: E731
        info["ceilings"] = ceilings.measure(where, p["gemm_sizes"], p["stream_n"], p["repeats"], advance)
        roof = (ceilings.peak_gflops(info["ceilings"], "float32") * 1e9, ceilings.bandwidth_gbps(info["ceilings"]) * 1e9)
        info["roofline"] = {"peak_GFLOPs": roof[0] / 1e9, "peak_dtype": "float32", "bandwidth_GBps": roof[1] / 1e9,
                            "bandwidth_kernel": "copy", "ridge_flops_per_byte": roof[0] / roof[1]}
        _part_done(info, "ceilings", saved)
        if "counts" in parts:
            info["flop_counter"] = {"torch": torch.__version__, "cpu_fused_sdpa_counted": counts.cpu_fused_sdpa_counted(),
                                    "gqa_formula": counts.flop_counter_gqa(),
                                    "rows": counts.flop_counter_check(QUICK_MODEL, batch=2, seq=32)}
            advance()
            _part_done(info, "counts", saved)
        if "decode" in parts:
            model = p["decode_model"]
            info["decode_model"] = {k: v for k, v in vars(model).items() if isinstance(v, (int, float, str))}
            info["decode"] = decode.decode_points(model, VARIANTS, p["batches"], p["contexts"], roof, p["repeats"],
                                                  advance, where)
            info["decode_ratios"] = decode.ratios_to_baseline(info["decode"])
            _part_done(info, "decode", saved)
        if "prefill" in parts:
            batch, context = p["prefill"]
            info["prefill"] = decode.prefill_points(p["decode_model"], VARIANTS, batch, context, roof, 3, advance,
                                                    where)
            _part_done(info, "prefill", saved)
        if "train" in parts:
            info["train"] = training.train_points(p["presets"], VARIANTS, p["train_steps"], roof, None, advance,
                                                 **p["train_overrides"], device=device)
            _part_done(info, "train", saved)
    return info


def _part_done(info: dict, part: str, saved: Callable[[dict], None]) -> None:
    """The load after `part`, the verdict on everything measured so far, then the file."""
    info["load_average"][part] = ceilings.load_average()
    info.update(reliability(info))
    saved(info)


def format_report(info: dict) -> str:
    m, roof = info["machine"], info["roofline"]
    warning = warning_line(reliability(info))
    lines = [warning] if warning else []
    lines.append(f"{m['date']} · {m['cpu']} ({m['kernel_path']}) · {m['threads']} thread(s) · torch {m['torch']} · "
                 f"BLAS {m['blas']} · load average {info['load_average']}")
    for row in info["ceilings"]["gemm"]:
        lines.append(f"GEMM {row['n']}³ {row['dtype']:<9} {row['gflops']['median']:8.2f} GFLOP/s (median of "
                     f"{len(row['gflops']['samples'])}, best {row['gflops']['best']:.2f})")
    stream = info["ceilings"]["stream"]
    lines.append(f"STREAM {stream['array_bytes'] / 2**20:.0f} MiB arrays: copy {stream['copy']['median']:.2f} GB/s, "
                 f"triad {stream['triad']['median']:.2f} GB/s (medians; 16 and 24 B per element)")
    lines.append(f"roofline: {roof['peak_GFLOPs']:.1f} GFLOP/s fp32 / {roof['bandwidth_GBps']:.2f} GB/s = ridge "
                 f"{roof['ridge_flops_per_byte']:.1f} FLOP/B")
    for r in info.get("flop_counter", {}).get("rows", []):
        lines.append(f"FlopCounterMode {r['variant']:<12}{r['backend']:<5} counted {r['counted']:>12,} expected "
                     f"{r['expected']:>12,} {'ok' if r['counted'] == r['expected'] else 'DIFFERS'}")
    for key in ("decode", "prefill", "train"):
        if key in info:
            lines.append(f"{key}: {'variant':<12}{'B':>4}{'S':>6}{'ms':>10}{'GB/s':>8}{'GFLOP/s':>9}{'roof ms':>9}"
                         f"{'of roof':>9}" + ("  tokens/s  MFU" if key == "train" else ""))
            for r in info[key]:
                if "error" in r:
                    lines.append(f"  {r['variant']:<12}{r['batch']:>4}{r['context']:>6}  failed: {r['error']}")
                    continue
                extra = f"  {r['tokens_per_s']:8.0f}  {r['mfu_measured_peak']:.1%}" if key == "train" else ""
                name = f"{r['preset']}:{r['variant']}" if key == "train" else r["variant"]
                lines.append(f"  {name:<12}{r['batch']:>4}{r['context']:>6}{r['ms']:>10.2f}"
                             f"{r['achieved_GBps']:>8.2f}{r['achieved_GFLOPs']:>9.2f}{r['roofline_ms']:>9.2f}"
                             f"{r['of_roofline']:>9.2f}{extra}")
    for variant in VARIANTS[1:]:
        ratio = decode.median_ratio(info.get("decode_ratios", []), variant)
        if ratio is not None:
            predicted = decode.median_ratio(info["decode_ratios"], variant, "bytes_ratio")
            lines.append(f"decode {variant} / baseline: median time ratio {ratio:.2f} (bytes predict {predicted:.2f})")
    return "\n".join(lines)


def default_out(what: str, n_threads: int) -> Path:
    """outputs/bench/<what>-<cpu>-<threads>t-<date>/, the machine in the name (e.g. roofline-amd-epyc-1t-2026-12-02)."""
    cpu = re.sub(r"[^a-z0-9]+", "-", cpu_name().lower()).strip("-")
    return outputs_dir() / "bench" / f"{what}-{cpu}-{n_threads}t-{datetime.date.today().isoformat()}"
