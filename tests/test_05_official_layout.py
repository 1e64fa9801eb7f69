"""The attention modules against a deliberately naive reference written from the equations and the official layout.

The reference below shares no code with diffattn: plain loops over batch and heads, its own RoPE (one angle per
position and pair), its own softmax and RMS, all float64. It reads only the state dict, using the official key
names and these layout facts (microsoft/unilm Diff-Transformer/multihead_flashdiff_1.py and
Diff-Transformer-V2/multihead_flashdiffv2.py):

  V1  q.view(b,N,2h,d) → interleaved RoPE → head i = query slots (2i, 2i+1); k.view(b,N,2h_kv,d) likewise, and
      differential head i reads KV group g = i // (h/h_kv): key slots (2g, 2g+1), value v.view(b,N,h_kv,2d)[g];
      λ = exp(λq1·λk1) − exp(λq2·λk2) + 0.8 − 0.6·exp(−0.3·depth); RMS over 2d, × subln.weight,
      × (1 − λ_init).
  V2  q.view(b,N,2h,d), k/v.view(b,N,h_kv,d); query head j reads KV head j // (2h/h_kv); head i = 2i − σ(λ_i)·(2i+1).
  MHA query head i reads KV head i // (h/h_kv).

Modules and reference share a state dict; they must agree to 1e-10 for MHA and GQA, on the "math" and "sdpa"
backends. Also here: official key names and shapes, strict loading, wrong-variant errors, construction errors,
KV-cache decoding, parameter counts.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from diffattn.core.errors import ConfigError  # noqa: E402
from diffattn.nn import DiffAttentionV1, DiffAttentionV2, KVCache, MultiheadAttention, rope_cos_sin  # noqa: E402

pytestmark = pytest.mark.torch
TOL = 1e-10


# ---- the naive reference ------------------------------------------------------------------------------------------

def naive_rope(x, base: float = 10000.0):
    """x (b, N, heads, d): channel pair (2i, 2i+1) at position t turns by t·base^(−2i/d)."""
    out = x.clone()
    d = x.shape[-1]
    for t in range(x.shape[1]):
        for i in range(d // 2):
            angle = t * base ** (-2 * i / d)
            c, s = math.cos(angle), math.sin(angle)
            a, b = x[:, t, :, 2 * i], x[:, t, :, 2 * i + 1]
            out[:, t, :, 2 * i], out[:, t, :, 2 * i + 1] = a * c - b * s, b * c + a * s
    return out


def naive_map(q, k):
    """Causal softmax(q kᵀ/√d) for one head, (N, d) × (N, d) -> (N, N), row by row."""
    n, d = q.shape
    weights = torch.zeros(n, n, dtype=torch.float64)
    for t in range(n):
        scores = [float(q[t] @ k[j]) / math.sqrt(d) for j in range(t + 1)]
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        for j, e in enumerate(exps):
            weights[t, j] = e / sum(exps)
    return weights


def project(sd, name, x):
    return x @ sd[f"{name}.weight"].double().T


def naive_baseline(sd, x, h, h_kv):
    b, n, _ = x.shape
    d = sd["q_proj.weight"].shape[0] // h
    q = naive_rope(project(sd, "q_proj", x).view(b, n, h, d))
    k = naive_rope(project(sd, "k_proj", x).view(b, n, h_kv, d))
    v = project(sd, "v_proj", x).view(b, n, h_kv, d)
    heads = torch.zeros(b, n, h, d, dtype=torch.float64)
    for bi in range(b):
        for i in range(h):
            g = i // (h // h_kv)
            heads[bi, :, i] = naive_map(q[bi, :, i], k[bi, :, g]) @ v[bi, :, g]
    return project(sd, "out_proj", heads.reshape(b, n, h * d))


def naive_v1(sd, x, depth, h, h_kv):
    b, n, e = x.shape
    d = e // h // 2
    q = naive_rope(project(sd, "q_proj", x).view(b, n, 2 * h, d))
    k = naive_rope(project(sd, "k_proj", x).view(b, n, 2 * h_kv, d))
    v = project(sd, "v_proj", x).view(b, n, h_kv, 2 * d)
    init = 0.8 - 0.6 * math.exp(-0.3 * depth)
    dot = lambda a, c: float(sd[a].double() @ sd[c].double())  # noqa: E731
    lam = math.exp(dot("lambda_q1", "lambda_k1")) - math.exp(dot("lambda_q2", "lambda_k2")) + init
    gamma = sd["subln.weight"].double()
    heads = torch.zeros(b, n, h, 2 * d, dtype=torch.float64)
    for bi in range(b):
        for i in range(h):
            g = i // (h // h_kv)
            a1 = naive_map(q[bi, :, 2 * i], k[bi, :, 2 * g])
            a2 = naive_map(q[bi, :, 2 * i + 1], k[bi, :, 2 * g + 1])
            o = (a1 - lam * a2) @ v[bi, :, g]  # (N, 2d)
            rms = torch.sqrt((o * o).mean(dim=-1, keepdim=True) + 1e-5)
            heads[bi, :, i] = o / rms * gamma * (1 - init)
    return project(sd, "out_proj", heads.reshape(b, n, e))


def naive_v2(sd, x, h, h_kv):
    b, n, _ = x.shape
    d = sd["q_proj.weight"].shape[0] // (2 * h)
    q = naive_rope(project(sd, "q_proj", x).view(b, n, 2 * h, d))
    k = naive_rope(project(sd, "k_proj", x).view(b, n, h_kv, d))
    v = project(sd, "v_proj", x).view(b, n, h_kv, d)
    gate = torch.sigmoid(project(sd, "lambda_proj", x))  # (b, N, h)
    per_group = 2 * h // h_kv
    heads = torch.zeros(b, n, h, d, dtype=torch.float64)
    for bi in range(b):
        for i in range(h):
            g = (2 * i) // per_group
            assert g == (2 * i + 1) // per_group
            a1 = naive_map(q[bi, :, 2 * i], k[bi, :, g])
            a2 = naive_map(q[bi, :, 2 * i + 1], k[bi, :, g])
            heads[bi, :, i] = (a1 - gate[bi, :, i, None] * a2) @ v[bi, :, g]
    return project(sd, "o_proj", heads.reshape(b, n, h * d))


# ---- module builders ----------------------------------------------------------------------------------------------

CASES = {
    "baseline_mha": (lambda be: MultiheadAttention(32, 4, backend=be), lambda sd, x: naive_baseline(sd, x, 4, 4)),
    "baseline_gqa": (lambda be: MultiheadAttention(32, 4, 2, backend=be), lambda sd, x: naive_baseline(sd, x, 4, 2)),
    "v1_mha": (lambda be: DiffAttentionV1(32, 2, 2, backend=be), lambda sd, x: naive_v1(sd, x, 2, 2, 2)),
    "v1_gqa": (lambda be: DiffAttentionV1(64, 1, 4, 2, backend=be), lambda sd, x: naive_v1(sd, x, 1, 4, 2)),
    "v2_mha": (lambda be: DiffAttentionV2(32, 4, 4, backend=be), lambda sd, x: naive_v2(sd, x, 4, 4)),
    "v2_gqa": (lambda be: DiffAttentionV2(32, 4, 2, backend=be), lambda sd, x: naive_v2(sd, x, 4, 2)),
}


def randomise(module, seed: int):
    """Every parameter random (subln weight and λ vectors too), so no term can hide behind an init of 0 or 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * (0.3 if p.dim() == 1 else 0.25))
    return module


