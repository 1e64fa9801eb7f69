"""Lesson 12: packed GQA decode (diffattn.nn.kernels: one single-head SDPA call per KV head, the group's query heads
as its query rows) gives the unpacked path's numbers, and scripts/gqa_decode_packing.py's A/B runs, pairs and
reports. Timings are reported, never asserted: these tests check the packing, the arithmetic and the file."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from diffattn.config import GPTConfig, matched_configs  # noqa: E402
from diffattn.nn.cpu import one_thread  # noqa: E402
from diffattn.model.generate import generate, incremental_logits  # noqa: E402
from diffattn.model.gpt import GPT  # noqa: E402
from diffattn.pure.variants import VARIANTS  # noqa: E402
from diffattn.nn import kernels  # noqa: E402
from diffattn.nn.kernels import TOLERANCE, attention, unpacked_decode  # noqa: E402
from diffattn.perf import decode  # noqa: E402

pytestmark = pytest.mark.torch

GQA = GPTConfig(vocab_size=32, n_layer=2, d_model=32, n_head=4, n_kv_head=2, max_seq_len=24)
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gqa_decode_packing.py"
# (batch, query heads, KV heads, d, d_v, cached keys): groups of 4 and 2, V1's 2d-wide value, MHA (nothing to pack)
SHAPES = [(2, 8, 2, 32, 32, 64), (3, 4, 2, 16, 32, 9), (1, 4, 4, 16, 16, 5), (2, 16, 1, 8, 8, 33)]


@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


def tensors(shape, dtype):
    b, h_q, h_kv, d, d_v, n = shape
    g = torch.Generator().manual_seed(sum(shape))
    return (torch.randn(b, 1, h_q, d, generator=g, dtype=dtype), torch.randn(b, n, h_kv, d, generator=g, dtype=dtype),
            torch.randn(b, n, h_kv, d_v, generator=g, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("shape", SHAPES)
def test_packed_decode_equals_the_unpacked_path_and_the_reference(shape, dtype):
    q, k, v = tensors(shape, dtype)
    packed = attention(q, k, v, backend="sdpa")
    with unpacked_decode():
        unpacked = attention(q, k, v, backend="sdpa")
    reference = attention(q.double(), k.double(), v.double(), backend="math")
    assert packed.shape == unpacked.shape == (shape[0], 1, shape[1], shape[4])
    assert (packed - unpacked).abs().max().item() <= TOLERANCE[dtype]
    assert (packed.double() - reference).abs().max().item() <= TOLERANCE[dtype]


def sdpa_query_shapes(monkeypatch, call) -> list[tuple]:
    seen, real = [], torch.nn.functional.scaled_dot_product_attention

    def spy(q, *args, **kwargs):
        seen.append(tuple(q.shape))
        return real(q, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    call()
    return seen


def test_a_decode_step_packs_each_group_into_one_single_head_call_and_the_switch_turns_it_off(monkeypatch):
    q, k, v = tensors((2, 8, 2, 32, 32, 64), torch.float32)
    assert sdpa_query_shapes(monkeypatch, lambda: attention(q, k, v)) == [(2, 2, 4, 32)]  # (b, H_kv, n_rep, d)
    with unpacked_decode():
        assert sdpa_query_shapes(monkeypatch, lambda: attention(q, k, v)) == [(2, 8, 1, 32)]  # (b, H_q, 1, d)
    assert kernels._PACK_DECODE  # restored on leaving the block
    # a chunk of several queries (prefill, speculative chunks) and MHA are never packed
    q5 = torch.randn(2, 5, 8, 32)
    assert sdpa_query_shapes(monkeypatch, lambda: attention(q5, k, v)) == [(2, 8, 5, 32)]
    q_mha, k_mha, v_mha = tensors((2, 4, 4, 16, 16, 5), torch.float32)
    assert sdpa_query_shapes(monkeypatch, lambda: attention(q_mha, k_mha, v_mha)) == [(2, 4, 1, 16)]


def test_the_switch_is_restored_after_an_error():
    with pytest.raises(RuntimeError), unpacked_decode():
        raise RuntimeError("boom")
    assert kernels._PACK_DECODE


def build(variant: str, dtype) -> GPT:
    torch.manual_seed(0)
    return GPT(matched_configs(GQA)[variant]).to(dtype).eval()


@pytest.mark.parametrize("variant", VARIANTS)
def test_greedy_tokens_and_decoded_logits_are_the_same_packed_or_not(variant):
    prompt = torch.randint(0, 32, (3, 5), generator=torch.Generator().manual_seed(1))
    model = build(variant, torch.float32)
    packed = generate(model, prompt, 12, temperature=0.0, cache="static")
    with unpacked_decode():
        unpacked = generate(model, prompt, 12, temperature=0.0, cache="static")
    assert torch.equal(packed, unpacked), f"{variant}: greedy tokens differ with packing"
    model = build(variant, torch.float64)
    logits, _ = incremental_logits(model, prompt.repeat(1, 2), prefill=4, cache="static")
    with unpacked_decode():
        reference, _ = incremental_logits(model, prompt.repeat(1, 2), prefill=4, cache="static")
    assert (logits - reference).abs().max().item() < 1e-10


# ------------------------------------------------------------------------------------------------- the A/B


def test_packing_ab_times_both_modes_per_point_and_pairs_them_with_the_baseline():
    rows = decode.packing_ab(GQA, VARIANTS, (1, 2), (4, 8), repeats=1)
    assert [(r["variant"], r["batch"], r["context"]) for r in rows] == [
        (v, b, s) for v in VARIANTS for b in (1, 2) for s in (4, 8)]
    for r in rows:
        assert r["packed_ms"] > 0 and r["unpacked_ms"] > 0
        assert r["speedup"] == pytest.approx(r["unpacked_ms"] / r["packed_ms"])
    summary = decode.packing_summary(rows)
    assert summary["errors"] == 0 and set(summary["variants"]) == set(VARIANTS)
    assert "packed_time_ratio" not in summary["variants"]["baseline"]
    # V2 reads the baseline's KV cache: its bytes differ by its projections only (lesson 12's counts)
    assert 1.0 < summary["variants"]["diff_v2"]["bytes_ratio"] < 1.2


def test_the_summary_is_medians_of_paired_ratios():
    def row(variant, batch, packed, unpacked, nbytes):
        return {"variant": variant, "batch": batch, "context": 8, "bytes": nbytes, "flops": 1, "packed_ms": packed,
                "unpacked_ms": unpacked, "speedup": unpacked / packed}

    rows = [row("baseline", 1, 10.0, 20.0, 100), row("baseline", 2, 10.0, 10.0, 200),
            row("diff_v2", 1, 11.0, 44.0, 110), row("diff_v2", 2, 30.0, 30.0, 220),
            {"variant": "diff_v2", "batch": 4, "context": 8, "error": "out of memory"}]
    s = decode.packing_summary(rows)
    assert s["errors"] == 1
    v2 = s["variants"]["diff_v2"]
    assert v2["points"] == 2 and v2["speedup_median"] == pytest.approx((4.0 + 1.0) / 2)
    assert v2["packed_time_ratio"] == pytest.approx((1.1 + 3.0) / 2)
    assert v2["unpacked_time_ratio"] == pytest.approx((2.2 + 3.0) / 2)
    assert v2["bytes_ratio"] == pytest.approx(1.1)


def load_script():
    spec = importlib.util.spec_from_file_location("gqa_decode_packing", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_writes_error_rows_for_caches_that_do_not_fit_and_goes_on(tmp_path, monkeypatch, capsys):
    real = decode._filled_caches

    def filled(model, batch, capacity, generator):
        if batch == 2 and model.config.attention == "diff_v1":
            raise RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 9 GB\nmore detail")
        return real(model, batch, capacity, generator)

    monkeypatch.setattr(decode, "_filled_caches", filled)
    assert load_script().main(["--quick", "--out", str(tmp_path)]) == 1  # a failed point: exit 1, the file written
    info = json.loads((tmp_path / "packing.json").read_text())
    errors = [r for r in info["rows"] if "error" in r]
    assert [(r["variant"], r["batch"]) for r in errors] == [("diff_v1", 2)] * len(info["contexts"])
    assert errors[0]["error"].startswith("RuntimeError: DefaultCPUAllocator") and "\n" not in errors[0]["error"]
    assert info["summary"]["errors"] == len(errors) and info["machine"]["threads"] == 1
    assert len(info["rows"]) == len(VARIANTS) * 2 * 2 and "failed: diff_v1 B 2" in capsys.readouterr().out


def test_the_script_refuses_bad_threads_in_one_line(tmp_path, capsys):
    assert load_script().main(["--quick", "--threads", "0", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == "error: --threads must be >= 1 (got 0)"
    assert not (tmp_path / "packing.json").exists()


def test_the_lesson_quotes_the_committed_ab_runs_summarised_from_their_rows():
    from diffattn.lessons import roofline_packing
    from diffattn.core.paths import outputs_dir

    quoted = roofline_packing.run()
    assert list(quoted) == list(roofline_packing.RUNS)
    for name, folder in roofline_packing.RUNS.items():
        info = json.loads((outputs_dir() / "bench" / folder / "packing.json").read_text())
        assert info["machine"]["threads"] == 1 and not info["quick"]
        assert len(info["rows"]) == len(VARIANTS) * len(info["batches"]) * len(info["contexts"])
        assert decode.packing_summary(info["rows"]) == info["summary"]  # the file's summary is its rows'
        assert quoted[name]["variants"] == info["summary"]["variants"] and quoted[name]["errors"] == 0
    table = roofline_packing.report(quoted)
    assert any(line.split()[:2] == ["DIFF", "V2"] for line in table)
