"""Decode and prefill of the real models, timed against the roofline (lesson 12).

A decode step feeds one token per sequence through the model with B sequences of S cached tokens each, on the
preallocated cache (`diffattn.nn.cache.StaticKVCache`): a torch.cat cache would copy the whole cache every token and
time the allocator. The cache is filled with random keys and values instead of a prefill (S·B tokens of prefill would
cost more than the whole benchmark), and each timed step writes position S and is rewound, so every step sees S keys.

    achieved bandwidth = bytes / step time      bytes: every matmul weight once + the KV reads of the kernel path
    roofline step time = max(FLOPs / peak, bytes / bandwidth)   with this run's measured ceilings
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Callable

import torch

from diffattn.pure import variants as registry
from diffattn.pure.variants import REFERENCE
from diffattn.perf.bench import kernel_that_runs
from diffattn.perf.timing import round_robin
from diffattn.config import GPTConfig, accounting_model, matched_config
from diffattn.core.errors import one_line, require
from diffattn.model.gpt import GPT
from diffattn.nn.cache import StaticKVCache
from diffattn.nn.kernels import unpacked_decode
from diffattn.perf.counts import v1_kernel_path
from diffattn.perf.phases import model_phase_counts
from diffattn.pure.accounting import kernel_calls

# Llama-like proportions, small enough for a 2-core CPU: GQA group 4, weights (about 48 MB in fp32) larger than the
# course machine's 32 MiB L3, so even a batch-1 step streams them from memory.
DECODE_MODEL = GPTConfig(vocab_size=256, n_layer=4, d_model=512, n_head=8, n_kv_head=2, max_seq_len=4097)
BATCHES = (1, 4, 16, 64)
CONTEXTS = (256, 1024, 4096)


def _filled_caches(model: GPT, batch: int, capacity: int, generator: torch.Generator) -> list[StaticKVCache]:
    """Static caches of `capacity` positions with the variant's layout, filled with random K/V, length 0."""
    caches = model.new_caches("static", capacity)
    probe = torch.zeros(batch, 1, dtype=torch.long, device=model.lm_head.weight.device)
    with torch.no_grad():
        model(probe, caches)  # one token allocates each buffer in the layer's own layout
    for cache in caches:
        for buffer in (cache.k_buffer, cache.v_buffer):  # drawn where the buffer lives: GiBs on a GPU
            buffer.uniform_(-1, 1, generator=generator)
        cache.length = 0
    return caches


def _step(model: GPT, caches: list[StaticKVCache], token: torch.Tensor, context: int) -> Callable[[], None]:
    def step() -> None:
        for cache in caches:
            cache.length = context  # rewind: every timed step sees `context` cached keys
        with torch.no_grad():
            model(token, caches)
    return step


def decode_points(base: GPTConfig, variants: tuple[str, ...], batches: tuple[int, ...], contexts: tuple[int, ...],
                  ceilings: tuple[float, float], repeats: int = 5, advance: Callable[[], None] = lambda: None,
                  device: torch.device = torch.device("cpu")) -> list[dict]:
    """One row per (variant, batch, context): median step time, achieved GB/s and GFLOP/s, the roofline time.

    At each (batch, context) the variants are timed in turn (`round_robin`), their caches side by side in memory.
    `ceilings` = (peak FLOP/s, bandwidth B/s) of this run. A variant whose cache does not fit in memory gets a row
    with its error at that batch, and the grid goes on.
    """
    require(all(b >= 1 for b in batches) and all(s >= 1 for s in contexts), "batches and contexts must be >= 1")
    peak, bandwidth = ceilings
    kernel = v1_kernel_path(device)
    models = _models(base, variants, max(contexts) + 1, device)
    rows = []
    for batch in batches:
        token, caches = _batch(models, batch, contexts, rows)
        for context in contexts:
            seconds = round_robin({v: _step(models[v], c, token, context) for v, c in caches.items()}, repeats,
                                  synchronizer(device))
            for variant, taken in seconds.items():
                config = models[variant].config
                counted = model_phase_counts(config, variant, "decode", batch, context,
                                             models[variant].lm_head.weight.element_size(), kernel)
                rows.append(point(variant, "decode", batch, context, counted, taken, peak, bandwidth)
                            | {"v1_kernel": kernel if len(registry.get(variant).base.kernels) > 1 else None,
                               "kernel": decode_kernel(config, variant, batch, kernel, device)})
            for _ in variants:
                advance()
        del caches
    order = {v: i for i, v in enumerate(variants)}
    return sorted(rows, key=lambda r: (order[r["variant"]], r["batch"], r["context"]))


