"""Exercises 12.1–12.2 · the roofline of a decode step.  Lesson: lessons/12-roofline.md

Grade them with `make grade EX=ex12` (`make grade` grades every exercise).

Plain Python only. You may import `diffattn.core.errors.ConfigError` and, from `diffattn.pure.accounting` (lesson 04),
`ModelConfig`, `DecodeStep` and `matmul_params`; do not import `diffattn.pure.roofline` (that grades the reference,
not you). Derive the cache reads and the attention FLOPs yourself from the kernel calls described below (lesson 04's
`decode_kv_read_bytes` computes the former: use it to check your work, not to do it). 12.1 counts integers exactly;
12.2 returns a float, compared at relative 1e-9.
"""

from __future__ import annotations

from diffattn.pure.accounting import DecodeStep, ModelConfig


def decode_step(config: ModelConfig, variant: str, context: int, batch: int, bytes_per_value: int = 2,
                v1_kernel: str = "two_call") -> DecodeStep:
    """Exercise 12.1: the FLOPs and the bytes of one decode step of the whole model.

    One step appends one new token to each of `batch` sequences; every sequence already holds `context` cached
    tokens, and its new token attends to all of them (no causal mask to halve anything: the new token is the last).

    Inputs:
        config: a ModelConfig (lesson 04), valid for all four variants: hidden D, heads h, head_dim d, layers L,
            kv_heads h_kv (h_kv divides h; h and h_kv even), ffn, vocab (None: no LM head).
        variant: "baseline", "baseline_2h", "diff_v1" or "diff_v2" (lesson 04's four variants).
        context, batch, bytes_per_value: ints ≥ 1. bytes_per_value (2 = bf16) is the width of every weight and of
            every cached value alike.
        v1_kernel: "two_call" or "four_call", the official DIFF V1 kernel path; only diff_v1 depends on it, but
            it must be one of the two for every variant. Lesson 12's fused V1 kernel ("fused" in lesson 04's
            accounting) is not a third choice: it combines the maps of several new queries (training, prefill),
            and a decode step has one.

    Returns DecodeStep(flops, bytes), two exact ints (its `.intensity` is flops / bytes, FLOPs per byte moved):
        flops = batch · (2·N + L·a)            2 FLOPs per multiply-add
        bytes = bytes_per_value·N + batch·L·context·r
    where
        N = matmul_params(config, variant): the weights every token is multiplied by (every *_proj, V2's W_λ
            included, the SwiGLU FFN and the LM head; not the embedding table, which is looked up, nor norms or λ
            vectors). The step reads each of them once, whatever the batch.
        a = the attention FLOPs of one new token in one layer, and r = the bytes of K and V one layer reads per cached
            token, summed over that layer's attention-kernel calls. A call with q query heads over m KV heads, keys
            of width d_k and values of width d_v costs, per cached token, q·(d_k + d_v) multiply-adds (each query
            head scores the key, then adds its share of the value) and reads m·(d_k + d_v) values: GQA query heads
            share their KV head's cache, and every call reads everything it uses, even what another call has read.
        The calls of one layer (lesson 04):
            baseline        one call: h query heads over h_kv KV heads, d_k = d_v = d
            baseline_2h     one call: 2h query heads over h_kv KV heads, d_k = d_v = d
            diff_v2         the same single call as baseline_2h (its 2h query heads are split into pairs afterwards)
            diff_v1 two_call    attn(q1, k1, v) and attn(q2, k2, v): two calls, each h/2 query heads over h_kv/2
                                KV heads, d_k = d, d_v = 2d (the 2d-wide value v of each V1 KV head)
            diff_v1 four_call   v split into two d-wide halves, each map run on each: four calls, each h/2 query
                                heads over h_kv/2 KV heads, d_k = d_v = d

    Raises ValueError (e.g. diffattn.core.errors.ConfigError) with a one-line message if context, batch or bytes_per_value
    is < 1, the variant is unknown, or v1_kernel is neither "two_call" nor "four_call" ("fused" included, whatever
    the variant).

    Worked example (Llama-3.1-8B's shape: D 4096, 32 heads of 128, 8 KV heads, 32 layers, FFN 14336, vocab 128256):
        llama = ModelConfig(hidden=4096, heads=32, head_dim=128, layers=32, kv_heads=8, ffn=14336, vocab=128256)
        decode_step(llama, "baseline", 1024, 1) == DecodeStep(flops=15_546_187_776, bytes=15_143_534_592)
        # N = 7,504,658,432 weights (15.0 GB in bf16); the 1024 cached tokens add 128 KiB each: 1 FLOP per byte
    """
    raise NotImplementedError("exercise 12.1: count the FLOPs and the bytes of one decode step")


def roofline_crossover(weight_bytes: int, flops_per_sequence: int, bytes_per_sequence: int, peak_flops: float,
                       bandwidth: float) -> float | None:
    """Exercise 12.2: B*, the batch from which a decode step is compute-bound.

    A step of B sequences reads `weight_bytes` once (w, the weights: shared by the whole batch) and, per sequence,
    computes `flops_per_sequence` (f) and reads `bytes_per_sequence` (k, its KV cache). On a machine with peak
    `peak_flops` (P, FLOP/s) and `bandwidth` (W, bytes/s) it needs B·f/P seconds of compute and (w + B·k)/W seconds
    of memory traffic. B* is the real number B at which the two are equal; from there on compute takes at least as
    long as memory, so the first compute-bound batch is max(1, ceil(B*)) (B* may be below 1: then batch 1 already is).

    Inputs: weight_bytes, flops_per_sequence, bytes_per_sequence: ints ≥ 1. peak_flops, bandwidth: positive finite
    numbers (int or float). Only their ratio matters (P/W is the machine's ridge point): the same machine in other
    units has the same B*, so scaling both ceilings by one factor must not change your answer (the graded tests use
    factors from 2^-10 to 2^10).

    Returns B* as a float (relative tolerance 1e-9), or None when no batch is ever compute-bound: when f/P ≤ k/W, i.e.
    a sequence's own intensity f/k does not exceed the ridge point P/W (equality included: memory then always takes
    w/W longer than compute).

    Raises ValueError (e.g. diffattn.core.errors.ConfigError) with a one-line message if a count is < 1 or a ceiling is
    not a positive finite number (0, negative, inf, NaN), whatever the other arguments, even where the answer would
    be None.

    Worked example: roofline_crossover(1200, 100, 10, 8.0, 2.0) == 80.0 (at B = 80: 80·100/8 = 1000 s of compute,
    (1200 + 80·10)/2 = 1000 s of memory); roofline_crossover(1200, 100, 25, 8.0, 2.0) is None (f/k = 4 = P/W).
    """
    raise NotImplementedError("exercise 12.2: find the batch where compute time reaches memory time")
