"""Lesson 12: the benchmark's arithmetic and structure (diffattn.perf). Timings are reported, never asserted: these
tests use tiny sizes and check what is counted, not how fast it ran."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from diffattn.config import GPTConfig, matched_configs  # noqa: E402
from diffattn.nn.cpu import one_thread  # noqa: E402
from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.perf import ceilings, counts, phases  # noqa: E402

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
    prefill = phases.model_phase_counts(model, variant, "prefill", b, s)
    if variant != "diff_v1":
        assert prefill["flops"] == b * s * (2 * weights + layers * h_q * s * 2 * d)
    else:  # two calls of h/2 = 2 maps each, keys d, values 2d: 2 · 2 · s · 3d per token and layer
        assert prefill["flops"] == b * s * (2 * weights + layers * 2 * 2 * s * 3 * d)
    cached = layers * h_kv * 2 * d * 4  # K and V of h_kv heads of d (V1: h_kv/2 heads of 2d, the same bytes)
    assert prefill["bytes"] == 4 * weights + b * s * cached
    train = phases.model_phase_counts(model, variant, "train", b, s)
    assert train["flops"] == 3 * prefill["flops"] and train["bytes"] % phases.ADAMW_BYTES_PER_PARAM == 0
    decode = phases.model_phase_counts(model, variant, "decode", b, s)
    reads = cached * (1.5 if variant == "diff_v1" else 1)  # two calls each reading k (d) and the 2d value
    assert decode["bytes"] == 4 * weights + b * s * reads
    assert decode["intensity"] == decode["flops"] / decode["bytes"]


def test_decode_is_bandwidth_bound_and_prefill_is_not():
    model = matched_configs(TINY)["baseline"]
    decode = phases.model_phase_counts(model, "baseline", "decode", 1, 16)
    prefill = phases.model_phase_counts(model, "baseline", "prefill", 1, 16)
    assert decode["intensity"] < 0.6 < 7 < prefill["intensity"]  # 2 FLOPs per 4-byte weight at batch 1 → ≤ 0.5


def test_bad_phase_or_size_is_one_line():
    with pytest.raises(ConfigError, match="phase must be one of prefill, train, decode"):
        phases.model_phase_counts(TINY, "baseline", "serve", 1, 1)
    with pytest.raises(ConfigError, match="batch must be > 0"):
        phases.model_phase_counts(TINY, "baseline", "decode", 0, 1)


def test_our_counts_match_flop_counter_mode_on_the_real_modules():
    """Exact agreement, with the two stated differences applied: the counter charges the whole S × S map (2 × our
    causal count) and, on this torch, sees no FLOPs in the CPU's fused SDPA op; the backward is 2 × the forward, except
    in V1's fused CPU kernel, whose backward also recomputes both maps' scores (as FlashAttention's does): 2.5 ×."""
    rows = counts.flop_counter_check(TINY, batch=2, seq=12)
    assert {(r["variant"], r["backend"]) for r in rows} == {(v, b) for v in ("baseline", "baseline_2h", "diff_v1",
                                                                             "diff_v2") for b in ("math", "sdpa")}
    assert {r["v1_kernel"] for r in rows if r["variant"] == "diff_v1"} == {"two_call", "fused"}
    for r in rows:
        assert r["counted"] == r["expected"], r
        recomputed = (r["counted"] - r["ours_projections"]) // 2 if r["v1_kernel"] == "fused" else 0
        assert r["counted_forward_backward"] == 3 * r["counted"] + recomputed, r
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
    assert counts.v1_kernel_path(CPU) == "four_call"  # a decode step: one query position
    assert counts.v1_kernel_path(CPU, queries=8) == "fused"  # training, prefill
    assert counts.v1_kernel_path(CPU, torch.bfloat16, queries=8) == "four_call"
    assert counts.v1_kernel_path(CPU, backend="math") == "two_call"


# ---------------------------------------------------------------------------------------------------- measured points

from diffattn.perf import decode, suite, training  # noqa: E402

ROOF = (2e10, 5e9)  # a made-up machine: 20 GFLOP/s, 5 GB/s; the arithmetic is checked against it


def test_a_point_is_its_counts_over_its_time_beside_the_roofline():
    counted = {"flops": 4e9, "bytes": 2e9, "intensity": 2.0}
    row = decode.point("diff_v2", "decode", 8, 128, counted, 0.5, *ROOF)
    assert row["achieved_GBps"] == 4.0 and row["achieved_GFLOPs"] == 8.0
    assert row["roofline_ms"] == 400.0 and row["bound"] == "memory"  # 2e9 B / 5e9 B/s > 4e9 / 2e10 FLOP/s
    assert row["of_roofline"] == pytest.approx(0.8)
    assert decode.point("baseline", "prefill", 1, 1, {"flops": 1e10, "bytes": 1e8, "intensity": 100.0}, 1.0,
                        *ROOF)["bound"] == "compute"


def test_decode_points_time_each_step_at_its_context_on_the_static_cache():
    rows = decode.decode_points(suite.QUICK_MODEL, ("baseline", "diff_v1"), (1, 2), (8, 16), ROOF, repeats=1)
    assert [(r["variant"], r["batch"], r["context"]) for r in rows] == [
        (v, b, s) for v in ("baseline", "diff_v1") for b in (1, 2) for s in (8, 16)]
    for r in rows:
        model = matched_configs(suite.QUICK_MODEL)[r["variant"]]
        kernel = "four_call" if r["variant"] == "diff_v1" else "two_call"
        assert r["bytes"] == phases.model_phase_counts(model, r["variant"], "decode", r["batch"], r["context"], 4,
                                                 kernel)["bytes"]
        assert r["achieved_GBps"] == pytest.approx(r["bytes"] / r["ms"] / 1e6)
        assert r["roofline_ms"] == pytest.approx(max(r["flops"] / ROOF[0], r["bytes"] / ROOF[1]) * 1e3)
        assert r["kernel"].startswith("sdpa:")
    assert rows[-1]["v1_kernel"] == "four_call" and rows[0]["v1_kernel"] is None


def test_a_timed_step_sees_exactly_the_context_it_is_labelled_with():
    from diffattn.model.gpt import GPT

    torch.manual_seed(0)
    model = GPT(suite.QUICK_MODEL).eval()
    caches = decode._filled_caches(model, 2, 20, torch.Generator().manual_seed(0))
    step = decode._step(model, caches, torch.zeros(2, 1, dtype=torch.long), 12)
    for _ in range(3):
        step()
        assert all(len(cache) == 13 for cache in caches)  # rewound to 12, then one token written


def test_ratios_to_the_baseline_pair_points_by_batch_and_context():
    rows = [{"variant": "baseline", "batch": 1, "context": 8, "ms": 2.0, "bytes": 100, "flops": 10},
            {"variant": "diff_v2", "batch": 1, "context": 8, "ms": 3.0, "bytes": 110, "flops": 20},
            {"variant": "diff_v2", "batch": 2, "context": 8, "ms": 3.0, "bytes": 110, "flops": 20},  # no baseline
            {"variant": "diff_v1", "batch": 1, "context": 8, "error": "out of memory"}]
    assert decode.ratios_to_baseline(rows) == [{"variant": "diff_v2", "batch": 1, "context": 8, "time_ratio": 1.5,
                                                "bytes_ratio": 1.1, "flops_ratio": 2.0}]
    assert decode.median_ratio(decode.ratios_to_baseline(rows), "diff_v1") is None


def test_mfu_is_model_flops_per_second_over_each_peak():
    rows = training.train_points(("cpu-tiny",), ("diff_v2",), 2, ROOF, datasheet_flops=1e11, batch_size=2, seq_len=16)
    (r,) = rows
    assert r["tokens_per_s"] == pytest.approx(2 * 16 / (r["ms"] / 1e3))
    assert r["mfu_measured_peak"] == pytest.approx(r["achieved_GFLOPs"] * 1e9 / ROOF[0])
    assert r["mfu_datasheet_peak"] == pytest.approx(r["achieved_GFLOPs"] * 1e9 / 1e11)
    assert training.train_points(("cpu-tiny",), ("baseline",), 1, ROOF, batch_size=1, seq_len=8)[0][
        "mfu_datasheet_peak"] is None


def test_the_quick_suite_writes_every_part_with_the_machine_and_load(tmp_path):
    written = []
    info = suite.run("roofline", quick=True, n_threads=1, progress=False, saved=lambda i: written.append(dict(i)))
    assert set(info) >= {"machine", "load_average", "ceilings", "roofline", "flop_counter", "decode", "decode_ratios",
                         "prefill", "train"}
    assert set(info["load_average"]) == {"start", *suite.PARTS} and len(written) == len(suite.PARTS)
    assert info["machine"]["threads"] == 1 and info["machine"]["blas"] == ceilings.blas_library()
    roof = info["roofline"]
    assert roof["ridge_flops_per_byte"] == pytest.approx(roof["peak_GFLOPs"] / roof["bandwidth_GBps"])
    assert all(r["counted"] == r["expected"] for r in info["flop_counter"]["rows"])
    assert len(info["decode"]) == 4 * 2 * 2 and len(info["train"]) == 4
    report = suite.format_report(info)
    assert "ridge" in report and "decode diff_v2 / baseline" in report
    from diffattn.perf import plots

    assert plots.roofline(info, tmp_path / "r.png").stat().st_size > 0
    assert plots.decode_latency(info, tmp_path / "d.png").stat().st_size > 0
    assert plots.gemm_intensity({"dtype": "float32", "n": 1200}) == 200.0  # 2·1200³ / (3·1200²·4)


def test_bench_what_rejects_bad_input_in_one_line():
    with pytest.raises(ConfigError, match="what must be one of decode, train, roofline"):
        suite.run("serve", quick=True)
    with pytest.raises(ConfigError, match="threads must be >= 1"):
        suite.run("decode", quick=True, n_threads=-1)


NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is visible here")


@pytest.mark.parametrize("args, message", [
    (("decode", "--threads", "0"), "error: --threads must be >= 1 (got 0)"),
    pytest.param(("roofline", "--device", "cuda"), "error: --device cuda needs a CUDA GPU and none is visible",
                 marks=NO_CUDA),
    (("train", "--device", "tpu"), "error: device must be cpu or cuda (got 'tpu')"),
    (("serve",), "error: argument what: invalid choice: 'serve'"),
])
def test_the_command_line_refuses_bad_input_with_exit_2(args, message, capsys):
    """In-process (`diffattn.cli.main`, what `diffattn` calls): one `error:` line, exit code 2."""
    from diffattn.cli import main

    try:
        code = main(["bench", *args])
    except SystemExit as exit_:  # argparse's own errors exit from inside the parser
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message), err
    assert len(err.strip().splitlines()) == 1


