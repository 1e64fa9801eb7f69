"""Lesson 06: the kernel dispatcher, its backends, and the torch mirror of diffattn.pure.

Tolerances (kernels.TOLERANCE): fp64 1e-12, fp32 1e-5, bf16 4e-2 against an fp64 math reference on the same
(rounded) inputs; the torch mirror equals the stdlib on the same fp64 numbers to 1e-12.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings, strategies as st  # noqa: E402

from diffattn import pure  # noqa: E402
from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.nn import KVCache, apply_rope, rope_cos_sin  # noqa: E402
from diffattn.nn import functional as ours  # noqa: E402
from diffattn.nn import kernels  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]
FEW = settings(max_examples=15, deadline=None)


def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def close(tensor, rows, tol=1e-12):
    return (tensor - torch.tensor(rows, dtype=torch.float64)).abs().max().item() < tol


# ---- the torch mirror equals diffattn.pure ------------------------------------------------------------------------

@FEW
@given(n_q=st.integers(1, 5), extra=st.integers(0, 3), d=st.integers(1, 4), causal=st.booleans(),
       lam=st.floats(-1.0, 1.5), seed=st.integers(0, 10_000))
def test_torch_mirror_equals_stdlib_fp64(n_q, extra, d, causal, lam, seed):
    n_k = n_q + extra
    q1, q2 = rand(2, n_q, d, seed=seed)
    k1, k2 = rand(2, n_k, d, seed=seed + 1)
    v = rand(n_k, 2 * d, seed=seed + 2)
    logits = rand(n_q, seed=seed + 3)
    L = lambda t: t.tolist()  # noqa: E731
    assert close(ours.attention_weights(q1, k1, causal), pure.attention_weights(L(q1), L(k1), causal))
    assert close(ours.scaled_dot_product_attention(q1, k1, v, causal),
                 pure.scaled_dot_product_attention(L(q1), L(k1), L(v), causal))
    assert close(ours.diff_weights_v1(q1, k1, q2, k2, lam, causal),
                 pure.diff_weights_v1(L(q1), L(k1), L(q2), L(k2), lam, causal))
    assert close(ours.diff_attention_v1(q1, k1, q2, k2, v, lam, causal),
                 pure.diff_attention_v1(L(q1), L(k1), L(q2), L(k2), L(v), lam, causal))
    assert close(ours.diff_weights_v2(q1, q2, k1, logits, causal),
                 pure.diff_weights_v2(L(q1), L(q2), L(k1), L(logits), causal))
    assert close(ours.diff_attention_v2(q1, q2, k1, v[:, :d], logits, causal),
                 pure.diff_attention_v2(L(q1), L(q2), L(k1), L(v[:, :d]), L(logits), causal))
    assert close(ours.logit_difference_weights(q1, k1, q2, k2, lam, causal),
                 pure.logit_difference_weights(L(q1), L(k1), L(q2), L(k2), lam, causal))
    assert close(ours.softmax(logits), [pure.softmax(L(logits))])
    assert abs(ours.sigmoid(logits[0]).item() - pure.sigmoid(logits[0].item())) < 1e-15
    assert ours.lambda_init(3) == pure.lambda_init(3)


@pytest.mark.parametrize("backend", ["math", "sdpa"])
@pytest.mark.parametrize("n_q, causal", [(5, True), (5, False), (2, True)])
def test_multi_head_kernels_equal_stdlib_per_head(backend, n_q, causal):
    """kernels.attention in the (b, N, H, d) layout with GQA, head by head against diffattn.pure, fp64."""
    q, k, v = rand(1, n_q, 4, 3, seed=1), rand(1, 5, 2, 3, seed=2), rand(1, 5, 2, 6, seed=3)
    out = kernels.attention(q, k, v, causal=causal, backend=backend)
    for j in range(4):
        g = j // 2
        expected = pure.scaled_dot_product_attention(q[0, :, j].tolist(), k[0, :, g].tolist(), v[0, :, g].tolist(), causal)
        assert close(out[0, :, j], expected), f"head {j}"


def test_softmax_accumulates_in_fp32_for_bf16():
    logits = rand(3, 200, seed=1, dtype=torch.bfloat16) * 4
    got = ours.softmax(logits)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, torch.softmax(logits.float(), dim=-1).bfloat16())


# ---- every backend agrees -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_every_available_path_agrees_with_the_fp64_reference(dtype):
    result = kernels.backend_agreement("cpu", dtype)
    assert set(result["cases"]) == set(kernels.AGREEMENT_CASES)
    for case, paths in result["cases"].items():
        assert {"math", "sdpa"} <= set(paths), case
        assert "sdpa:MATH" in paths, f"{case}: SDPA's MATH kernel accepts anything"
        for path, diff in paths.items():
            assert diff <= kernels.TOLERANCE[dtype], f"{case} {path}: {diff:.2e} > {kernels.TOLERANCE[dtype]:.0e}"
    assert "sdpa_split_value" in result["cases"]["v1_values_2d"]


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_causal_mask_is_bottom_right_aligned(backend):
    """Query i of N_q = 3 over N_k = 7 keys is token i + 4: it sees keys 0..i+4, like a decoder with a 4-token cache."""
    q, k, v = rand(1, 3, 2, 8, seed=1), rand(1, 7, 2, 8, seed=2), rand(1, 7, 2, 8, seed=3)
    got = kernels.attention(q, k, v, causal=True, backend=backend)
    for i in range(3):
        visible = i + 4 + 1
        row = kernels.attention(q[:, i : i + 1], k[:, :visible], v[:, :visible], causal=False, backend="math")
        assert torch.allclose(got[:, i : i + 1], row, atol=1e-12), f"query {i}"


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_gqa_maps_query_head_i_to_kv_head_i_over_group_size(backend):
    q, k, v = rand(2, 5, 6, 4, seed=1), rand(2, 5, 2, 4, seed=2), rand(2, 5, 2, 4, seed=3)
    got = kernels.attention(q, k, v, backend=backend)
    groups = ours.query_head_groups(6, 2)
    assert groups == [0, 0, 0, 1, 1, 1]
    expected = kernels.attention(q, k[:, :, groups], v[:, :, groups], backend="math")  # one KV head per query head
    assert torch.allclose(got, expected, atol=1e-12)
    tiled = kernels.attention(q, k.repeat(1, 1, 3, 1), v.repeat(1, 1, 3, 1), backend="math")  # 0,1,0,1,.. is wrong
    assert (got - tiled).abs().max() > 1e-3


@FEW
@given(pieces=st.integers(1, 3), seed=st.integers(0, 1000))
def test_split_value_path_is_exact(pieces, seed):
    q, k = rand(1, 6, 4, 8, seed=seed), rand(1, 6, 2, 8, seed=seed + 1)
    v = rand(1, 6, 2, 8 * pieces, seed=seed + 2)
    whole = kernels.attention(q, k, v, backend="math")
    assert torch.allclose(kernels.split_value_attention(q, k, v, backend="sdpa"), whole, atol=1e-12)


@FEW
@given(block=st.integers(1, 9), n_q=st.integers(1, 12), causal=st.booleans(), seed=st.integers(0, 1000))
def test_tiled_online_softmax_equals_the_math_path(block, n_q, causal, seed):
    q, k, v = rand(1, n_q, 4, 8, seed=seed), rand(1, 12, 2, 8, seed=seed + 1), rand(1, 12, 2, 16, seed=seed + 2)
    tiled = kernels.tiled_attention(q, k, v, causal=causal, block_size=block)
    assert torch.allclose(tiled, kernels.attention(q, k, v, causal=causal, backend="math"), atol=1e-12)


def test_backend_resolution_on_cpu():
    q, k, v = torch.zeros(1, 4, 2, 8), torch.zeros(1, 4, 2, 8), torch.zeros(1, 4, 2, 16)
    assert kernels.resolve_backend(q, k, v) in {"sdpa", "flash_attn"}
    assert kernels.resolve_backend(q, k, v) == "sdpa", "CPU tensors never go to flash-attn"
    assert kernels.resolve_backend(q, k, v, "math") == "math"
    assert "flash_attn" not in kernels.available_backends() or torch.cuda.is_available()
    with pytest.raises(ConfigError, match="flash_attn.*cannot run"):
        kernels.resolve_backend(q, k, v, "flash_attn")
    with pytest.raises(ConfigError, match="backend must be one of"):
        kernels.resolve_backend(q, k, v, "xformers")
    assert "CUDA" in kernels.flash_attn_unsupported(q, k, v) or "not installed" in kernels.flash_attn_unsupported(q, k, v)


def test_sdpa_on_cpu_runs_v1_values_only_on_its_math_kernel():
    """Lesson 06's claim for this torch: the CPU FLASH kernel needs d_v == d; 2d-wide values fall back to MATH."""
    q, k = torch.zeros(1, 8, 4, 64), torch.zeros(1, 8, 2, 64)
    equal = kernels.sdpa_kernel_support(q, k, torch.zeros(1, 8, 2, 64))
    wide = kernels.sdpa_kernel_support(q, k, torch.zeros(1, 8, 2, 128))
    assert equal["MATH"] and wide["MATH"]
    assert equal["FLASH_ATTENTION"] and not wide["FLASH_ATTENTION"]


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((1, 4, 3, 8), (1, 4, 2, 8), (1, 4, 2, 8)), "multiple of KV heads"),
        (((1, 5, 2, 8), (1, 4, 2, 8), (1, 4, 2, 8)), "N_q <= N_k"),
        (((1, 4, 2, 8), (1, 4, 2, 4), (1, 4, 2, 8)), "same head dim"),
        (((1, 4, 2, 8), (1, 4, 2, 8), (1, 3, 2, 8)), "same length"),
        (((4, 2, 8), (4, 2, 8), (4, 2, 8)), "batch, seq, heads, head_dim"),
    ],
)
def test_bad_shapes_raise_config_errors(shapes, message):
    with pytest.raises(ConfigError, match=message):
        kernels.attention(*(torch.zeros(s) for s in shapes))


