"""Benchmarks: timings are reported, never asserted (lesson 06, README "Benchmarks").

    diffattn bench                 CPU: calibration, attention ops, then our V1 module fused vs four calls vs
                                   transformers' DiffLlama (when installed) at 1, 2 and all threads (`v1_module`)
    diffattn bench --device cuda   GPU: calibration (copy GB/s, bf16 GEMM TFLOP/s) + attention ops in bf16

Every row names the kernel that ran ("sdpa:CUDNN_ATTENTION", …); a failing op is a row with its error. The JSON says
whether the run can be believed (`diffattn.core.hardware.reliability`: the calibration GEMM not far below the attention
kernels it timed, a load average below the usable cores beside the run's own threads) as `"reliable"` and
`"reasons"`; the report warns when not.

Attention-op TFLOP/s use the FlashAttention benchmark convention (Dao-AILab/flash-attention,
benchmarks/benchmark_flash_attention.py and hopper/benchmark_attn.py, `flops()`): forward = 2·B·H_q·S_q·S_k·
(d_qk + d_v) FLOPs, halved when causal; forward+backward = 3.5 × forward. Each op is counted with the maps it
actually computes, so V1's four-call path is charged for computing q kᵀ twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from diffattn.config import PRESETS
from diffattn.core.errors import one_line
from diffattn.core.hardware import cpu_name, reliability, usable_cores, warning_line
from diffattn.nn.diff_v1_kernel import diff_v1_attention, fuses
from diffattn.nn.kernels import (
    attention,
    diff_v2_gqa_attention,
    resolve_backend,
    sdpa_choice,
    split_value_attention,
    value_slices,
)
from diffattn.perf import v1_module
from diffattn.perf.load import LoadLog
from diffattn.perf.timing import time_call


@dataclass(frozen=True)
class Shape:
    batch: int
    seq: int
    heads: int  # baseline query heads h_base
    head_dim: int  # d
    kv_heads: int

    @property
    def d_model(self) -> int:
        return self.heads * self.head_dim


CPU_SHAPES = (Shape(2, 512, 8, 64, 8), Shape(1, 1024, 16, 64, 4))
_GPU_SMALL = PRESETS["gpu-small"]
# the last is gpu-small's training shape (lesson 08): its "kernel" is the SDPA kernel the GPU training runs
GPU_SHAPES = (Shape(8, 2048, 16, 128, 16), Shape(4, 4096, 16, 128, 4), Shape(16, 1024, 32, 64, 8),
              Shape(_GPU_SMALL.train.batch_size, _GPU_SMALL.train.seq_len, _GPU_SMALL.model.n_head,
                    _GPU_SMALL.model.head_dim, _GPU_SMALL.model.n_kv_head))


def kernel_that_runs(q: Tensor, k: Tensor, v: Tensor) -> str:
    """"flash_attn", "math", or "sdpa:" and the SDPA kernel(s) its dispatcher picks, e.g. "sdpa:CUDNN_ATTENTION"."""
    backend = resolve_backend(q, k, v)
    return f"sdpa:{'+'.join(sorted(set(sdpa_choice(q, k, v))))}" if backend == "sdpa" else backend


Op = tuple[Callable[[], Tensor], float, float, str]


def attention_ops(s: Shape, device: torch.device, dtype: torch.dtype) -> dict[str, Op]:
    """name -> (forward closure over fresh leaf tensors, useful forward FLOPs, FLOPs the kernels actually execute,
    the kernel that runs: `kernel_that_runs`).

    baseline      h_base heads of (d, d)                       standard attention
    baseline_2h   2·h_base query heads, same KV heads          the "same query width" Transformer V2 is matched to
    diff_v1       h_base/2 heads, two calls with v of 2d       multihead_flashdiff_1 (needs d_v ≠ d support)
    diff_v1_4call h_base/2 heads, v split into d-wide halves   multihead_flashdiff_2 (equal-dims kernels)
    diff_v2       2·h_base query heads, one GQA call + λ mix   multihead_flashdiffv2
    diff_v1_fused h_base/2 heads, maps combined before V         diff_v1_kernel (CPU fp32/fp64 only)

    Useful FLOPs count each map's q kᵀ once. Executed FLOPs count q kᵀ once per value slice: where the backend splits
    V1's 2d-wide values (flash-attn, SDPA on CPU) "diff_v1" runs four d-wide calls per pair, like "diff_v1_4call".
    "diff_v1_fused" executes fewer than the useful count: each map's q kᵀ, then one P·V per pair for both maps.
    """
    g = torch.Generator(device="cpu").manual_seed(0)

    def leaf(*shape: int) -> Tensor:
        return torch.randn(shape, generator=g).to(device=device, dtype=dtype).requires_grad_()

    b, n, h, d, h_kv = s.batch, s.seq, s.heads, s.head_dim, s.kv_heads
    causal_pairs = n * (n + 1) / 2  # (query, key) pairs a causal map scores

    def flops(maps: int, d_v: int, slices: int = 1) -> float:  # q kᵀ: 2·d per pair and slice; P·V: 2·d_v per pair
        return 2.0 * b * maps * causal_pairs * (d * slices + d_v)

    q, k, v = leaf(b, n, h, d), leaf(b, n, h_kv, d), leaf(b, n, h_kv, d)
    q2h = leaf(b, n, 2 * h, d)
    lam = leaf(b, n, h)
    v1_q1, v1_q2 = leaf(b, n, h // 2, d), leaf(b, n, h // 2, d)
    v1_k1, v1_k2 = leaf(b, n, max(h_kv // 2, 1), d), leaf(b, n, max(h_kv // 2, 1), d)
    v1_v = leaf(b, n, max(h_kv // 2, 1), 2 * d)
    lam_v1 = torch.tensor(0.8, device=device, dtype=dtype)
    v1_slices = value_slices(v1_q1, v1_k1, v1_v)

    def v1(path: Callable[..., Tensor]) -> Callable[[], Tensor]:
        return lambda: path(v1_q1, v1_k1, v1_v) - lam_v1 * path(v1_q2, v1_k2, v1_v)

    equal, wide, v1_equal = kernel_that_runs(q, k, v), kernel_that_runs(v1_q1, v1_k1, v1_v), kernel_that_runs(
        v1_q1, v1_k1, v1_v[..., :d])
    ops = {
        "baseline": (lambda: attention(q, k, v), flops(h, d), flops(h, d), equal),
        "baseline_2h": (lambda: attention(q2h, k, v), flops(2 * h, d), flops(2 * h, d), kernel_that_runs(q2h, k, v)),
        "diff_v1": (v1(attention), flops(h, 2 * d), flops(h, 2 * d, v1_slices), wide),
        "diff_v1_4call": (v1(split_value_attention), flops(h, 2 * d), flops(h, 2 * d, 2), v1_equal),
        "diff_v2": (lambda: diff_v2_gqa_attention(q2h, k, v, lam), flops(2 * h, d), flops(2 * h, d),
                    kernel_that_runs(q2h, k, v)),
    }
    pairs = lambda first, second: torch.stack((first, second), dim=3).flatten(2, 3)  # noqa: E731  (2i, 2i+1) = (1, 2)
    if fuses(pairs(v1_q1, v1_q2), pairs(v1_k1, v1_k2), v1_v):
        # flops(h, d): h maps' q kᵀ (d each) and h/2 pairs' P·V of 2d, the same total as h maps with d-wide values
        ops["diff_v1_fused"] = (lambda: diff_v1_attention(pairs(v1_q1, v1_q2), pairs(v1_k1, v1_k2), v1_v, lam_v1),
                                flops(h, 2 * d), flops(h, d), "diff_v1_fused")
    return ops


def bench_attention_ops(shapes: tuple[Shape, ...], device: torch.device, dtype: torch.dtype, iters: int,
                        rows: list[dict] | None = None, saved: Callable[[], None] = lambda: None) -> list[dict]:
    """Times per op, appended to `rows` with `saved()` called after each (a time limit keeps the finished ones);
    TFLOP/s from useful FLOPs (what the math needs) and from executed FLOPs (what the kernels do). An op or shape
    that fails (a kernel that refuses it, out of memory) is a row with its error; the others still run."""
    rows = [] if rows is None else rows
    for s in shapes:
        try:
            ops = attention_ops(s, device, dtype)
        except Exception as exc:  # noqa: BLE001  the shape's row says why; the next shape still runs
            rows.append({"shape": vars(s), "op": "all", "error": one_line(exc)})
            saved()
            continue
        for name, (forward, useful, executed, kernel) in ops.items():
            row = {"shape": vars(s), "op": name, "kernel": kernel, "useful_gflop": useful / 1e9,
                   "executed_gflop": executed / 1e9}
            try:
                fwd = time_call(lambda: forward(), device, iters=iters)
                both = time_call(lambda: forward().sum().backward(), device, iters=iters)
                row |= {"fwd_ms": fwd * 1e3, "fwd_bwd_ms": both * 1e3, "fwd_tflops": useful / fwd / 1e12,
                        "fwd_bwd_tflops": 3.5 * useful / both / 1e12, "fwd_executed_tflops": executed / fwd / 1e12}
            except Exception as exc:  # noqa: BLE001
                row["error"] = one_line(exc)
            rows.append(row)
            saved()
        del ops
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def calibrate(device: torch.device) -> dict:
    """Practical ceilings of this run's machine: copy bandwidth (read + write) and a square GEMM on random data,
    CUDA: 1 GiB and 8192³ in bf16 (the MFU denominator scripts/gpu_check.sh reports beside the datasheet's); CPU:
    64 MiB and 1024³ in fp32."""
    cuda = device.type == "cuda"
    n_bytes, n, dtype = (1 << 30, 8192, torch.bfloat16) if cuda else (1 << 26, 1024, torch.float32)
    src = torch.empty(n_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    copy_s = time_call(lambda: dst.copy_(src), device, iters=20)
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    gemm_s = time_call(lambda: a @ b, device, iters=20)
    return {"copy_GBps": 2 * n_bytes / copy_s / 1e9, "gemm_tflops": 2 * n**3 / gemm_s / 1e12,
            "gemm": f"{n}x{n}x{n} {str(dtype).removeprefix('torch.')}"}


def run(device: str = "cpu", quick: bool = False, hf: bool = True,
        saved: Callable[[dict], None] = lambda info: None) -> dict:
    """Calibration and attention ops at torch's present thread count, then (CPU) the V1 module against DiffLlama at
    1, 2 and all usable threads, idle and with one core busy (`v1_module.sweep`); `saved(info)` after every part and
    op. The load is sampled after each part with the threads the run itself kept busy (`perf.load`)."""
    dev = torch.device(device)
    iters = 3 if quick else 10
    info = {"device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else cpu_name(),
            "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "usable_cores": usable_cores()}
    log = LoadLog(info)
    log.sample("start")
    written = saved

    def saved(partial: dict) -> None:  # every file written carries the verdict on what it holds so far
        partial.update(reliability(partial))
        written(partial)

    shapes, dtype = (GPU_SHAPES, torch.bfloat16) if dev.type == "cuda" else (CPU_SHAPES, torch.float32)
    log.phase(info["threads"] if dev.type == "cpu" else 1)
    try:
        info["calibration"] = calibrate(dev)
    except Exception as exc:  # noqa: BLE001  the ops are still worth timing
        info["calibration"] = {"error": one_line(exc)}
    info["dtype"] = str(dtype).removeprefix("torch.")
    info["attention_ops"] = []
    saved(info)
    bench_attention_ops(shapes[:1] if quick else shapes, dev, dtype, iters, info["attention_ops"], lambda: saved(info))
    log.sample("ops")
    if dev.type == "cpu":
        info["v1_module"] = []
        v1_module.sweep(CPU_SHAPES[:1] if quick else CPU_SHAPES, iters, hf, log, info["v1_module"], lambda: saved(info))
    log.sample("end")
    saved(info)
    return info


def format_report(info: dict) -> str:
    warning = warning_line(reliability(info))
    lines = [warning] if warning else []
    lines.append(f"{info['date']} · {info['device']} · torch {info['torch']} · {info['dtype']} · {info['threads']} "
                 "threads")
    c = info.get("calibration", {})
    if "error" in c:
        lines.append(f"calibration failed: {c['error']}")
    elif c:
        lines.append(f"calibration: copy {c['copy_GBps']:.0f} GB/s · GEMM {c['gemm']} {c['gemm_tflops']:.3g} TFLOP/s")
    lines.append("TF/s count useful FLOPs; 'exec' counts what the kernels run (q kᵀ again for each value slice)")
    lines.append(f"{'shape (B,S,h,d,h_kv)':<24}{'op':<15}{'fwd ms':>9}{'fwd+bwd ms':>12}{'fwd TF/s':>10}{'f+b TF/s':>10}"
                 f"{'exec TF/s':>10}  kernel")
    for r in info["attention_ops"]:
        s = r["shape"]
        shape = f"{s['batch']},{s['seq']},{s['heads']},{s['head_dim']},{s['kv_heads']}"
        if "error" in r:
            lines.append(f"{shape:<24}{r['op']:<15}failed: {r['error']}")
            continue
        lines.append(f"{shape:<24}{r['op']:<15}{r['fwd_ms']:>9.2f}{r['fwd_bwd_ms']:>12.2f}"
                     f"{r['fwd_tflops']:>10.3f}{r['fwd_bwd_tflops']:>10.3f}{r['fwd_executed_tflops']:>10.3f}"
                     f"  {r['kernel']}")
    lines += v1_module.report(info.get("v1_module", []))
    return "\n".join(lines)
