"""Lesson 12 (stdlib half): the decode roofline and the crossover batch, derived and checked.

The crossover batch is checked against its definition (the first batch whose compute time reaches its memory time)
on random shapes and machines, and the lesson's worked shape, a Llama-3.1-8B-like model on an H200 at its datasheet
ceilings (989 TFLOP/s dense bf16, 4.8 TB/s HBM3e: NVIDIA's H200 SXM specifications, via
../shared/reference/perf-notes.md), is computed here rather than quoted.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diffattn.errors import ConfigError
from diffattn.names import VARIANTS
from diffattn.pure.accounting import ModelConfig, decode_flops_per_byte, matmul_params
from diffattn.pure.roofline import attention_decode_flops, crossover_batch, decode_step, ridge_point, step_seconds

H200 = (989e12, 4.8e12)  # dense bf16 FLOP/s, HBM bytes/s (datasheet)
LLAMA_8B = ModelConfig(hidden=4096, heads=32, head_dim=128, layers=32, kv_heads=8, ffn=14336, vocab=128256)
PROPERTY = settings(derandomize=True, max_examples=80, deadline=None)


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
    and 336.5 for V2, the figures ../shared/reference/roofline-notes.md derives: but decoding looks up B rows of the
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