def test_round_robin_waits_for_the_device_before_each_clock_read():
    calls = []
    step = lambda name: (lambda: calls.append(name))  # noqa: E731
    seconds = decode.round_robin({"a": step("a"), "b": step("b")}, 2, sync=lambda: calls.append("sync"))
    assert set(seconds) == {"a", "b"}
    assert calls == ["a", "b", "sync"] + ["a", "sync", "b", "sync"] * 2  # warm-up, then every timed call
    assert decode.synchronizer(CPU)() is None and decode.synchronizer(torch.device("cuda")) is torch.cuda.synchronize


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@CUDA
def test_the_quick_suite_measures_decode_prefill_and_training_on_cuda():
    info = suite.run("roofline", quick=True, n_threads=1, progress=False, device="cuda")
    assert info["machine"]["device"] == "cuda" and info["machine"]["gpu"]
    assert info["ceilings"]["device"].startswith("cuda") and info["ceilings"]["blas"] == "cuBLAS"
    assert len(info["decode"]) == 4 * 2 * 2 and all("ms" in r for r in info["decode"] + info["prefill"])
    assert all(r["v1_kernel"] in (None, "two_call", "four_call") for r in info["decode"])
    assert len(info["train"]) == 4 and all(r["tokens_per_s"] > 0 for r in info["train"])