def test_diff_v2_gqa_attention_refuses_straddling_pairs():
    q, kv = torch.zeros(1, 2, 6, 4), torch.zeros(1, 2, 6, 4)
    with pytest.raises(ConfigError, match=r"pair \(0, 1\) would straddle"):
        kernels.diff_v2_gqa_attention(q, kv, kv, torch.zeros(1, 2, 3))
    with pytest.raises(ConfigError, match="lambda_logits"):
        kernels.diff_v2_gqa_attention(q, kv[:, :, :3], kv[:, :, :3], torch.zeros(1, 2, 6))


def test_flash_attn_is_never_imported_at_module_load():
    """CPU machines have no flash-attn: every import of it in diffattn.nn must sit inside a function body."""
    for path in sorted((ROOT / "code" / "diffattn" / "nn").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] == "flash_attn" for n in names), f"{path.name}:{node.lineno}"
    source = (ROOT / "code" / "diffattn" / "nn" / "kernels.py").read_text()
    assert "from flash_attn import flash_attn_func" in source, "the lazy import this test guards is still there"


# ---- RoPE and the cache -------------------------------------------------------------------------------------------

def test_rope_uses_interleaved_pairs():
    x = torch.zeros(1, 1, 1, 4, dtype=torch.float64)
    x[..., 0], x[..., 1] = 1.0, 2.0  # pair 0 = (1, 2); pair 1 = (0, 0)
    cos, sin = rope_cos_sin(torch.tensor([3]), 4, dtype=torch.float64)
    out = apply_rope(x, cos, sin)[0, 0, 0]
    c, s = torch.cos(torch.tensor(3.0, dtype=torch.float64)), torch.sin(torch.tensor(3.0, dtype=torch.float64))
    assert torch.allclose(out, torch.stack([1 * c - 2 * s, 2 * c + 1 * s, c * 0, c * 0]), atol=1e-15)