def _models(base: GPTConfig, variants: tuple[str, ...], capacity: int,
            device: torch.device = torch.device("cpu")) -> dict[str, GPT]:
    """The matched models of `variants` (seed 0 each, fp32), with room for `capacity` cached positions."""
    base = dataclasses.replace(base, max_seq_len=max(base.max_seq_len, capacity))
    models = {}
    for variant in variants:
        torch.manual_seed(0)
        models[variant] = GPT(matched_config(base, variant)).to(device).eval()
    return models


def synchronizer(device: torch.device) -> Callable[[], None]:
    """What waits for `device`'s queued work before a clock is read: torch.cuda.synchronize on CUDA, nothing on CPU."""
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def _batch(models: dict[str, GPT], batch: int, contexts: tuple[int, ...],
           rows: list[dict]) -> tuple[torch.Tensor, dict[str, list[StaticKVCache]]]:
    """The batch's input token and each model's filled caches; a variant whose cache does not fit in memory gets
    one error row per context in `rows` instead, and the grid goes on."""
    model = next(iter(models.values()))
    device = model.lm_head.weight.device
    generator = torch.Generator(device=device).manual_seed(batch)
    token = torch.randint(0, model.config.vocab_size, (batch, 1), generator=generator, device=device)
    caches = {}
    for variant, model in models.items():
        try:
            caches[variant] = _filled_caches(model, batch, max(contexts) + 1, generator)
        except (RuntimeError, MemoryError) as exc:  # out of memory: say so, keep the grid going
            rows += [{"variant": variant, "batch": batch, "context": s, "error": one_line(exc)} for s in contexts]
    return token, caches


def packing_ab(base: GPTConfig, variants: tuple[str, ...], batches: tuple[int, ...], contexts: tuple[int, ...],
               repeats: int = 5, advance: Callable[[], None] = lambda: None) -> list[dict]:
    """Decode steps with GQA decode packed (`diffattn.nn.kernels`, the default) and unpacked (`unpacked_decode`),
    all variants and both modes timed in turn at each (batch, context): one row per variant with both medians and
    speedup = unpacked / packed. Bytes are the kernel path's (packing reads the same KV bytes, from cache once per
    group instead of once per query head). Out-of-memory caches give error rows, as in `decode_points`."""
    require(all(b >= 1 for b in batches) and all(s >= 1 for s in contexts), "batches and contexts must be >= 1")
    require(repeats >= 1, f"repeats must be >= 1 (got {repeats})")
    kernel = v1_kernel_path(torch.device("cpu"))
    models = _models(base, variants, max(contexts) + 1)
    rows: list[dict] = []
    for batch in batches:
        token, caches = _batch(models, batch, contexts, rows)
        for context in contexts:
            steps = {}
            for variant, cache in caches.items():
                steps[f"{variant}:packed"] = step = _step(models[variant], cache, token, context)
                steps[f"{variant}:unpacked"] = _unpacked(step)
            seconds = round_robin(steps, repeats)
            for variant in caches:
                config = models[variant].config
                counted = model_phase_counts(config, variant, "decode", batch, context,
                                             models[variant].lm_head.weight.element_size(), kernel)
                packed, unpacked = seconds[f"{variant}:packed"], seconds[f"{variant}:unpacked"]
                rows.append({"variant": variant, "batch": batch, "context": context, "bytes": counted["bytes"],
                             "flops": counted["flops"], "packed_ms": packed * 1e3, "unpacked_ms": unpacked * 1e3,
                             "speedup": unpacked / packed})
                advance()
        del caches
    order = {v: i for i, v in enumerate(variants)}
    return sorted(rows, key=lambda r: (order[r["variant"]], r["batch"], r["context"]))


def _unpacked(step: Callable[[], None]) -> Callable[[], None]:
    def call() -> None:
        with unpacked_decode():
            step()
    return call


def packing_summary(rows: list[dict]) -> dict:
    """Per variant: median packed/unpacked speedup over the grid and, beside the baseline at the same (batch,
    context), the median step-time ratio unpacked and packed and the byte ratio they should approach."""
    ok = [r for r in rows if "error" not in r]
    base = {(r["batch"], r["context"]): r for r in ok if r["variant"] == REFERENCE}
    summary = {}
    for variant in dict.fromkeys(r["variant"] for r in ok):
        mine = [r for r in ok if r["variant"] == variant]
        paired = [(r, base[(r["batch"], r["context"])]) for r in mine if (r["batch"], r["context"]) in base]
        summary[variant] = {"points": len(mine), "speedup_median": statistics.median(r["speedup"] for r in mine),
                            "speedup_min": min(r["speedup"] for r in mine),
                            "speedup_max": max(r["speedup"] for r in mine)}
        if variant != REFERENCE and paired:
            summary[variant] |= {
                "unpacked_time_ratio": statistics.median(r["unpacked_ms"] / b["unpacked_ms"] for r, b in paired),
                "packed_time_ratio": statistics.median(r["packed_ms"] / b["packed_ms"] for r, b in paired),
                "bytes_ratio": statistics.median(r["bytes"] / b["bytes"] for r, b in paired)}
    return {"variants": summary, "errors": len(rows) - len(ok)}


