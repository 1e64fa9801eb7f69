"""GPU-path decisions checked on CPU with fake or absent modules: which flash-attn is usable, dtype rules of a bf16
model, and the FLOPs the benchmark charges (lesson 06). The real GPU runs live in tests/test_gpu.py."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from diffattn.perf import bench  # noqa: E402
from diffattn.nn import kernels  # noqa: E402
from diffattn.nn.attention import DiffAttentionV1  # noqa: E402
from diffattn.nn.rope import rope_cos_sin  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture
def fake_flash_attn(tmp_path, monkeypatch):
    """Install a fake `flash_attn` package whose __init__ is the given source; the probe is re-run afterwards."""

    def install(source: str) -> None:
        package = tmp_path / "flash_attn"
        package.mkdir(exist_ok=True)
        (package / "__init__.py").write_text(source)
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.delitem(sys.modules, "flash_attn", raising=False)
        monkeypatch.setattr(kernels, "FLASH_ATTN_FOUND", True)  # what the import-time lookup would have found
        kernels._flash_attn_import_problem.cache_clear()

    yield install
    sys.modules.pop("flash_attn", None)
    kernels._flash_attn_import_problem.cache_clear()


def test_absent_flash_attn_is_reported_as_not_installed():
    if kernels.flash_attn_problem() is None:
        pytest.skip("a usable flash-attn is installed here")
    assert not kernels.flash_attn_installed()


def test_a_flash_attn_that_fails_to_import_falls_back_instead_of_raising(fake_flash_attn, monkeypatch):
    fake_flash_attn("raise ImportError('flash_attn_2_cuda.so: undefined symbol: _ZN3c10')\n")
    problem = kernels.flash_attn_problem()
    assert problem and "does not import" in problem and "undefined symbol" in problem
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert kernels.available_backends() == ["sdpa", "math"]


@pytest.mark.parametrize("version, usable", [("2.0.9", False), ("1.0.5", False), ("2.1.0", True), ("2.8.3", True)])
def test_flash_attn_older_than_2_1_is_refused(fake_flash_attn, version, usable):
    fake_flash_attn(f"__version__ = {version!r}\n")
    problem = kernels.flash_attn_problem()
    assert (problem is None) == usable
    if not usable:
        assert "top-left" in problem and version in problem


def test_lambda_vectors_stay_fp32_when_the_module_is_cast_to_low_precision():
    torch.manual_seed(0)
    for cast in (lambda m: m.to(torch.bfloat16), lambda m: m.half(), lambda m: m.bfloat16()):
        module = cast(DiffAttentionV1(64, depth=0, num_heads=2))
        assert {getattr(module, n).dtype for n in module.LAMBDA_VECTORS} == {torch.float32}
        assert module.q_proj.weight.dtype in (torch.bfloat16, torch.float16)
    assert DiffAttentionV1(64, depth=0, num_heads=2).double().lambda_q1.dtype == torch.float64


@pytest.mark.parametrize("subln_fp32", [False, True])
def test_a_bf16_model_runs_with_or_without_an_fp32_norm_weight(subln_fp32):
    torch.manual_seed(0)
    module = DiffAttentionV1(64, depth=1, num_heads=2).to(torch.bfloat16)
    if subln_fp32:
        module.subln.float()
    x = torch.randn(1, 8, 64, dtype=torch.bfloat16)
    out = module(x, rope_cos_sin((0, 8), module.head_dim, dtype=torch.bfloat16))
    assert out.dtype == torch.bfloat16 and out.shape == (1, 8, 64) and torch.isfinite(out.float()).all()


def test_the_benchmark_charges_v1_for_the_calls_its_kernels_make():
    shape = bench.Shape(batch=1, seq=16, heads=4, head_dim=8, kv_heads=2)
    ops = bench.attention_ops(shape, torch.device("cpu"), torch.float32)
    useful = {name: op[1] for name, op in ops.items()}
    executed = {name: op[2] for name, op in ops.items()}
    pairs, b, h, d = 16 * 17 / 2, 1, 4, 8
    assert useful["baseline"] == executed["baseline"] == 2 * b * h * pairs * 2 * d
    assert useful["diff_v1"] == useful["diff_v1_4call"] == 2 * b * h * pairs * 3 * d  # 3d per pair: q kᵀ once
    # on CPU the sdpa backend splits 2d-wide values into two calls, so it executes the 4-call work: 4d per pair
    assert executed["diff_v1"] == executed["diff_v1_4call"] == 2 * b * h * pairs * 4 * d
    v = torch.zeros(1, 16, 1, 2 * d)
    assert kernels.value_slices(torch.zeros(1, 16, 2, d), torch.zeros(1, 16, 1, d), v, backend="math") == 1


def test_attention_under_compile_has_no_graph_break_from_the_backend_probe():
    """The backend is chosen from constants on every call (no import lookups), so a compiled attention call traces
    into one graph. (torch 2.11, on the GPU machine, breaks the graph at any importlib.util.find_spec call.)"""
    q = torch.randn(1, 8, 4, 16)
    explained = torch._dynamo.explain(lambda q: kernels.attention(q, q[:, :, :2], q[:, :, :2]))(q)
    assert explained.graph_break_count == 0, [str(b.reason)[:200] for b in explained.break_reasons]


def test_a_failing_op_is_a_row_with_its_error_and_every_row_is_saved_as_it_ends(monkeypatch):
    """One op that fails (a kernel that refuses a shape, out of memory) used to lose the benchmark's whole JSON: now
    it is a row naming its error, the other ops are timed, `saved` sees each row as it ends, and every timed row
    names the kernel that ran."""
    real = bench.attention_ops

    def with_a_broken_op(shape, device, dtype):
        ops = real(shape, device, dtype)
        forward, useful, executed, kernel = ops["diff_v1"]
        ops["diff_v1"] = (lambda: (_ for _ in ()).throw(RuntimeError("no kernel for this shape\ndetails")),
                          useful, executed, kernel)
        return ops

    monkeypatch.setattr(bench, "attention_ops", with_a_broken_op)
    monkeypatch.setattr(bench.v1_module, "settings", lambda cores: [bench.v1_module.Setting(1, False)])  # seconds
    saved = []
    info = bench.run("cpu", quick=True, hf=False, saved=lambda partial: saved.append(len(partial["attention_ops"])))
    rows = {r["op"]: r for r in info["attention_ops"]}
    assert rows["diff_v1"]["error"] == "RuntimeError: no kernel for this shape" and "fwd_ms" not in rows["diff_v1"]
    assert all(r["fwd_ms"] > 0 and r["kernel"] == "sdpa:FLASH_ATTENTION" for op, r in rows.items()
               if op not in ("diff_v1", "diff_v1_fused"))
    assert rows["diff_v1_fused"]["kernel"] == "diff_v1_fused" and rows["diff_v1_fused"]["fwd_ms"] > 0
    assert saved == [0, 1, 2, 3, 4, 5, 6, 6, 6] and info["calibration"]["gemm_tflops"] > 0  # + V1 module, load
    (module,) = info["v1_module"]  # the V1 module's A/B ran too, on the first shape, without transformers
    assert module["fused_speedup"] > 0 and module["hf_skipped"] == "--no-hf" and "hf_fwd_bwd_ms" not in module
    assert module["setting"] == "1t" and list(info["load_average"]) == ["start", "ops", "1t", "end"]
    assert "failed: RuntimeError: no kernel for this shape" in bench.format_report(info)