def test_a_full_cuda_run_takes_the_gpu_decode_grid():
    full = suite.plan(quick=False, device="cuda")
    assert (full["batches"], full["contexts"]) == (suite.GPU_DECODE["batches"], suite.GPU_DECODE["contexts"])
    assert min(b for b in full["batches"] if b > 1) >= 8  # the bandwidth target is read at batch >= 8
    assert suite.plan(quick=False)["batches"] == decode.BATCHES and suite.plan(quick=True, device="cuda")["batches"] == (1, 2)


# ---------------------------------------------------------------------------------------------------- lesson 12


def test_the_lesson_reads_the_committed_runs_and_derives_the_rest():
    """Lesson 12 measures nothing: it reads outputs/bench/<run>/roofline.json and recomputes only arithmetic."""
    from diffattn import lessons as experiments
    from diffattn.pure.roofline import crossover_batch

    lesson = experiments.load("12")
    results = lesson.run(progress=False)
    assert set(results["runs"]) == set(lesson.RUNS) and len(lesson.RUNS) >= 2  # the run-to-run spread needs two
    derived = results["derived"]
    assert derived["h200_ridge"] == pytest.approx(989e12 / 4.8e12)
    assert derived["rows"]["baseline"]["decode_attention_flops_per_byte"] == 4.0  # g = 32/8, bf16
    assert derived["rows"]["diff_v2"]["decode_attention_flops_per_byte"] == 8.0
    assert derived["rows"]["baseline"]["b_star_h200"]["256"] == crossover_batch(lesson.LLAMA_8B, "baseline", 256,
                                                                                989e12, 4.8e12)
    assert all(row["b_star_h200"][str(s)] is None for row in derived["rows"].values() for s in (1024, 4096, 32768))
    for name, run in results["runs"].items():
        info = __import__("json").loads(lesson.run_path(name).read_text())
        assert run["ridge"] == info["roofline"]["ridge_flops_per_byte"] and run["machine"]["threads"] >= 1
        assert run["flop_counter"]["agree"] == run["flop_counter"]["rows"]  # the committed run's cross-check held
    text = lesson.report(results)
    assert text.startswith("Lesson 12") and " / ".join(lesson.RUNS) in text and " / ".join(lesson.LOADED_RUNS) in text
    assert not set(lesson.RUNS) & set(lesson.LOADED_RUNS)  # a key names one folder


