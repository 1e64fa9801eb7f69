"""Lesson 12 (stdlib half): the decode roofline and the crossover batch, derived and checked.

Graded tests (12.1 decode_step, 12.2 roofline_crossover) call `impl.<name>` and build every expected value from the
definitions written out here (the weights each token is multiplied by, the kernel calls of each variant, the two
sides of the roofline in exact rational arithmetic), never from the reference; the known-wrong implementations in
tests/wrong/w12_*.py must fail them. The rest check the reference's own claims.

The crossover batch is checked against its definition (the first batch whose compute time reaches its memory time)
on random shapes and machines, and the lesson's worked shape, a Llama-3.1-8B-like model on an H200 at its datasheet
ceilings (989 TFLOP/s dense bf16, 4.8 TB/s HBM3e: NVIDIA's H200 SXM product specifications), is computed here rather than quoted.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diffattn.core.errors import ConfigError
from diffattn.pure.variants import VARIANTS
from diffattn.pure.accounting import ModelConfig, decode_flops_per_byte, matmul_params
from diffattn.pure.roofline import attention_decode_flops, crossover_batch, decode_step, ridge_point, step_seconds
from tests.feedback import refuses, show

H200 = (989e12, 4.8e12)  # dense bf16 FLOP/s, HBM bytes/s (datasheet)
LLAMA_8B = ModelConfig(hidden=4096, heads=32, head_dim=128, layers=32, kv_heads=8, ffn=14336, vocab=128256)
PROPERTY = settings(derandomize=True, max_examples=80, deadline=None)
GRADED_PROPERTY = settings(derandomize=True, max_examples=40, deadline=None)


@st.composite
def configs(draw):
    kv_heads = draw(st.sampled_from([2, 4, 8]))
    heads = kv_heads * draw(st.sampled_from([1, 2, 4]))
    head_dim = draw(st.sampled_from([32, 64, 128]))
    return ModelConfig(hidden=heads * head_dim, heads=heads, head_dim=head_dim, layers=draw(st.integers(1, 48)),
                       kv_heads=kv_heads, vocab=draw(st.sampled_from([None, 32000])))


def compute_bound(config, variant, context, batch, peak, bandwidth):
    step = decode_step(config, variant, context, batch)
    return step.flops / peak >= step.bytes / bandwidth


# ------------------------------------------------------------------------------------------------ graded: 12.1
# The definitions, written out (lesson 04's accounting, not the reference's code): N, the weights each token is
# multiplied by, and each variant's attention-kernel calls.

KERNEL_ROWS = [("baseline", "two_call"), ("baseline_2h", "two_call"), ("diff_v1", "two_call"),
               ("diff_v1", "four_call"), ("diff_v2", "two_call")]
NAMES = {"baseline": "baseline", "baseline_2h": "2h-head baseline", "diff_v1": "DIFF V1", "diff_v2": "DIFF V2"}
TINY_MHA = ModelConfig(hidden=8, heads=2, head_dim=4, layers=1, ffn=16)  # D 8, 2 heads of 4, no LM head


def weights_per_token(config, variant):
    """N: W_Q (2h·d wide for V2 and the 2h model), W_K and W_V (h_kv·d each), W_O (2h·d → D only for the 2h model),
    V2's W_λ (D → h), the SwiGLU FFN (3·D·F), per layer; plus the LM head (vocab·D). No embedding, norms or λ vectors."""
    D, h, d, kv, F = config.hidden, config.heads, config.head_dim, config.kv_heads, config.ffn
    doubled = variant in ("baseline_2h", "diff_v2")
    attention = D * (2 * h if doubled else h) * d + 2 * D * kv * d + (2 * h if variant == "baseline_2h" else h) * d * D
    attention += D * h if variant == "diff_v2" else 0
    return config.layers * (attention + 3 * D * F) + (config.vocab or 0) * D