@FEW
@given(p=st.integers(0, 500), shift=st.integers(0, 500), seed=st.integers(0, 1000))
def test_rope_scores_depend_only_on_the_distance(p, shift, seed):
    q, k = rand(1, 1, 1, 8, seed=seed), rand(1, 1, 1, 8, seed=seed + 1)
    rot = lambda x, pos: apply_rope(x, *rope_cos_sin(torch.tensor([pos]), 8, dtype=torch.float64))  # noqa: E731
    score = lambda a, b: float((rot(q, a) * rot(k, b)).sum())  # noqa: E731
    assert abs(score(p + 7, p) - score(p + 7 + shift, p + shift)) < 1e-9
    assert abs(rot(q, p).norm().item() - q.norm().item()) < 1e-12, "a rotation keeps the length"


def test_rope_start_length_equals_explicit_positions_and_rejects_odd_dims():
    a = rope_cos_sin((5, 3), 8)
    b = rope_cos_sin(torch.tensor([5, 6, 7]), 8)
    assert all(torch.equal(x, y) for x, y in zip(a, b)) and a[0].shape == (3, 4)
    with pytest.raises(ConfigError, match="even head_dim"):
        rope_cos_sin((0, 3), 7)
    with pytest.raises(ConfigError, match="even head_dim"):
        apply_rope(torch.zeros(1, 3, 1, 7), torch.zeros(3, 3), torch.zeros(3, 3))
    with pytest.raises(ConfigError, match="cos/sin"):
        apply_rope(torch.zeros(1, 3, 1, 8), *rope_cos_sin((0, 4), 8))


