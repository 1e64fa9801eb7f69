"""Properties DIFF attention must have, checked on the torch code (hypothesis where a property has a free input).

causality of all three modules · effective-map row sums 1 − λ and 1 − σ(λ) · linearity (A1 − λA2)V = A1V − λA2V
· the λ_init table · V2's two reductions · the wrong V2 pairing (halves) · fp64 gradchecks · lesson 05's numbers.
"""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings, strategies as st  # noqa: E402

from diffattn.nn import DiffAttentionV1, DiffAttentionV2, MultiheadAttention, rope_cos_sin  # noqa: E402
from diffattn.nn import functional as ours  # noqa: E402
from diffattn.nn.kernels import attention, diff_v2_gqa_attention  # noqa: E402
from diffattn.nn.rope import apply_rope  # noqa: E402

pytestmark = pytest.mark.torch
FEW = settings(max_examples=12, deadline=None)


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


BUILDERS = {
    "baseline": lambda: MultiheadAttention(32, 4, 2),
    "v1": lambda: DiffAttentionV1(32, 1, 2, 1),
    "v2": lambda: DiffAttentionV2(32, 4, 2),
}


@pytest.fixture(scope="module")
def modules():
    torch.manual_seed(0)
    return {name: build().double() for name, build in BUILDERS.items()}


@pytest.mark.parametrize("name", sorted(BUILDERS))
@FEW
@given(t=st.integers(0, 7), seed=st.integers(0, 10_000))
def test_a_future_token_changes_no_earlier_output(modules, name, t, seed):
    module = modules[name]
    x = rand(1, 8, 32, seed=seed)
    changed = x.clone()
    changed[:, t:] += rand(1, 8 - t, 32, seed=seed + 1)  # rewrite token t and everything after it
    rope = rope_cos_sin((0, 8), module.head_dim, dtype=torch.float64)
    with torch.no_grad():
        before, after = module(x, rope), module(changed, rope)
    assert torch.allclose(before[:, :t], after[:, :t], rtol=0, atol=1e-12), "an earlier output saw the future"
    assert (before[:, t] - after[:, t]).abs().max() > 1e-6, "token t itself must see its own change"


@FEW
@given(lam=st.floats(-1.5, 2.0), n_q=st.integers(1, 6), extra=st.integers(0, 3), causal=st.booleans(),
       seed=st.integers(0, 1000))
def test_v1_rows_sum_to_one_minus_lambda(lam, n_q, extra, causal, seed):
    n_k = n_q + extra
    q1, q2 = rand(2, n_q, 4, seed=seed)
    k1, k2 = rand(2, n_k, 4, seed=seed + 1)
    weights = ours.diff_weights_v1(q1, k1, q2, k2, lam, causal)
    assert torch.allclose(weights.sum(-1), torch.full((n_q,), 1 - lam, dtype=torch.float64), atol=1e-12)


@FEW
@given(n_q=st.integers(1, 6), seed=st.integers(0, 1000))
def test_v2_rows_sum_to_one_minus_sigma(n_q, seed):
    q1, q2, k = rand(3, n_q, 4, seed=seed)
    logits = rand(n_q, seed=seed + 1) * 3
    weights = ours.diff_weights_v2(q1, q2, k, logits, causal=True)
    expected = 1 - torch.sigmoid(logits)
    assert torch.allclose(weights.sum(-1), expected, atol=1e-12)
    assert bool(((expected > 0) & (expected < 1)).all()), "σ keeps V2's row sums inside (0, 1)"


