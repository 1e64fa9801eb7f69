"""Graded exercises 05.1-05.3: λ re-parameterisation, λ_init(depth), per-head RMSNorm × (1 − λ_init).

Every test calls `impl.<function>` (tests/adapters.py), so `--impl exercises` grades the stubs in
exercises/ex05_diff_v1.py and `--impl tests.wrong.w05_*` proves these tests reject known mistakes.
References are written inline from the formulas, in float64. Tolerances: λ 1e-6 (float32 result), λ_init 1e-12,
norm 1e-5 (float32 inputs), 2e-2 (bfloat16) and 1e-2 (float16); the documented order of the half-precision norm is
checked entry by entry (at most 1% of entries one ulp off, see test_half_precision_heads_follow_the_documented_order).
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from tests.feedback import mistake, refuses, show  # noqa: E402

pytestmark = pytest.mark.torch

# λ_init = 0.8 − 0.6·exp(−0.3·depth), depth 0-based (`lambda_init_fn` in microsoft/unilm
# Diff-Transformer/multihead_flashdiff_1.py; the paper's eq. 2 writes it with 1-based l), to 4 decimals.
SPEC_TABLE = {0: 0.2000, 1: 0.3555, 2: 0.4707, 3: 0.5561, 4: 0.6193, 5: 0.6661, 6: 0.7008, 8: 0.7456, 10: 0.7701,
              12: 0.7836, 15: 0.7933, 20: 0.7985, 27: 0.7998}


def _vectors(d: int, std: float, dtype, seed: int):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(d, generator=g, dtype=torch.float64) * std).to(dtype) for _ in range(4)]


def _lambda64(q1, k1, q2, k2, init: float) -> float:
    q1, k1, q2, k2 = (t.double() for t in (q1, k1, q2, k2))
    return math.exp(float(q1 @ k1)) - math.exp(float(q2 @ k2)) + init


HEAD_AXES = ("batch", "position", "head", "channel")  # headwise_norm's (b, N, h, 2d)


def precise(x) -> str:
    """A float to 10 significant digits (tolerances here reach 1e-12); anything else as show() has it."""
    return f"{x:.10g}" if isinstance(x, float) else show(x)


def first_far(got, want, atol: float, rtol: float = 1e-5, axes=HEAD_AXES, first_head: int = 0) -> str:
    """Where torch.allclose(got, want, rtol, atol) first fails, for a message: 'batch 0, position 1, head 2,
    channel 3: expected 0.8, got 0.79'. The check itself stays torch.allclose; this only describes its verdict.
    `first_head`: the head that index 0 of a sliced (b, N, h, 2d) tensor is."""
    if got.shape != want.shape:
        return f"expected shape {tuple(want.shape)}, got shape {tuple(got.shape)}"
    far = ~torch.isclose(got, want, rtol=rtol, atol=atol)
    if not far.any():
        return f"got {show(got)}"
    index = tuple(far.nonzero()[0].tolist())
    place = ", ".join(f"{name} {i + (first_head if name == 'head' else 0)}" for name, i in zip(axes, index))
    return f"{place}: expected {show(want[index].item())}, got {show(got[index].item())} (atol {atol:g}, rtol {rtol:g})"


# ---- 05.1 ---------------------------------------------------------------------------------------------------------

@pytest.mark.grade("05.1", points=2)
@pytest.mark.parametrize("seed, d, std", [(0, 64, 0.1), (1, 128, 0.1), (2, 32, 0.4)])
def test_lambda_matches_the_formula(impl, seed, d, std):
    vectors = _vectors(d, std, torch.float32, seed)
    got = impl.reparameterized_lambda(*vectors, 0.3555)
    assert isinstance(got, torch.Tensor) and got.dim() == 0, \
        f"reparameterized_lambda (d={d}): λ is ONE scalar per layer, a 0-dim tensor; got {show(got)}"
    assert got.dtype == torch.float32, f"reparameterized_lambda (d={d}): λ must be float32, got {got.dtype}"
    want = _lambda64(*vectors, 0.3555)
    assert abs(got.item() - want) < 1e-6, (f"λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init (d={d}, λ_init=0.3555): "
                                           f"expected {precise(want)}, got {precise(got.item())} (tolerance 1e-6)")


@pytest.mark.grade("05.1", points=1)
def test_lambda_is_computed_in_fp32_even_for_bf16_vectors(impl):
    vectors = _vectors(128, 0.3, torch.bfloat16, seed=3)  # dot products of order 1: bf16 arithmetic is off by ~1e-2
    got = impl.reparameterized_lambda(*vectors, 0.2)
    assert got.dim() == 0, f"λ from bfloat16 vectors (d=128): λ is ONE scalar, a 0-dim tensor; got {show(got)}"
    assert got.dtype == torch.float32, \
        f"λ from bfloat16 vectors (d=128): must be float32 (upcast before multiplying), got {got.dtype}"
    want = _lambda64(*vectors, 0.2)
    assert abs(got.item() - want) < 1e-6, (f"λ from bfloat16 vectors (d=128, λ_init=0.2): expected {precise(want)}, "
                                           f"got {precise(got.item())}; the products and sums must run in float32")


@pytest.mark.grade("05.1", points=1)
@pytest.mark.parametrize("init", [0.2, 0.5, 0.7998])
def test_zero_vectors_give_lambda_init(impl, init):
    zero = torch.zeros(16)
    got = impl.reparameterized_lambda(zero, zero, zero, zero, init)
    assert got.dim() == 0, f"λ from zero vectors (λ_init={init}): λ is ONE scalar, a 0-dim tensor; got {show(got)}"
    assert abs(got.item() - init) < 1e-6, (f"λ from zero vectors: exp(0) − exp(0) + λ_init must equal λ_init = {init}, "
                                           f"got {precise(got.item())}")


@pytest.mark.grade("05.1", points=1)
def test_lambda_is_unconstrained_and_differentiable(impl):
    q1, k1, q2, k2 = (torch.full((8,), x, requires_grad=True) for x in (0.0, 0.0, 0.5, 0.5))
    want = 1.0 - math.exp(2.0) + 0.2
    got = impl.reparameterized_lambda(q1, k1, q2, k2, 0.2)
    assert abs(got.item() - want) < 1e-5, (f"λ with λ_q2 = λ_k2 = 0.5 (d=8, λ_init=0.2): expected 1 − e² + 0.2 = "
                                           f"{precise(want)}, got {precise(got.item())}; nothing may clamp λ")
    got.backward()
    # ∂λ/∂λ_q2 = −exp(λ_q2·λ_k2)·λ_k2
    grad = -math.exp(2.0) * 0.5
    assert torch.allclose(q2.grad, torch.full((8,), grad), atol=1e-5), \
        f"∂λ/∂λ_q2 = −exp(λ_q2·λ_k2)·λ_k2: expected {show(grad)} in each of 8 entries, got {show(q2.grad)}"


@pytest.mark.grade("05.1", points=1)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float64], ids=["float16", "float64"])
def test_lambda_of_any_float_dtype(impl, dtype):
    """"Any float dtype ... computed in float32": float16 vectors too (not only bfloat16), float64 may stay float64.
    Tolerance 1e-6: a float32 computation from the same (exactly representable) entries is off by ~1e-7 at d = 128,
    one done in float16 by ~1e-3."""
    vectors = _vectors(128, 0.3, dtype, seed=7)
    got = impl.reparameterized_lambda(*vectors, 0.2)
    assert isinstance(got, torch.Tensor) and got.dim() == 0, \
        f"λ from {dtype} vectors (d=128): λ is ONE scalar, a 0-dim tensor; got {show(got)}"
    allowed = (torch.float32, torch.float64) if dtype == torch.float64 else (torch.float32,)
    assert got.dtype in allowed, f"λ from {dtype} vectors (d=128): must be float32, got {got.dtype}"
    want = _lambda64(*vectors, 0.2)
    assert abs(got.item() - want) < 1e-6, (f"λ from {dtype} vectors (d=128, λ_init=0.2): expected {precise(want)}, "
                                           f"got {precise(got.item())}; upcast to float32 before multiplying")


@pytest.mark.grade("05.1", points=1)
def test_lambda_with_dot_products_up_to_88(impl):
    """Extreme but valid: dot products up to 88 keep exp finite in float32 (exp(88) ≈ 1.65e38). Entries 2 and 2.75
    over d = 16 make the dot product exactly 88 in any summation order; exp is then off by a float32 ulp or two,
    hence the relative tolerance 1e-6."""
    big, small, zero = torch.full((16,), 2.0), torch.full((16,), 2.75), torch.zeros(16)
    got = impl.reparameterized_lambda(big, small, big, small, 0.3)
    assert abs(got.item() - 0.3) < 1e-6, (f"λ with λ_q1·λ_k1 = λ_q2·λ_k2 = 88: exp(88) − exp(88) + λ_init is λ_init "
                                          f"= 0.3, got {precise(got.item())}")
    for q1, k1, q2, k2, sign in [(big, small, zero, zero, 1.0), (zero, zero, big, small, -1.0)]:
        got = impl.reparameterized_lambda(q1, k1, q2, k2, 0.3)
        want = sign * (math.exp(88.0) - 1.0) + 0.3
        assert abs(got.item() - want) <= 1e-6 * abs(want), (
            f"λ with dot products {'88 and 0' if sign > 0 else '0 and 88'}: expected {precise(want)}, "
            f"got {precise(got.item())} (relative tolerance 1e-6)")


# ---- 05.2 ---------------------------------------------------------------------------------------------------------

@pytest.mark.grade("05.2", points=2)
def test_lambda_init_table(impl):
    for depth, expected in SPEC_TABLE.items():
        got = impl.lambda_init(depth)
        want = 0.8 - 0.6 * math.exp(-0.3 * depth)
        assert abs(got - want) < 1e-12, (f"λ_init(depth={depth}) = 0.8 − 0.6·exp(−0.3·{depth}), depth 0-based: "
                                         f"expected {precise(want)}, got {precise(got)}")
        assert round(got, 4) == expected, \
            f"λ_init(depth={depth}) to 4 decimals: the table says {expected}, got {got:.4f}"


@pytest.mark.grade("05.2", points=1)
def test_first_layer_is_0_2(impl):
    got = impl.lambda_init(0)
    assert abs(got - 0.2) < 1e-12, \
        f"λ_init(depth=0), the first layer (depth is 0-based): expected exactly 0.2, got {precise(got)}"


@pytest.mark.grade("05.2", points=1)
@pytest.mark.parametrize("depth", [-1, -5])
def test_negative_depth_is_rejected(impl, depth):
    with refuses(ValueError, f"lambda_init(depth={depth}), a negative depth", mentioning="depth"):
        impl.lambda_init(depth)


@pytest.mark.grade("05.2", points=1)
@pytest.mark.parametrize("depth", [2366, 2367, 10_000, 10**400], ids=["2366", "2367", "10000", "10**400"])
def test_lambda_init_of_very_deep_layers(impl, depth):
    """Any int depth >= 0: exp(−0.3·depth) underflows to 0 from depth ~2500 on, and λ_init is 0.8; no step may
    overflow instead (exp(0.3·depth) from 2367, a float conversion of 10**400)."""
    want = 0.8 - 0.6 * math.exp(-0.3 * min(depth, 10_000))  # the term is exactly 0 from 10,000 on
    got = impl.lambda_init(depth)
    assert abs(got - want) < 1e-12, (f"λ_init(depth={depth if depth < 10**9 else '10**400'}) = 0.8 − "
                                     f"0.6·exp(−0.3·depth): expected {precise(want)}, got {precise(got)}")


# ---- 05.3 ---------------------------------------------------------------------------------------------------------

def _norm64(attn, weight, init: float, eps: float):
    x = attn.double()
    y = x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.double()
    return y * (1 - init)


def _heads(seed: int, shape=(2, 5, 4, 16), offset: float = 0.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g) + offset


@pytest.mark.grade("05.3", points=2)
@pytest.mark.parametrize("seed, init", [(0, 0.2), (1, 0.3555), (2, 0.7998)])
def test_headwise_norm_matches_the_formula(impl, seed, init):
    attn = _heads(seed, offset=0.7)  # a non-zero mean: RMSNorm keeps it, LayerNorm would remove it
    weight = 1.0 + 0.1 * _heads(seed + 10, shape=(16,))
    got = impl.headwise_norm(attn, weight, init, eps=1e-5)
    assert got.shape == attn.shape, f"headwise_norm of (b, N, h, 2d) = (2, 5, 4, 16): got shape {tuple(got.shape)}"
    assert got.dtype == attn.dtype, f"headwise_norm of float32 heads must return float32, got {got.dtype}"
    want = _norm64(attn, weight, init, 1e-5)
    assert torch.allclose(got.double(), want, atol=1e-5), \
        f"RMSNorm(x)·weight·(1 − λ_init) per head (λ_init={init}, eps=1e-5): {first_far(got.double(), want, 1e-5)}"


@pytest.mark.grade("05.3", points=1)
def test_each_head_is_normalised_on_its_own(impl):
    attn = _heads(3)
    louder = attn.clone()
    louder[:, :, 0] *= 100.0  # one head 100× larger must not change the other heads
    a, b = impl.headwise_norm(attn, None, 0.2), impl.headwise_norm(louder, None, 0.2)
    assert torch.allclose(a[:, :, 1:], b[:, :, 1:], atol=1e-6), mistake(
        f"normalise over each head's 2d channels, not d_model: head 0 made 100× louder changed heads 1-3; "
        f"{first_far(b[:, :, 1:], a[:, :, 1:], 1e-6, first_head=1)}")
    rms = a.double().pow(2).mean(dim=-1).sqrt()
    assert torch.allclose(rms, torch.full_like(rms, 0.8), atol=1e-4), \
        f"every head must end at RMS 1 − λ_init = 0.8 (no weight): {first_far(rms, torch.full_like(rms, 0.8), 1e-4)}"


@pytest.mark.grade("05.3", points=1)
def test_no_mean_centring_no_sqrt2_and_eps_inside_the_root(impl):
    attn = torch.full((1, 1, 2, 4), 2.0)  # a constant head: RMS 2; LayerNorm would map it to 0
    got = impl.headwise_norm(attn, None, 0.3555, eps=0.0)
    want = torch.full_like(got, 1 - 0.3555)
    assert torch.allclose(got, want, atol=1e-6), (f"a constant head of 2s (λ_init=0.3555, eps=0): x / RMS(x) × "
                                                  f"(1 − λ_init), no mean removed, no √2: {first_far(got, want, 1e-6)}")
    # a large eps makes its place visible: 2 / √(4 + 5) = 2/3; eps outside the root gives 2/7, an ignored eps 1
    got = impl.headwise_norm(attn, None, 0.2, eps=5.0)
    want = torch.full_like(got, 2 / 3 * 0.8)
    assert torch.allclose(got, want, atol=1e-6), (f"a constant head of 2s with eps=5 (λ_init=0.2): x / √(mean(x²) + "
                                                  f"eps) × 0.8 = 2/3 × 0.8: {first_far(got, want, 1e-6)}")


@pytest.mark.grade("05.3", points=1)
def test_default_eps_is_1e_5(impl):
    """Heads of RMS 1e-3 (mean square 1e-6, of eps's order): 1e-6 or 1e-8 instead of 1e-5 moves the output by > 10%."""
    attn = 1e-3 * _heads(6, shape=(1, 3, 2, 8))
    got = impl.headwise_norm(attn, None, 0.2).double()
    want = _norm64(attn, None, 0.2, 1e-5)
    assert torch.allclose(got, want, atol=1e-5), \
        f"headwise_norm with the default eps (must be 1e-5), heads of RMS 1e-3: {first_far(got, want, 1e-5)}"


@pytest.mark.grade("05.3", points=1)
def test_weight_is_shared_across_heads_and_dtype_is_kept(impl):
    attn = _heads(4).bfloat16()
    weight = torch.arange(1, 17, dtype=torch.float32) / 8
    got = impl.headwise_norm(attn, weight.bfloat16(), 0.2)
    assert got.dtype == torch.bfloat16, f"headwise_norm of bfloat16 heads: cast back to bfloat16, got {got.dtype}"
    dtype = impl.headwise_norm(attn, None, 0.2).dtype
    assert dtype == torch.bfloat16, f"headwise_norm of bfloat16 heads, no weight: still bfloat16, got {dtype}"
    dtype = impl.headwise_norm(attn, weight, 0.2).dtype
    assert dtype == torch.bfloat16, \
        f"headwise_norm of bfloat16 heads with a float32 weight: the output stays bfloat16, got {dtype}"
    expected = _norm64(attn.float(), weight, 0.2, 1e-5)
    assert torch.allclose(got.double(), expected, rtol=2e-2, atol=2e-2), (
        f"headwise_norm of bfloat16 heads, one 2d = 16 weight shared by every head (λ_init=0.2): "
        f"{first_far(got.double(), expected, 2e-2, 2e-2)}")
    # fp16 entries of a few hundred square past fp16's largest value (65504): the RMS must be computed in float32
    loud = (400 * _heads(5)).half()
    got = impl.headwise_norm(loud, weight.half(), 0.2)
    assert got.dtype == torch.float16, f"headwise_norm of float16 heads: cast back to float16, got {got.dtype}"
    expected = _norm64(loud, weight, 0.2, 1e-5)
    assert torch.allclose(got.double(), expected, rtol=1e-2, atol=1e-2), (
        f"headwise_norm of float16 heads of size ~400 (mean(x²) overflows float16: upcast to float32): "
        f"{first_far(got.double(), expected, 1e-2, 1e-2)}")


def _norm_in_documented_order(attn, weight, init: float, eps: float):
    """The docstring's three lines in its order: the RMS step in float32 and one cast back, then the weight and
    (1 − λ_init) in attn's dtype (weight None or of attn's dtype, so every step's dtype is fixed)."""
    x = attn.float()
    y = (x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)).to(attn.dtype)
    if weight is not None:
        y = y * weight
    return y * (1 - init)