def decode_kernel(model: GPTConfig, variant: str, batch: int, v1_kernel: str,
                  device: torch.device = torch.device("cpu")) -> str:
    """The SDPA kernel a one-query step runs for `variant`'s first attention call (its heads, widths and GQA
    group; V1's 2d-wide value as the call receives it), as `diffattn.perf.bench.kernel_that_runs` names it."""
    call = kernel_calls(variant, *_geometry(model, variant), v1_kernel)[0]
    width = model.head_dim
    value = 2 * width if registry.get(variant).base.paired_heads else width  # V1's call gets the whole 2d value
    q = torch.zeros(batch, 1, call.query_heads, width, device=device)
    k = torch.zeros(batch, 8, call.kv_heads, width, device=device)
    return kernel_that_runs(q, k, torch.zeros(batch, 8, call.kv_heads, value, device=device))


def _geometry(model: GPTConfig, variant: str) -> tuple[int, int, int]:
    config = accounting_model(model, variant)
    return config.heads, config.head_dim, config.kv_heads


def prefill_points(base: GPTConfig, variants: tuple[str, ...], batch: int, context: int,
                   ceilings: tuple[float, float], repeats: int = 3, advance: Callable[[], None] = lambda: None,
                   device: torch.device = torch.device("cpu")) -> list[dict]:
    """A forward pass of `batch` × `context` tokens per variant (no cache), timed in turn: prefill on the roofline."""
    peak, bandwidth = ceilings
    tokens = torch.randint(0, base.vocab_size, (batch, context), generator=torch.Generator().manual_seed(0))
    tokens = tokens.to(device)
    kernel = v1_kernel_path(device, queries=context)
    models = _models(base, variants, context, device)

    def forward(model: GPT) -> Callable[[], None]:
        def call() -> None:
            with torch.no_grad():
                model(tokens)
        return call

    seconds = round_robin({v: forward(m) for v, m in models.items()}, repeats, synchronizer(device))
    rows = []
    for variant, model in models.items():
        counted = model_phase_counts(model.config, variant, "prefill", batch, context,
                                     model.lm_head.weight.element_size(), kernel)
        rows.append(point(variant, "prefill", batch, context, counted, seconds[variant], peak, bandwidth))
        advance()
    return rows


def point(variant: str, phase: str, batch: int, context: int, counted: dict, seconds: float, peak: float,
          bandwidth: float) -> dict:
    """A measured point beside its roofline: `counted` from `phase_counts`, `seconds` per call, the ceilings in
    FLOP/s and B/s. of_roofline = roofline time / measured time (1 = at the roofline)."""
    ideal = max(counted["flops"] / peak, counted["bytes"] / bandwidth)
    return {"variant": variant, "phase": phase, "batch": batch, "context": context, "flops": counted["flops"],
            "bytes": counted["bytes"], "intensity": counted["intensity"], "ms": seconds * 1e3,
            "achieved_GBps": counted["bytes"] / seconds / 1e9, "achieved_GFLOPs": counted["flops"] / seconds / 1e9,
            "roofline_ms": ideal * 1e3, "of_roofline": ideal / seconds,
            "bound": "compute" if counted["flops"] / peak >= counted["bytes"] / bandwidth else "memory"}


def ratios_to_baseline(rows: list[dict]) -> list[dict]:
    """Each decode point's step time and bytes relative to the baseline's at the same batch and context: the
    measured ratio beside the one the byte count predicts (what a bandwidth-bound step should show)."""
    base = {(r["batch"], r["context"]): r for r in rows if r["variant"] == REFERENCE and "ms" in r}
    out = []
    for r in rows:
        ref = base.get((r["batch"], r["context"]))
        if ref is None or "ms" not in r or r["variant"] == REFERENCE:
            continue
        out.append({"variant": r["variant"], "batch": r["batch"], "context": r["context"],
                    "time_ratio": r["ms"] / ref["ms"], "bytes_ratio": r["bytes"] / ref["bytes"],
                    "flops_ratio": r["flops"] / ref["flops"]})
    return out


def median_ratio(ratios: list[dict], variant: str, key: str = "time_ratio") -> float | None:
    values = [r[key] for r in ratios if r["variant"] == variant]
    return statistics.median(values) if values else None