@FEW
@given(lam=st.floats(-1.0, 1.5), n=st.integers(1, 8), seed=st.integers(0, 1000))
def test_linearity_two_kernel_calls_equal_one_weight_matrix(lam, n, seed):
    """(A1 − λA2)V with one matmul (the naive path) equals A1V − λ·A2V from two kernel calls (the flash path)."""
    q1, k1, q2, k2 = rand(4, 1, n, 1, 4, seed=seed)  # (b, N, heads, d)
    v = rand(1, n, 1, 8, seed=seed + 1)  # 2d-wide values
    one_matmul = ours.diff_attention_v1(q1[0, :, 0], k1[0, :, 0], q2[0, :, 0], k2[0, :, 0], v[0, :, 0], lam, causal=True)
    two_calls = attention(q1, k1, v) - lam * attention(q2, k2, v)
    assert torch.allclose(two_calls[0, :, 0], one_matmul, atol=1e-12)


def test_lambda_init_table_and_limit():
    table = {0: 0.2000, 1: 0.3555, 2: 0.4707, 3: 0.5561, 4: 0.6193, 5: 0.6661, 6: 0.7008}  # 0.8 − 0.6·exp(−0.3·d)
    assert {d: round(ours.lambda_init(d), 4) for d in table} == table
    assert all(ours.lambda_init(d) < ours.lambda_init(d + 1) < 0.8 for d in range(60)), "increasing, bounded by 0.8"


# ---- V2 reductions and pairing ------------------------------------------------------------------------------------

def v2_module(h=4, h_kv=2, seed=0):
    torch.manual_seed(seed)
    return DiffAttentionV2(32, h, h_kv).double()


def test_v2_with_zero_lambda_proj_is_a1v_minus_half_a2v():
    module = v2_module()
    torch.nn.init.zeros_(module.lambda_proj.weight)
    x, rope = rand(2, 6, 32, seed=1), rope_cos_sin((0, 6), module.head_dim, dtype=torch.float64)
    with torch.no_grad():
        got = module(x, rope)
        q = apply_rope(module.q_proj(x).view(2, 6, 8, 8), *rope)
        k = apply_rope(module.k_proj(x).view(2, 6, 2, 8), *rope)
        out = attention(q, k, module.v_proj(x).view(2, 6, 2, 8))  # (b, N, 2h, d)
        expected = module.o_proj((out[:, :, 0::2] - 0.5 * out[:, :, 1::2]).reshape(2, 6, 32))
    assert torch.allclose(got, expected, atol=1e-12)