@pytest.mark.grade("05.3", points=1)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
def test_half_precision_heads_follow_the_documented_order(impl, dtype):
    """Tolerance: two float32 computations of x / RMS(x) differ by a few float32 ulps (~1e-7 relative), which moves
    the cast back to bf16/fp16 (an ulp of 2^-8 / 2^-11 relative) in about 1 entry in 10^4 and by one ulp; so at most
    1% of the 2,560 entries may differ, each by at most one ulp (relative 2^-7 / 2^-10). Rounding the factor
    1/RMS to attn's dtype first and multiplying there (a second rounding) moves ~20% of them."""
    ulp = 2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10
    attn = (3 * _heads(8, shape=(4, 10, 4, 16), offset=0.3)).to(dtype)
    weight = (1.0 + 0.1 * _heads(9, shape=(16,))).to(dtype)
    for w in (None, weight):
        got = impl.headwise_norm(attn, w, 0.3555)
        want = _norm_in_documented_order(attn, w, 0.3555, 1e-5)
        assert got.dtype == dtype and got.shape == want.shape, \
            f"headwise_norm of {dtype} heads: expected {dtype} of shape {tuple(want.shape)}, got {show(got)}"
        far = got.double() != want.double()
        what = f"headwise_norm of {dtype} heads ({'no weight' if w is None else 'a ' + str(dtype) + ' weight'})"
        share = far.float().mean().item()
        assert share <= 0.01, (
            f"{what}: {int(far.sum())} of {far.numel()} entries differ from x / RMS(x) computed in float32 and cast "
            f"back once, then × weight, then × (1 − λ_init) (at most 1% may, by rounding); e.g. "
            f"{first_far(got.double(), want.double(), 0.0, 0.0)}")
        assert torch.allclose(got.double(), want.double(), rtol=ulp, atol=0.0), \
            f"{what}: one {dtype} ulp at most: {first_far(got.double(), want.double(), 0.0, ulp)}"