def rope_for(module, n, start=0):
    return rope_cos_sin((start, n), module.head_dim, dtype=torch.float64)


@pytest.mark.parametrize("backend", ["math", "sdpa"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_module_equals_the_naive_reference(case, backend):
    build, naive = CASES[case]
    module = randomise(build(backend).double(), seed=1)
    x = torch.randn(2, 6, module.q_proj.in_features, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        got = module(x, rope_for(module, 6))
    expected = naive(module.state_dict(), x)
    assert (got - expected).abs().max().item() < TOL


@pytest.mark.parametrize("case", sorted(CASES))
def test_kv_cache_decoding_equals_the_full_forward(case):
    module = randomise(CASES[case][0]("auto").double(), seed=3)
    x = torch.randn(1, 7, module.q_proj.in_features, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    with torch.no_grad():
        full = module(x, rope_for(module, 7))
        cache = KVCache()
        steps = [module(x[:, :3], rope_for(module, 3), cache)]  # prefill 3 tokens, then a 2-token chunk, then 1 + 1
        for lo, hi in ((3, 5), (5, 6), (6, 7)):
            steps.append(module(x[:, lo:hi], rope_for(module, hi - lo, start=len(cache)), cache))
    assert len(cache) == 7
    assert (torch.cat(steps, dim=1) - full).abs().max().item() < TOL


# ---- official parameter names and shapes --------------------------------------------------------------------------

def official_shapes(variant: str, e: int, h: int, h_kv: int, d: int) -> dict:
    """Key -> shape, written from the official files' constructors (not from our modules)."""
    if variant == "baseline":  # multihead_attention.py: q, k, v, out_proj; k/v narrowed by n_rep
        return {"q_proj.weight": (h * d, e), "k_proj.weight": (h_kv * d, e), "v_proj.weight": (h_kv * d, e),
                "out_proj.weight": (e, h * d)}
    if variant == "v1":  # multihead_flashdiff_1.py: embed_dim // n_rep for k/v, λ vectors (d,), subln (2d,)
        n_rep = h // h_kv
        return {"q_proj.weight": (e, e), "k_proj.weight": (e // n_rep, e), "v_proj.weight": (e // n_rep, e),
                "out_proj.weight": (e, e), "lambda_q1": (d,), "lambda_k1": (d,), "lambda_q2": (d,), "lambda_k2": (d,),
                "subln.weight": (2 * d,)}
    return {"q_proj.weight": (2 * h * d, e), "k_proj.weight": (h_kv * d, e), "v_proj.weight": (h_kv * d, e),
            "o_proj.weight": (e, h * d), "lambda_proj.weight": (h, e)}  # multihead_flashdiffv2.py


@pytest.mark.parametrize(
    "module, variant, dims",
    [
        (lambda: MultiheadAttention(1024, 16, 8), "baseline", (1024, 16, 8, 64)),
        (lambda: DiffAttentionV1(1024, 0, 8), "v1", (1024, 8, 8, 64)),
        (lambda: DiffAttentionV1(1024, 3, 8, 4), "v1", (1024, 8, 4, 64)),
        (lambda: DiffAttentionV2(1024, 16, 8), "v2", (1024, 16, 8, 64)),
    ],
)
def test_official_state_dicts_load_strictly(module, variant, dims):
    m = module()
    expected = official_shapes(variant, *dims)
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == expected
    g = torch.Generator().manual_seed(0)
    official = {k: torch.randn(shape, generator=g) for k, shape in expected.items()}
    m.load_state_dict(official, strict=True)
    assert all(torch.equal(m.state_dict()[k], official[k]) for k in expected)


@pytest.mark.parametrize(
    "target, source, found",
    [
        (lambda: DiffAttentionV1(64, 0, 2), lambda: DiffAttentionV2(64, 4), "DiffAttentionV2"),
        (lambda: DiffAttentionV2(64, 4), lambda: DiffAttentionV1(64, 0, 2), "DiffAttentionV1"),
        (lambda: DiffAttentionV1(64, 0, 2), lambda: MultiheadAttention(64, 4), "MultiheadAttention"),
        (lambda: MultiheadAttention(64, 4), lambda: DiffAttentionV1(64, 0, 2), "DiffAttentionV1"),
    ],
)
def test_loading_the_wrong_variant_names_it(target, source, found):
    with pytest.raises(ConfigError, match=found):
        target().load_state_dict(source().state_dict())


def test_wrong_variant_is_caught_inside_a_bigger_model():
    model = torch.nn.ModuleDict({"attn": DiffAttentionV2(64, 4)})
    other = torch.nn.ModuleDict({"attn": DiffAttentionV1(64, 0, 2)})
    with pytest.raises(ConfigError, match="'attn' holds a DiffAttentionV1"):
        model.load_state_dict(other.state_dict())


def test_parameter_counts_match_the_official_example():
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    # example.py's sizes (DIFF 8 heads vs a 16-head Transformer); the counts are derived here: baseline + 6d for V1,
    # baseline + D·h·d + D·h for V2 (shapes of multihead_flashdiff_1.py, Diff-Transformer-V2/multihead_flashdiffv2.py)
    assert count(DiffAttentionV1(1024, 0, 8)) == 4_194_688
    assert count(MultiheadAttention(1024, 16)) == 4_194_304
    assert count(DiffAttentionV1(1024, 0, 8, 4)) == 3_146_112
    assert count(MultiheadAttention(1024, 16, 8)) == 3_145_728
    assert count(DiffAttentionV2(1024, 16, 8)) == 4_210_688  # 3,145,728 + 1024·16·64 + 1024·16
    assert count(MultiheadAttention(1024, 32, 8, head_dim=64)) == 5_242_880  # the 2h-query-head Transformer


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: DiffAttentionV1(60, 0, 4), "divisible by 2·num_heads"),
        (lambda: DiffAttentionV1(64, 0, 4, 3), "multiple of num_kv_heads"),
        (lambda: DiffAttentionV1(24, 0, 4), "head_dim must be even"),
        (lambda: DiffAttentionV1(64, -1, 2), "depth"),
        (lambda: DiffAttentionV2(48, 3, 6), "straddle"),
        (lambda: DiffAttentionV2(64, 4, 3), "multiple of KV heads"),
        (lambda: DiffAttentionV2(64, 4, 2, head_dim=7), "head_dim must be even"),
        (lambda: MultiheadAttention(12, 4), "head_dim must be even"),
        (lambda: MultiheadAttention(30, 4), "divisible by num_heads"),
        (lambda: MultiheadAttention(32, 4, backend="triton"), "backend"),
    ],
)
def test_bad_configurations_raise_one_line_config_errors(build, message):
    with pytest.raises(ConfigError, match=message) as info:
        build()
    assert "\n" not in str(info.value)


def test_v1_lambda_parameters_stay_fp32_and_start_near_lambda_init():
    torch.manual_seed(0)
    module = DiffAttentionV1(256, depth=2, num_heads=1)
    assert all(getattr(module, n).dtype == torch.float32 for n in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"))
    assert module.lambda_full().dtype == torch.float32 and module.lambda_full().dim() == 0
    assert abs(module.lambda_init - 0.4707) < 1e-4
    assert torch.all(module.subln.weight == 1.0), "subln is affine, initialised to 1 (PR #1644)"


@pytest.mark.parametrize("build", [
    lambda: MultiheadAttention(32, 4, 2),
    lambda: DiffAttentionV1(32, 0, 2, 1),
    lambda: DiffAttentionV2(32, 4, 2),
], ids=["baseline", "v1", "v2"])
def test_inputs_of_the_wrong_dtype_device_or_width_are_one_line_errors(build):
    module = build()
    rope = rope_cos_sin((0, 5), module.head_dim)
    with pytest.raises(ConfigError, match="weights are torch.float32"):
        module(torch.zeros(1, 5, 32, dtype=torch.float64), rope)
    with pytest.raises(ConfigError, match="weights are on cpu"):
        module(torch.zeros(1, 5, 32, device="meta"), rope)
    with pytest.raises(ConfigError, match=r"takes x of shape \(batch, seq, 32\)"):
        module(torch.zeros(1, 5, 16), rope)
