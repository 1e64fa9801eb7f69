"""Lesson 12: the benchmark's arithmetic and structure (diffattn.perf). Timings are reported, never asserted: these
tests use tiny sizes and check what is counted, not how fast it ran."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from diffattn.config import GPTConfig, matched_configs  # noqa: E402
from diffattn.cpu import one_thread  # noqa: E402
from diffattn.errors import ConfigError  # noqa: E402
from diffattn.perf import ceilings, counts  # noqa: E402

pytestmark = pytest.mark.torch

TINY = GPTConfig(vocab_size=32, n_layer=2, d_model=32, n_head=4, n_kv_head=2, max_seq_len=24)
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


# ---------------------------------------------------------------------------------------------------- ceilings


def test_rates_are_work_over_time_with_median_and_best():
    summary = ceilings._summary([2.0, 1.0, 4.0], work=8e9, unit_scale=1e9)
    assert summary == {"median": 4.0, "best": 8.0, "samples": [4.0, 8.0, 2.0]}


def test_gemm_counts_two_n_cubed_per_call():
    row = ceilings.gemm(16, torch.float32, CPU, repeats=2)
    assert row["flops_per_call"] == 2 * 16**3 and row["dtype"] == "float32" and len(row["gflops"]["samples"]) == 2
    assert row["gflops"]["best"] >= row["gflops"]["median"] > 0


def test_stream_counts_bytes_as_mccalpin_does():
    assert ceilings.STREAM_BYTES_PER_ELEMENT == {"copy": 2 * 8, "triad": 3 * 8}  # float64 reads + writes
    row = ceilings.stream(1000, CPU, repeats=2)
    assert row["array_bytes"] == 8000 and set(row) >= {"copy", "triad"}
    assert ceilings.stream_elements(32 << 20) == 4 * (32 << 20) // 8  # 4× the last-level cache, in float64
    assert ceilings.stream_elements(None) == 1 << 24 and ceilings.stream_elements(1 << 20) == 1 << 24


def test_the_triad_computes_a_equals_b_plus_s_c():
    b, c = torch.rand(10, dtype=torch.float64), torch.rand(10, dtype=torch.float64)
    a = torch.empty_like(b)
    torch.add(b, c, alpha=ceilings.TRIAD_SCALAR, out=a)
    assert torch.allclose(a, b + ceilings.TRIAD_SCALAR * c, rtol=1e-15, atol=0)  # fused multiply-add may round once


def test_measure_names_what_it_ran_on_and_reads_back_its_ceilings():
    steps = []
    result = ceilings.measure(CPU, gemm_sizes={torch.float32: 8, torch.float64: 8}, stream_n=256, repeats=1,
                              advance=lambda: steps.append(1))
    assert len(steps) == 3 and result["threads"] == 1 and result["blas"] == ceilings.blas_library() != ""
    assert [row["dtype"] for row in result["gemm"]] == ["float32", "float64"]
    assert ceilings.peak_gflops(result, "float64") == result["gemm"][1]["gflops"]["median"]
    assert ceilings.bandwidth_gbps(result, "triad") == result["stream"]["triad"]["median"]
    with pytest.raises(ConfigError, match="no GEMM was measured in bfloat16"):
        ceilings.peak_gflops(result, "bfloat16")
    with pytest.raises(ConfigError, match="copy or triad"):
        ceilings.bandwidth_gbps(result, "scale")


# ---------------------------------------------------------------------------------------------------- counts


@pytest.mark.parametrize("variant", ["baseline", "baseline_2h", "diff_v1", "diff_v2"])
def test_phase_counts_follow_the_formulas(variant):
    """Written out for TINY (D 32, h 4, d 8, h_kv 2, L 2, FFN 64 ... read from the config), 4-byte values."""
    model = matched_configs(TINY)[variant]
    d, h_kv, layers, ffn, vocab = 8, 2, 2, TINY.ffn_hidden, 32
    h_q = {"baseline": 4, "baseline_2h": 8, "diff_v1": 4, "diff_v2": 8}[variant]  # d-wide query maps
    q_out = h_q * d
    o_in = 8 * d if variant == "baseline_2h" else 4 * d
    lam = 32 * 4 if variant == "diff_v2" else 0
    weights = layers * (32 * q_out + 2 * 32 * h_kv * d + o_in * 32 + lam + 3 * 32 * ffn) + vocab * 32
    b, s = 3, 10
    prefill = counts.phase_counts(model, variant, "prefill", b, s)
    if variant != "diff_v1":
        assert prefill["flops"] == b * s * (2 * weights + layers * h_q * s * 2 * d)
    else:  # two calls of h/2 = 2 maps each, keys d, values 2d: 2 · 2 · s · 3d per token and layer
        assert prefill["flops"] == b * s * (2 * weights + layers * 2 * 2 * s * 3 * d)
    cached = layers * h_kv * 2 * d * 4  # K and V of h_kv heads of d (V1: h_kv/2 heads of 2d, the same bytes)
    assert prefill["bytes"] == 4 * weights + b * s * cached
    train = counts.phase_counts(model, variant, "train", b, s)
    assert train["flops"] == 3 * prefill["flops"] and train["bytes"] % counts.ADAMW_BYTES_PER_PARAM == 0
    decode = counts.phase_counts(model, variant, "decode", b, s)
    reads = cached * (1.5 if variant == "diff_v1" else 1)  # two calls each reading k (d) and the 2d value
    assert decode["bytes"] == 4 * weights + b * s * reads
    assert decode["intensity"] == decode["flops"] / decode["bytes"]


def test_decode_is_bandwidth_bound_and_prefill_is_not():
    model = matched_configs(TINY)["baseline"]
    decode = counts.phase_counts(model, "baseline", "decode", 1, 16)
    prefill = counts.phase_counts(model, "baseline", "prefill", 1, 16)
    assert decode["intensity"] < 0.6 < 7 < prefill["intensity"]  # 2 FLOPs per 4-byte weight at batch 1 → ≤ 0.5


def test_bad_phase_or_size_is_one_line():
    with pytest.raises(ConfigError, match="phase must be one of prefill, train, decode"):
        counts.phase_counts(TINY, "baseline", "serve", 1, 1)
    with pytest.raises(ConfigError, match="batch must be > 0"):
        counts.phase_counts(TINY, "baseline", "decode", 0, 1)


def test_our_counts_match_flop_counter_mode_on_the_real_modules():
    """Exact agreement, with the two stated differences applied: the counter charges the whole S × S map (2 × our
    causal count) and, on this torch, sees no FLOPs in the CPU's fused SDPA op; the backward is 2 × the forward."""
    rows = counts.flop_counter_check(TINY, batch=2, seq=12)
    assert {(r["variant"], r["backend"]) for r in rows} == {(v, b) for v in ("baseline", "baseline_2h", "diff_v1",
                                                                             "diff_v2") for b in ("math", "sdpa")}
    for r in rows:
        assert r["counted"] == r["expected"], r
        assert r["counted_forward_backward"] == 3 * r["counted"], r
        if r["backend"] == "math":  # the attention is there, as the whole map: twice the causal count
            assert r["counted_by_op"]["aten.bmm"] == 2 * r["ours_attention_causal"]
            assert r["counted_by_op"]["aten.mm"] == r["ours_projections"]


def test_the_cpu_fused_sdpa_op_has_no_flop_formula_here():
    """The stated difference, checked on the real op: a fused CPU SDPA call counts 0 unless the registry has it."""
    from torch.utils.flop_counter import FlopCounterMode

    q = torch.randn(1, 2, 8, 4)
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert counter.get_total_flops() == (4 * 2 * 8 * 8 * 4 if counts.cpu_fused_sdpa_counted() else 0)


def test_flop_counter_mode_counts_gqa_with_the_query_heads():
    found = counts.flop_counter_gqa(batch=1, q_heads=4, kv_heads=2, seq=8, head_dim=4)
    if isinstance(found, str):  # older torch: the formula asserts h_q == h_kv
        pytest.skip(f"this torch's FlopCounterMode refuses GQA: {found}")
    assert found == 2 * 2 * 4 * 8 * 8 * 4  # q kᵀ and P·V, non-causal, h_q = 4 heads


def test_v1_runs_the_four_call_path_on_cpu_sdpa_and_two_calls_on_math():
    assert counts.v1_kernel_path(CPU) == "four_call"
    assert counts.v1_kernel_path(CPU, backend="math") == "two_call"