@pytest.mark.grade("05.3", points=1)
@pytest.mark.parametrize("dtype, size, eps", [(torch.float32, 1e18, 1e-5), (torch.bfloat16, 1e18, 1e-5),
                                              (torch.float16, 6e4, 1e-5), (torch.float32, 1e-18, 0.0)],
                         ids=["float32-1e18", "bfloat16-1e18", "float16-6e4", "float32-1e-18-eps0"])
def test_headwise_norm_of_extreme_but_valid_heads(impl, dtype, size, eps):
    """Entries up to 1e18 (their squares stay below float32's largest, ~3.4e38: the docstring's range), float16
    entries near its largest (65504), and heads of 1e-18 with eps = 0 (squares of 1e-36, still normal float32).
    Tolerance as the dtype's other tests: float32 1e-5, bf16 2e-2, fp16 1e-2 (relative and absolute)."""
    tol = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 1e-2}[dtype]
    attn = (size * _heads(11, shape=(1, 3, 2, 8)).clamp(-1, 1)).to(dtype)
    got = impl.headwise_norm(attn, None, 0.2, eps=eps)
    want = _norm64(attn, None, 0.2, eps)
    assert torch.allclose(got.double(), want, rtol=tol, atol=tol), (
        f"headwise_norm of {dtype} heads with entries up to {size:g}, eps={eps:g} (mean(x²) in float32): "
        f"{first_far(got.double(), want, tol, tol)}")