def test_v2_with_identical_query_pairs_is_half_the_baseline():
    """Q1 = Q2 and λ = 0: each head is (1 − ½)·AV, so the module is ½ × a baseline with the shared weights."""
    module = v2_module()
    torch.nn.init.zeros_(module.lambda_proj.weight)
    with torch.no_grad():
        w = module.q_proj.weight.view(4, 2, 8, 32)  # (head, pair member, d, d_model)
        w[:, 1] = w[:, 0]
        first_of_pairs = w[:, 0].reshape(32, 32).clone()
    baseline = MultiheadAttention(32, 4, 2, head_dim=8).double()
    baseline.load_state_dict({"q_proj.weight": first_of_pairs, "k_proj.weight": module.k_proj.weight,
                              "v_proj.weight": module.v_proj.weight, "out_proj.weight": module.o_proj.weight})
    x, rope = rand(2, 6, 32, seed=2), rope_cos_sin((0, 6), 8, dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(module(x, rope), 0.5 * baseline(x, rope), atol=1e-12)


@FEW
@given(seed=st.integers(0, 1000))
def test_identical_pairs_give_one_minus_sigma_times_av(seed):
    q_half = rand(1, 5, 2, 4, seed=seed)
    q = q_half.repeat_interleave(2, dim=2)  # heads (2i, 2i+1) identical
    k, v = rand(1, 5, 1, 4, seed=seed + 1), rand(1, 5, 1, 4, seed=seed + 2)
    logits = rand(1, 5, 2, seed=seed + 3)
    got = diff_v2_gqa_attention(q, k, v, logits)
    expected = (1 - torch.sigmoid(logits))[..., None] * attention(q_half, k, v)
    assert torch.allclose(got, expected, atol=1e-12)


@pytest.mark.parametrize("h, h_kv", [(4, 2), (4, 4), (8, 2)])
def test_pairing_halves_instead_of_neighbours_is_wrong(h, h_kv):
    """chunk(2) pairs head i with head i + h, from different GQA groups (blog ablation 1): show the straddle and the damage."""
    groups = ours.query_head_groups(2 * h, h_kv)
    assert all(groups[2 * i] == groups[2 * i + 1] for i in range(h)), "neighbours share a KV head"
    assert any(groups[i] != groups[i + h] for i in range(h)), "halves straddle KV groups"
    q, k, v = rand(1, 6, 2 * h, 4, seed=1), rand(1, 6, h_kv, 4, seed=2), rand(1, 6, h_kv, 4, seed=3)
    logits = rand(1, 6, h, seed=4)
    out = attention(q, k, v)
    halves = out[:, :, :h] - torch.sigmoid(logits)[..., None] * out[:, :, h:]
    right = diff_v2_gqa_attention(q, k, v, logits)
    assert (halves - right).abs().max() > 1e-2


# ---- gradients ----------------------------------------------------------------------------------------------------

TINY = {  # d_model 8, head dim 4: gradcheck perturbs every input, so keep the inputs few
    "baseline": (lambda: MultiheadAttention(8, 2, 1), "k_proj.weight"),
    "v1": (lambda: DiffAttentionV1(8, 1, 1), "lambda_q2"),
    "v2": (lambda: DiffAttentionV2(8, 2, 1), "lambda_proj.weight"),
}


@pytest.mark.parametrize("name", sorted(TINY))
def test_gradcheck_fp64(name):
    """Analytic gradients of the output w.r.t. the input and one variant-specific parameter match finite differences."""
    build, extra = TINY[name]
    torch.manual_seed(0)
    module = build().double()
    params = dict(module.named_parameters())
    rope = rope_cos_sin((0, 3), module.head_dim, dtype=torch.float64)

    def fn(x, p):
        return torch.func.functional_call(module, {**params, extra: p}, (x, rope))

    x = rand(1, 3, 8, seed=5).requires_grad_()
    p = params[extra].detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(fn, (x, p), eps=1e-6, atol=1e-7)


# ---- lesson 05's numbers ------------------------------------------------------------------------------------------

def test_the_six_token_example_is_reproduced():
    from diffattn.lessons.lesson05_diff_v1_torch import seed_example

    s = seed_example()
    line = f"Each row sums to {s['row_sum_first']:.2f}; {s['negative']} of {s['total']} weights are negative"
    assert line == "Each row sums to 0.20; 13 of 36 weights are negative"
    assert s["row_sum_max_error"] < 1e-6 and s["softmax_negative"] == 0


def test_lambda_spread_at_init_matches_the_derivation():
    from diffattn.lessons.lesson05_diff_v1_torch import lambda_at_init

    r = lambda_at_init(128, seeds=200)  # std of the std estimate ≈ 0.008
    assert abs(r["predicted_std"] - 0.16) < 1e-3  # derived here: √(2·128)·0.01 = 0.16
    assert 0.13 < r["std"] < 0.19 and abs(r["mean"]) < 0.03


def test_norm_sets_every_head_to_one_minus_lambda_init():
    from diffattn.lessons.lesson05_diff_v1_torch import norm_effect

    r = norm_effect(depth=3)
    # eps = 1e-5 against a mean square of ~1e-2 pulls the RMS down by ~eps/(2·ms) ≈ 5e-4 relative
    assert abs(r["rms_after"] - (1 - ours.lambda_init(3))) < 2e-3
    assert r["rms_before"] < r["rms_values"], "the differential heads start smaller than the values"


def test_torch_mirror_matches_stdlib():
    from diffattn.lessons.lesson05_diff_v1_torch import stdlib_agreement

    assert max(stdlib_agreement().values()) < 1e-12