def calls_of(variant, kernel, h, kv, d):
    """(query heads, KV heads, key width, value width) of each kernel call of one layer."""
    if variant == "baseline":
        return [(h, kv, d, d)]
    if variant in ("baseline_2h", "diff_v2"):
        return [(2 * h, kv, d, d)]
    return [(h // 2, kv // 2, d, 2 * d)] * 2 if kernel == "two_call" else [(h // 2, kv // 2, d, d)] * 4


def expected_step(config, variant, context, batch, bytes_per_value=2, kernel="two_call"):
    """(flops, bytes): batch · (2N + L·a) and w·N + batch · L · context · r (the docstring's definition)."""
    calls = calls_of(variant, kernel, config.heads, config.kv_heads, config.head_dim)
    n = weights_per_token(config, variant)
    attention = sum(2 * q * (dk + dv) for q, _, dk, dv in calls) * context  # a: every query head, every cached key
    reads = sum(m * (dk + dv) for _, m, dk, dv in calls) * bytes_per_value  # r: every call reads what it uses
    return batch * (2 * n + config.layers * attention), bytes_per_value * n + batch * config.layers * context * reads


def describe(config, variant, context, batch, bytes_per_value=2, kernel="two_call"):
    """'decode_step of DIFF V1 (two_call), D=8, h=2, d=4, kv_heads=2, 1 layer, FFN 16, vocab None, context 3, …'."""
    c = config
    return (f"decode_step of {NAMES[variant]}{f' ({kernel})' if variant == 'diff_v1' else ''}, D={c.hidden}, "
            f"h={c.heads}, d={c.head_dim}, kv_heads={c.kv_heads}, {c.layers} layer{'s' * (c.layers != 1)}, FFN "
            f"{c.ffn}, vocab {c.vocab}, context {context}, batch {batch}, {bytes_per_value} byte{'s' * (bytes_per_value != 1)} "
            f"per value")


def differs(got, want):
    """None when the step is (flops, bytes) = want; else which count is off, and by how much."""
    flops, moved = got
    if (flops, moved) == want:
        return None
    parts = [f"{name}: expected {w:,}, got {g:,} ({g - w:+,})".replace("(-", "(−")
             for name, g, w in (("FLOPs", flops, want[0]), ("bytes", moved, want[1])) if g != w]
    return "; ".join(parts)


def check_step(impl, config, variant, context, batch, bytes_per_value=2, kernel="two_call", why=""):
    got = impl.decode_step(config, variant, context, batch, bytes_per_value, kernel)
    problem = differs(got, expected_step(config, variant, context, batch, bytes_per_value, kernel))
    assert problem is None, f"{describe(config, variant, context, batch, bytes_per_value, kernel)}: {problem}{why}"
    return got


@pytest.mark.grade("12.1", points=2)
def test_llama_8b_decode_step_at_batch_one(impl):
    """The docstring's example, and what it means: 15.0 GB of weights, 1024 × 128 KiB of cache, 1 FLOP per byte."""
    assert weights_per_token(LLAMA_8B, "baseline") == 7_504_658_432, "the test's own N (lesson 04)"
    step = check_step(impl, LLAMA_8B, "baseline", 1024, 1)
    assert tuple(step) == (15_546_187_776, 15_143_534_592), f"decode_step(llama, 'baseline', 1024, 1): got {step}"
    assert 1.0 < step.intensity < 1.05, f"a batch-1 decode step does about 1 FLOP per byte; got {step.intensity:.4g}"
    default = impl.decode_step(LLAMA_8B, "diff_v1", 1024, 1)  # bf16 and the two-call kernel unless told otherwise
    problem = differs(default, expected_step(LLAMA_8B, "diff_v1", 1024, 1, 2, "two_call"))
    assert problem is None, f"decode_step(llama, 'diff_v1', 1024, 1) (defaults: 2 bytes per value, two_call): {problem}"
    for variant, kernel in KERNEL_ROWS[1:]:
        check_step(impl, LLAMA_8B, variant, 1024, 1, kernel=kernel)


@pytest.mark.grade("12.1", points=2)
def test_every_variant_of_a_tiny_mha_model(impl):
    """D 8, 2 heads of 4 (MHA), 1 layer, FFN 16, no LM head; context 3, batch 2, bf16: small enough to count by hand.
    N = 640 (768 for the 2h model, 720 for V2); a = 2·h_q·(d_k + d_v)·3, r = Σ m·(d_k + d_v)·2."""
    for (variant, kernel), want in zip(KERNEL_ROWS, [(2752, 1472), (3456, 1728), (2848, 1568), (2944, 1664),
                                                     (3264, 1632)]):
        assert expected_step(TINY_MHA, variant, 3, 2, 2, kernel) == want, "the test's own count"
        check_step(impl, TINY_MHA, variant, 3, 2, 2, kernel)


@pytest.mark.grade("12.1", points=1)
def test_gqa_heads_share_their_cache_and_v1_two_call_reads_its_values_twice(impl):
    """Llama's GQA(8) shape at 4096 tokens, batch 4, 1 and 4 bytes per value: the cache bytes per sequence are
    L · S · 2 · h_kv · d · w for the baseline, the 2h model and V2 (more query heads, the same KV heads), 1.5× that
    for V1's two calls (each reads its own keys and the whole 2d value), 2× for its four calls."""
    for bytes_per_value in (1, 4):
        cache = LLAMA_8B.layers * 4096 * 2 * LLAMA_8B.kv_heads * LLAMA_8B.head_dim * bytes_per_value
        for (variant, kernel), times in zip(KERNEL_ROWS, [2, 2, 3, 4, 2]):
            flops, moved = check_step(impl, LLAMA_8B, variant, 4096, 4, bytes_per_value, kernel)
            per_sequence = moved - bytes_per_value * weights_per_token(LLAMA_8B, variant)  # 4 sequences
            assert per_sequence * 2 == 4 * cache * times, (f"{describe(LLAMA_8B, variant, 4096, 4, bytes_per_value, kernel)}"
                                                       f": each sequence reads {times / 2:g}× the cache")


@pytest.mark.grade("12.1", points=2)
@GRADED_PROPERTY
@given(configs(), st.sampled_from(KERNEL_ROWS), st.integers(1, 1 << 17), st.integers(1, 512), st.sampled_from([1, 2, 4]))
def test_weights_are_read_once_per_step_and_everything_else_once_per_sequence(impl, config, row, context, batch,
                                                                               bytes_per_value):
    """bytes = w·N + batch·(cache reads), flops = batch·(per-token FLOPs): a larger batch reuses the weights."""
    variant, kernel = row
    what = describe(config, variant, context, batch, bytes_per_value, kernel)
    one = impl.decode_step(config, variant, context, 1, bytes_per_value, kernel)
    many = impl.decode_step(config, variant, context, batch, bytes_per_value, kernel)
    assert many[0] == batch * one[0], f"{what}: FLOPs must be batch × the batch-1 FLOPs ({batch} × {one[0]:,}), got {many[0]:,}"
    weights = bytes_per_value * weights_per_token(config, variant)
    assert many[1] - weights == batch * (one[1] - weights), (
        f"{what}: the weights ({weights:,} bytes) are read once per step and the cache once per sequence, so bytes "
        f"− weights must be batch × that of batch 1 ({batch} × {one[1] - weights:,}); got {many[1] - weights:,}")
    problem = differs(many, expected_step(config, variant, context, batch, bytes_per_value, kernel))
    assert problem is None, f"{what}: {problem}"


@pytest.mark.grade("12.1", points=1)
def test_counts_stay_exact_at_extreme_sizes(impl):
    """Exact integers everywhere: 2^40 cached tokens at batch 2^20 (beyond float's 2^53), and the smallest model."""
    check_step(impl, LLAMA_8B, "diff_v1", 1 << 40, 1 << 20, 2, "two_call", why=" (count in ints: floats round above 2^53)")
    check_step(impl, LLAMA_8B, "diff_v2", (1 << 40) + 1, (1 << 20) + 1, 4)
    smallest = ModelConfig(hidden=2, heads=2, head_dim=1, layers=1, ffn=1)
    for variant, kernel in KERNEL_ROWS:
        check_step(impl, smallest, variant, 1, 1, 1, kernel)


@pytest.mark.grade("12.1", points=1)
def test_decode_step_rejects_what_it_cannot_count(impl):
    for args, why in [
        (("baseline", 0, 1), "context 0"), (("diff_v2", -1, 1), "negative context"),
        (("baseline", 1024, 0), "batch 0"), (("diff_v1", 1024, -2), "negative batch"),
        (("baseline", 1024, 1, 0), "0 bytes per value"), (("diff_v2", 1024, 1, -2), "negative bytes per value"),
        (("diff_v3", 1024, 1), "unknown variant"), (("Baseline", 1024, 1), "unknown variant (names are exact)"),
        (("diff_v1", 1024, 1, 2, "one_call"), "unknown v1_kernel"),
        (("baseline", 1024, 1, 2, "one_call"), "unknown v1_kernel, even for a variant that does not use it"),
        (("diff_v2", 1024, 1, 2, "three_call"), "unknown v1_kernel, even for a variant that does not use it"),
    ]:
        with refuses(ValueError, f"decode_step(llama, {', '.join(map(repr, args))}) ({why})"):
            impl.decode_step(LLAMA_8B, *args)


@pytest.mark.grade("12.1", points=1)
def test_decode_step_refuses_the_fused_v1_kernel(impl):
    """Lesson 12's fused V1 kernel (lesson 04's accounting counts it as "fused") combines the maps of several new
    queries; a decode step has one new query and never runs it, so the docstring's only V1 paths are two_call and
    four_call, and "fused" is a ValueError for every variant."""
    for variant in ("diff_v1", "baseline", "diff_v2"):
        with refuses(ValueError, f"decode_step(llama, {variant!r}, 1024, 1, 2, 'fused') (the fused V1 kernel never "
                                 f"runs a decode step)"):
            impl.decode_step(LLAMA_8B, variant, 1024, 1, 2, "fused")


# ------------------------------------------------------------------------------------------------ graded: 12.2


def exact_crossover(w, f, k, peak, bandwidth):
    """B* = w / (f·W/P − k) in exact rational arithmetic (floats are rationals), or None when f·W ≤ k·P."""
    margin = Fraction(f) * Fraction(bandwidth) / Fraction(peak) - k
    return Fraction(w) / margin if margin > 0 else None


def is_compute_bound(batch, w, f, k, peak, bandwidth):
    """The definition, exactly: batch·f/P ≥ (w + batch·k)/W."""
    return batch * Fraction(f) / Fraction(peak) >= (w + batch * Fraction(k)) / Fraction(bandwidth)


def crossover_call(w, f, k, peak, bandwidth):
    return f"roofline_crossover({w:,}, {f:,}, {k:,}, {show(peak)}, {show(bandwidth)})"


def check_crossover(impl, w, f, k, peak, bandwidth, why=""):
    got, want = impl.roofline_crossover(w, f, k, peak, bandwidth), exact_crossover(w, f, k, peak, bandwidth)
    call = crossover_call(w, f, k, peak, bandwidth)
    if want is None:
        assert got is None, f"{call}: no batch is compute-bound (f/k ≤ P/W), expected None, got {show(got)}{why}"
    else:
        assert got is not None and abs(got - want) <= 1e-9 * want, (
            f"{call}: expected B* = {float(want)!r}, got {got!r}{why}")
    return got


def llama_costs(variant, context):
    """(w, f, k) of Llama-3.1-8B's decode in bf16: weights, and one sequence's FLOPs and cache bytes."""
    flops, moved = expected_step(LLAMA_8B, variant, context, 1)
    weights = 2 * weights_per_token(LLAMA_8B, variant)
    return weights, flops, moved - weights


@pytest.mark.grade("12.2", points=2)
def test_worked_examples_and_llama_8b_on_an_h200(impl):
    check_crossover(impl, 1200, 100, 10, 8.0, 2.0)  # the docstring's 80.0
    got = impl.roofline_crossover(1200, 100, 10, 8.0, 2.0)
    assert got == 80.0, f"{crossover_call(1200, 100, 10, 8.0, 2.0)}: at B = 80 both take 1000 s; got {show(got)}"
    peak, bandwidth = H200
    for variant, want in (("baseline", 375.8), ("diff_v2", 351.0)):
        got = check_crossover(impl, *llama_costs(variant, 256), peak, bandwidth,
                              f" (Llama-3.1-8B {NAMES[variant]} at 256 cached tokens on an H200)")
        assert round(got, 1) == want, f"Llama-3.1-8B {NAMES[variant]} at 256 tokens: B* ≈ {want}, got {got!r}"
    for context in (1024, 131072):  # the weights amortise, the cache does not: at long contexts decode stays memory-bound
        check_crossover(impl, *llama_costs("baseline", context), peak, bandwidth,
                        f" (Llama-3.1-8B at {context} cached tokens on an H200)")


@pytest.mark.grade("12.2", points=1)
def test_none_exactly_when_a_sequence_does_not_beat_the_ridge_point(impl):
    """f/k = P/W exactly (powers of two, so every float formula is exact) is not enough; B* below 1 is an answer."""
    for args, why in [((1200, 100, 25, 8.0, 2.0), " (f/k = 4 = P/W: memory always takes w/W longer)"),
                      ((1200, 100, 50, 8.0, 2.0), " (f/k = 2 < P/W: the formula's −48 is no batch)"),
                      ((1, 1, 1, 4, 1), " (f/k = 1 < P/W = 4)"),
                      ((3, 1, 1, 1, 1), " (f/k = 1 = P/W, int ceilings)")]:
        check_crossover(impl, *args, why=why)
    for args, why in [((10, 100, 10, 8.0, 2.0), " (B* = 2/3: batch 1 is already compute-bound)"),
                      ((1, 3, 1, 2, 1), " (f/k = 3 just above P/W = 2)"),
                      ((10**15, 10**12, 1, 1.0, 1.0), " (huge weights, tiny cache)")]:
        check_crossover(impl, *args, why=why)


@pytest.mark.grade("12.2", points=2)
@GRADED_PROPERTY
@given(st.integers(1, 10**12), st.integers(1, 10**9), st.floats(0.2, 5.0), st.floats(1e9, 1e16), st.floats(1e8, 1e14))
def test_b_star_is_where_compute_time_first_reaches_memory_time(impl, w, k, beat, peak, bandwidth):
    """The definition: from batch ⌈B*⌉ on, B·f/P ≥ (w + B·k)/W; below it, not (checked exactly, with 1e-9 slack)."""
    f = max(1, round(k * peak / bandwidth * beat))  # a sequence's intensity: `beat` × the ridge point
    margin = Fraction(f) * Fraction(bandwidth) - k * Fraction(peak)
    if abs(margin) < 1e-6 * Fraction(f) * Fraction(bandwidth):
        return  # a near-tie: rounding may decide it either way
    got = check_crossover(impl, w, f, k, peak, bandwidth)
    call = crossover_call(w, f, k, peak, bandwidth)
    if got is None:
        assert not is_compute_bound(10**30, w, f, k, peak, bandwidth), f"{call}: None, but a large batch is compute-bound"
        return
    first = max(1, math.ceil(got * (1 + 1e-9)))
    assert is_compute_bound(first, w, f, k, peak, bandwidth), (
        f"{call} returned {got!r}, but batch {first} is still memory-bound")
    below = math.floor(got * (1 - 1e-9))
    assert below < 1 or not is_compute_bound(below, w, f, k, peak, bandwidth), (
        f"{call} returned {got!r}, but batch {below} is already compute-bound")


@pytest.mark.grade("12.2", points=1)
def test_only_the_ratio_of_the_ceilings_matters(impl):
    """Both ceilings × the same power of two (exact): B* must not move, since only the ridge point P/W matters."""
    peak, bandwidth = H200
    for scale in (2.0**-10, 2.0**-3, 2.0**3, 2.0**10):
        for (w, f, k), label in [(llama_costs("baseline", 256), "Llama baseline, 256 tokens"),
                                 (llama_costs("diff_v2", 1024), "Llama V2, 1024 tokens: None"),
                                 ((1000, 3 * 10**9, 10**6), "B* below 1")]:
            check_crossover(impl, w, f, k, peak * scale, bandwidth * scale,
                            f" ({label}, the H200's ceilings × 2^{math.frexp(scale)[1] - 1}: only P/W counts)")


@pytest.mark.grade("12.2", points=1)
def test_roofline_crossover_rejects_impossible_costs_and_machines(impl):
    """Checked first, whatever the other arguments: also where the answer would have been None or B* below 1."""
    never, early = (1200, 100, 25, 8.0, 2.0), (10, 100, 10, 8.0, 2.0)  # None; B* = 2/3
    cases = []
    for base in (never, early):
        for position, values in ((0, (0, -1)), (1, (0, -100)), (2, (0, -10))):
            cases += [(base[:position] + (v,) + base[position + 1:]) for v in values]
        for position in (3, 4):
            cases += [(base[:position] + (v,) + base[position + 1:])
                      for v in (0.0, -8.0, math.inf, -math.inf, math.nan, 0)]
    for args in cases:
        with refuses(ValueError, f"{crossover_call(*args)} (a count must be ≥ 1, a ceiling positive and finite)"):
            impl.roofline_crossover(*args)


# ------------------------------------------------------------------------------------------------ the reference


@PROPERTY
@given(configs(), st.sampled_from(VARIANTS), st.integers(1, 1 << 17), st.floats(1e11, 1e15), st.floats(1e10, 1e13))
def test_crossover_batch_is_where_compute_time_reaches_memory_time(config, variant, context, peak, bandwidth):
    b_star = crossover_batch(config, variant, context, peak, bandwidth)
    if b_star is None:  # no batch turns compute-bound: not the first, nor a huge one
        assert not compute_bound(config, variant, context, 1 << 40, peak, bandwidth)
        return
    first = max(1, math.ceil(b_star * (1 + 1e-12)))  # the float B* may sit an ulp below the integer it names
    assert compute_bound(config, variant, context, first, peak, bandwidth)
    if first > 1 and first - 1 < b_star * (1 - 1e-12):
        assert not compute_bound(config, variant, context, first - 1, peak, bandwidth)


@PROPERTY
@given(configs(), st.sampled_from(VARIANTS), st.integers(1, 1 << 17), st.floats(1e11, 1e15), st.floats(1e10, 1e13))
def test_a_crossover_exists_exactly_when_a_sequence_beats_the_ridge_point(config, variant, context, peak, bandwidth):
    """(2N + a)/k > P/W: per sequence, FLOPs per byte of its own KV cache must exceed the machine's ridge point."""
    one = decode_step(config, variant, context, 1)
    own_bytes = one.bytes - 2 * matmul_params(config, variant)
    exists = one.flops / own_bytes > ridge_point(peak, bandwidth)
    assert (crossover_batch(config, variant, context, peak, bandwidth) is not None) == exists


def test_decode_step_counts_weights_once_and_the_cache_per_sequence():
    one, eight = (decode_step(LLAMA_8B, "baseline", 1024, b) for b in (1, 8))
    weight_bytes = 2 * matmul_params(LLAMA_8B, "baseline")
    assert eight.flops == 8 * one.flops
    assert eight.bytes - weight_bytes == 8 * (one.bytes - weight_bytes)
    kv_per_token = 2 * LLAMA_8B.layers * LLAMA_8B.kv_heads * 2 * LLAMA_8B.head_dim  # K and V, bf16: 128 KiB
    assert one.bytes - weight_bytes == 1024 * kv_per_token == 1024 * 131072


def test_attention_decode_intensity_is_the_group_size_and_twice_it_for_v2():
    """FLOPs of the attention per byte of KV it reads: g = h/h_kv for the baseline, 2g for V2 (same cache, twice the
    query heads), g for V1 on its two-call path (each call reads its own keys and the shared 2d values)."""
    g = LLAMA_8B.heads // LLAMA_8B.kv_heads
    for variant, want in (("baseline", g), ("diff_v2", 2 * g), ("diff_v1", g), ("baseline_2h", 2 * g)):
        got = decode_flops_per_byte(variant, LLAMA_8B.heads, LLAMA_8B.head_dim, LLAMA_8B.kv_heads)
        assert got == want, (variant, got)
    baseline, v2 = (attention_decode_flops(v, LLAMA_8B.heads, LLAMA_8B.head_dim, 1000, LLAMA_8B.kv_heads)
                    for v in ("baseline", "diff_v2"))
    assert baseline == 1000 * LLAMA_8B.heads * 2 * (2 * LLAMA_8B.head_dim) and v2 == 2 * baseline


def test_llama_8b_on_an_h200_turns_compute_bound_only_at_short_contexts():
    """The lesson's worked example. At S = 256 the baseline needs B ≥ 376 and V2 B ≥ 351 (V2 adds weights and
    attention FLOPs, not KV bytes); from S = 1024 on no batch is compute-bound for any variant.

    Counting the whole parameter count instead (8.03B, the embedding table included) gives 356.5 for the baseline
    and 336.5 for V2, the figures a whole-parameter count gives: but decoding looks up B rows of the
    embedding table, it does not stream the table, so N here is the 7.50B matmul weights (LM head included)."""
    peak, bandwidth = H200
    assert ridge_point(peak, bandwidth) == pytest.approx(206.04, abs=0.01)
    assert matmul_params(LLAMA_8B, "baseline") == 7_504_658_432
    b_star = {v: crossover_batch(LLAMA_8B, v, 256, peak, bandwidth) for v in VARIANTS}
    assert round(b_star["baseline"], 1) == 375.8 and round(b_star["diff_v2"], 1) == 351.0
    assert round(b_star["diff_v1"], 1) == 638.9  # its two calls read the 2d values twice
    for context in (1024, 4096, 131072):
        assert all(crossover_batch(LLAMA_8B, v, context, peak, bandwidth) is None for v in VARIANTS), context


def test_batch_one_decode_is_memory_bound_and_its_floor_is_bytes_over_bandwidth():
    peak, bandwidth = H200
    step = decode_step(LLAMA_8B, "baseline", 4096, 1)
    assert step.intensity < ridge_point(peak, bandwidth) / 100  # about 1 FLOP per byte
    assert step_seconds(step, peak, bandwidth) == step.bytes / bandwidth
    assert round(step_seconds(step, peak, bandwidth) * 1e3, 2) == 3.24  # ms: 15.01 GB of weights + 0.54 GB of cache


@pytest.mark.parametrize("peak, bandwidth", [(0.0, 1e12), (1e12, -1.0), (math.inf, 1e12), (1e12, math.nan)])
def test_machine_ceilings_must_be_positive_and_finite(peak, bandwidth):
    with pytest.raises(ConfigError, match="must be a positive finite number"):
        crossover_batch(LLAMA_8B, "baseline", 256, peak, bandwidth)
    with pytest.raises(ConfigError):
        ridge_point(peak, bandwidth)


@pytest.mark.parametrize("context, batch", [(0, 1), (256, 0), (-5, 1), (256, -2)])
def test_sizes_must_be_positive(context, batch):
    with pytest.raises(ConfigError):
        decode_step(LLAMA_8B, "diff_v2", context, batch)


@pytest.mark.parametrize("scale", [2.0**-1040, 2.0**960])
def test_crossover_batch_depends_on_the_machine_only_through_its_ridge_point(scale):
    """The same H200 in other units gives the same B*. Before exercise 12.2 the reference computed (w/W)/(f/P − k/W):
    at 2^-1040, f/P and w/W overflowed to inf and it returned nan for the baseline instead of 375.8."""
    peak, bandwidth = H200
    for variant in VARIANTS:
        want = crossover_batch(LLAMA_8B, variant, 256, peak, bandwidth)
        assert crossover_batch(LLAMA_8B, variant, 256, peak * scale, bandwidth * scale) == want, variant