def test_the_lesson_derives_its_verdicts_from_the_runs_counts():
    """What lesson 12's prose leans on is computed, not typed: the decode model's B* from the run's own counts equals
    `crossover_batch` on its config, the training prediction is a FLOP ratio, ranges bracket their medians, and the fp32
    memory of the Llama-like model is its parameter and KV-cache count times 4 bytes."""
    import json

    from diffattn import lessons as experiments
    from diffattn.config import accounting_model
    from diffattn.pure import accounting
    from diffattn.pure.roofline import crossover_batch

    lesson = experiments.load("12")
    fp32 = lesson.fp32_memory()
    assert fp32["param_GB"] == 4 * accounting.model_params(lesson.LLAMA_8B, "baseline")["total"] / 1e9
    assert fp32["kv_GB_per_sequence"] == 32 * 32768 * 2 * 8 * 128 * 4 / 1e9  # L · S · (K and V) · h_kv · d · 4 B
    assert fp32["attention_flops_per_byte"] == {"baseline": 2.0, "diff_v2": 4.0}  # g and 2g, halved by fp32
    assert fp32["sequence_intensity"]["diff_v2"] > fp32["attention_flops_per_byte"]["diff_v2"]  # 2N/k adds on top
    for name in lesson.RUNS:
        info = json.loads(lesson.run_path(name).read_text())
        run = lesson.measured(info)
        peak, bandwidth = info["roofline"]["peak_GFLOPs"] * 1e9, info["roofline"]["bandwidth_GBps"] * 1e9
        model = accounting_model(GPTConfig(**info["decode_model"]), "baseline")
        for context, b_star in run["decode_grid"]["b_star_decode_model"].items():
            expected = crossover_batch(model, "baseline", int(context), peak, bandwidth, 4)
            assert b_star == (None if expected is None else pytest.approx(expected))
        assert run["decode_grid"]["b_star_agrees"]
        grid = run["decode_grid"]
        assert grid["GBps_min"] <= grid["b1_GBps_min"] <= grid["b1_GBps_max"] <= grid["GBps_max"]
        assert grid["of_roofline_min"] <= grid["of_roofline_median"] <= grid["of_roofline_max"]
        for ceiling in (run["copy"], run["triad"], *run["gemm"].values()):
            assert ceiling["min"] <= ceiling["median"] <= ceiling["max"]
        rows = {(r["preset"], r["variant"]): r for r in info["train"]}
        for preset, variants in run["train"].items():
            for variant, row in variants.items():
                assert row["predicted"] == rows[(preset, "baseline")]["flops"] / rows[(preset, variant)]["flops"]
        assert run["flop_counter"]["with_attention"] == sum(r["backend"] == "math" for r in info["flop_counter"]["rows"])