def test_kv_cache_appends_along_the_sequence():
    cache = KVCache()
    assert len(cache) == 0
    k, v = cache.update(torch.ones(2, 3, 4, 8), torch.ones(2, 3, 4, 16))
    assert len(cache) == 3 and k.shape == (2, 3, 4, 8)
    k, v = cache.update(torch.zeros(2, 1, 4, 8), torch.zeros(2, 1, 4, 16))
    assert len(cache) == 4 and v.shape == (2, 4, 4, 16) and v[:, 3].abs().sum() == 0
    with pytest.raises(ConfigError, match="do not match the cache"):
        cache.update(torch.zeros(2, 1, 3, 8), torch.zeros(2, 1, 3, 16))


# ---- lesson 06's numbers ------------------------------------------------------------------------------------------

def test_kernel_plans_match_the_cost_model():
    """Attention FLOPs 1 / 1.5 / 2 / 2 × baseline; decode K/V reads 1 / 1.5 / 2 / 1× (derived here, as in lesson 04)."""
    from diffattn.lessons.lesson06_kernels import plans

    rows = plans()["variants"]
    assert [rows[v]["calls"] for v in rows] == [1, 2, 4, 1]
    assert [rows[v]["flops_vs_baseline"] for v in rows] == [1.0, 1.5, 2.0, 2.0]
    assert [rows[v]["kv_reads_vs_baseline"] for v in rows] == [1.0, 1.5, 2.0, 1.0]
    n = 4096
    assert rows["baseline"]["qk_flops"] == 2 * 16 * (n * (n + 1) // 2) * 64


def test_v1_paths_and_v2_single_call_are_the_same_computation():
    from diffattn.lessons.lesson06_kernels import v1_paths, v2_call

    assert v1_paths(torch.float64) < 1e-12 and v2_call(torch.float64) < 1e-12
    assert v1_paths(torch.float32) < 1e-5 and v2_call(torch.float32) < 1e-5


def test_paper_table7_percentages_are_relative_to_diff():
    """Table 7's printed −9/−9/−12/−10/−6/−5 % are (D − T)/D; the slowdown (T − D)/T is smaller."""
    from diffattn.lessons.lesson06_kernels import paper_throughput

    p = paper_throughput()
    printed = [-9, -9, -12, -10, -6, -5]  # Table 7's labels, train/forward per row
    got = [round(m["table_percent"] * 100) for modes in p["rows"].values() for m in modes.values()]
    assert got == printed
    assert all(m["diff_slower"] < -m["table_percent"] for modes in p["rows"].values() for m in modes.values())
    assert [round(x, 3) for x in p["slower_range"]] == [0.048, 0.103]


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_v2_rejects_non_finite_lambda_logits_like_the_stdlib(bad):
    """σ(±inf) is a finite 0 or 1, so the check must look at the logits themselves, as diffattn.pure does."""
    q = torch.zeros(3, 4, dtype=torch.float64)
    with pytest.raises(ConfigError, match="λ logits must be finite"):
        ours.diff_weights_v2(q, q, q, bad)
    with pytest.raises(ConfigError, match="λ logits must be finite"):
        pure.diff_weights_v2(q.tolist(), q.tolist(), q.tolist(), bad)