def test_the_lesson_counts_its_cross_run_verdicts_from_every_committed_run():
    """The loaded runs' summary and the verdicts the prose states over all four runs, recomputed from the JSON files
    (decode_ratios, load_average, ceilings) without the lesson's measured()."""
    import json
    import statistics

    from diffattn import lessons as experiments

    lesson = experiments.load("12")
    results = lesson.run(progress=False)
    infos = {name: json.loads(lesson.run_path(name).read_text()) for name in (*lesson.RUNS, *lesson.LOADED_RUNS)}

    def median_ratio(info, variant, field="time_ratio"):
        return statistics.median(r[field] for r in info["decode_ratios"] if r["variant"] == variant)

    for name in lesson.LOADED_RUNS:
        info, summary = infos[name], results["loaded"][name]
        loads = [x[0] for x in info["load_average"].values() if x]
        assert (summary["load_min"], summary["load_max"]) == (min(loads), max(loads))
        assert summary["ridge"] == info["roofline"]["ridge_flops_per_byte"]
        assert summary["copy_GBps"] == info["ceilings"]["stream"]["copy"]["median"]
        assert summary["diff_v2_time_ratio"] == median_ratio(info, "diff_v2")
    v = results["verdicts"]
    assert v["runs"] == len(infos) == 4
    assert v["v1_slower_than_v2"] == sum(median_ratio(i, "diff_v1") > median_ratio(i, "diff_v2") for i in infos.values())
    assert v["v2_slower_than_its_bytes"] == sum(median_ratio(i, "diff_v2") > median_ratio(i, "diff_v2", "bytes_ratio")
                                                for i in infos.values())
    assert v["v2_ratio_moved"] == max(abs(median_ratio(infos[a], "diff_v2") - median_ratio(infos[b], "diff_v2"))
                                      for a in lesson.LOADED_RUNS for b in lesson.RUNS)
    assert v["v2_b64_s4096_memory_bound"] == sum(
        r["bound"] == "memory" for name in lesson.RUNS for r in infos[name]["decode"]
        if (r["variant"], r["batch"], r["context"]) == ("diff_v2", 64, 4096))
    for preset, t in v["train"].items():
        assert 0 <= t["below_prediction"] <= t["rows"] == 3 * len(lesson.RUNS)


TARGETS = [{"target": "v2_decode_vs_baseline", "rule": "DIFF V2 decode step time / the baseline's <= 1.05",
            "value": 1.12, "met": False},
           {"target": "baseline_mfu", "rule": "baseline training MFU >= 0.35", "value": 0.41, "met": True},
           {"target": "decode_bandwidth", "rule": "decode bytes/s / copy >= 0.6", "value": None, "met": None,
            "missing": "no decode point at batch >= 8"}]


def test_the_lesson_takes_gpu_ceilings_from_a_gpu_run_and_skips_cpu_rehearsals(tmp_path, monkeypatch):
    import json

    from diffattn import lessons as experiments
    from diffattn.core.paths import outputs_dir
    from diffattn.pure.roofline import crossover_batch

    lesson = experiments.load("12")
    committed = json.loads((outputs_dir() / "numbers.json").read_text())["12"]  # read before the root moves
    for name, machine, peaks in [
        ("h200-2026-12-03", {"gpu": "NVIDIA H200"}, {"measured_gemm_tflops": 790.0, "measured_copy_GBps": 4300.0,
                                                     "targets": TARGETS}),
        ("rehearsal-cpu", {"cpu": "AMD EPYC"}, {"measured_gemm_tflops": 0.1, "measured_copy_GBps": 30.0}),
    ]:
        (tmp_path / "outputs" / "gpu" / name).mkdir(parents=True)
        targets = peaks.pop("targets", None)
        (tmp_path / "outputs" / "gpu" / name / "gpu-check.json").write_text(json.dumps(
            {"machine": machine, "peaks": peaks} | ({"targets": targets} if targets else {})))
    monkeypatch.setenv("DIFFATTN_ROOT", str(tmp_path))
    found = lesson.gpu_runs()
    assert list(found) == ["h200-2026-12-03"]
    gpu = found["h200-2026-12-03"]
    assert gpu["ridge"] == pytest.approx(790e12 / 4300e9)
    assert gpu["b_star_256"]["baseline"] == crossover_batch(lesson.LLAMA_8B, "baseline", 256, 790e12, 4300e9)
    assert gpu["targets"] == TARGETS
    report = lesson.report(committed | {"gpu": found})
    assert "h200-2026-12-03: DIFF V2 decode step time / the baseline's" in report and "1.12, MISSED" in report
    assert "baseline training MFU" in report and "0.41, met" in report and "missing (no decode point" in report
