"""Lesson 12: DIFF V1's fused CPU kernel (diffattn.nn.diff_v1_kernel: each map once, P = A1 − λA2 applied to V once),
in both forms (one thread, and the threaded form on more), gives the four-call path's outputs and gradients, λ's
included, on every shape class the model meets: GQA groups, cached chunks (N_q < N_k, bottom-right mask), blocks that
do not divide N, a block of one position. Known-wrong kernels (a top-left mask, the λ gradient dropped, λ on the wrong
map, a backward that recomputes the maps wrongly) fail the same checks. Timings are never asserted."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from diffattn.nn.cpu import one_thread, threads  # noqa: E402
from diffattn.nn import diff_v1_kernel  # noqa: E402
from diffattn.nn.attention import DiffAttentionV1  # noqa: E402
from diffattn.nn.diff_v1_kernel import diff_v1_attention, fuses, separate_maps  # noqa: E402
from diffattn.nn.kernels import TOLERANCE  # noqa: E402
from diffattn.nn.rope import rope_cos_sin  # noqa: E402

pytestmark = pytest.mark.torch

# (batch, N_q, N_k, differential heads h, KV heads h_kv, d): MHA, groups of 2, 4 and 8, a cached chunk, N not a
# multiple of the block, a group of 64 (one query position per block), and a cached chunk over several blocks
SHAPES = [(2, 37, 37, 4, 4, 8), (1, 70, 70, 4, 2, 8), (3, 19, 19, 8, 2, 4), (2, 5, 64, 8, 1, 8),
          (1, 130, 130, 2, 2, 16), (1, 9, 9, 64, 1, 2), (1, 70, 100, 4, 2, 8)]


@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


# One thread runs `_FusedDiffV1`, the arithmetic the lessons were computed with; more run `_FusedDiffV1Threads`
KERNELS = {1: diff_v1_kernel._FusedDiffV1, 2: diff_v1_kernel._FusedDiffV1Threads}


@pytest.fixture(params=sorted(KERNELS), ids=lambda n: f"{n}thread")
def n_threads(request):
    with threads(request.param):
        yield request.param


def tensors(shape, dtype=torch.float64, seed=0):
    b, n, n_k, h, h_kv, d = shape
    g = torch.Generator().manual_seed(seed + sum(shape))
    make = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(dtype).requires_grad_()  # noqa: E731
    return (make(b, n, 2 * h, d), make(b, n_k, 2 * h_kv, d), make(b, n_k, h_kv, 2 * d),
            torch.tensor(0.37, dtype=dtype, requires_grad=True), torch.randn(b, n, h, 2 * d, generator=g).to(dtype))


def outputs_and_grads(q, k, v, lam, grad):
    out = diff_v1_attention(q, k, v, lam)
    return [out.detach(), *torch.autograd.grad(out, (q, k, v, lam), grad)]


def largest_gap(shape, dtype=torch.float64) -> float:
    q, k, v, lam, grad = tensors(shape, dtype)
    assert fuses(q, k, v)
    fused = outputs_and_grads(q, k, v, lam, grad)
    with separate_maps():
        assert not fuses(q, k, v)
        separate = outputs_and_grads(q, k, v, lam, grad)
    assert [t.shape for t in fused] == [t.shape for t in separate]
    # relative to each tensor's scale: dλ sums every output entry's gradient
    return max(((a - b).abs().max() / b.abs().max().clamp_min(1)).item() for a, b in zip(fused, separate))


@pytest.mark.parametrize("shape", SHAPES)
def test_fused_equals_the_four_call_path_outputs_and_every_gradient(shape, n_threads):
    assert largest_gap(shape) <= 1e-12


@pytest.mark.parametrize("shape", SHAPES[:3])
def test_fused_fp32_within_the_kernels_tolerance(shape, n_threads):
    assert largest_gap(shape, torch.float32) <= TOLERANCE[torch.float32]


def test_gradcheck_including_lambda(n_threads):
    q, k, v, lam, _ = tensors((1, 6, 8, 4, 2, 4))
    assert fuses(q, k, v)
    assert torch.autograd.gradcheck(diff_v1_attention, (q, k, v, lam))


def test_block_size_does_not_change_the_numbers(monkeypatch, n_threads):
    shape = (1, 70, 70, 4, 2, 8)
    q, k, v, lam, grad = tensors(shape)
    default = outputs_and_grads(q, k, v, lam, grad)
    for rows in (1, 7, 1000):  # group of 2: 1 position per block, 3 (a partial last block of 1), all 70 in one
        monkeypatch.setattr(diff_v1_kernel, "BLOCK_ROWS" if n_threads == 1 else "BLOCK_ROWS_THREADED", rows)
        other = outputs_and_grads(q, k, v, lam, grad)
        assert max((a - b).abs().max().item() for a, b in zip(default, other)) <= 1e-12


def test_the_module_runs_the_fused_kernel_and_matches_the_separate_maps(n_threads):
    torch.manual_seed(0)
    layer = DiffAttentionV1(64, depth=3, num_heads=4, num_kv_heads=2).double()
    x = torch.randn(2, 21, 64, dtype=torch.float64, requires_grad=True)
    rope = tuple(t.double() for t in rope_cos_sin((0, 21), layer.head_dim))
    calls = []
    kernel = KERNELS[n_threads]
    real = kernel.apply
    kernel.apply = lambda *a: calls.append(1) or real(*a)
    try:
        fused = layer(x, rope)
    finally:
        kernel.apply = real
    assert calls == [1]
    grads = torch.autograd.grad(fused.square().sum(), [x, *layer.parameters()])
    with separate_maps():
        separate = layer(x, rope)
        grads_separate = torch.autograd.grad(separate.square().sum(), [x, *layer.parameters()])
    assert (fused - separate).abs().max().item() <= 1e-12
    assert max((a - b).abs().max().item() for a, b in zip(grads, grads_separate)) <= 1e-10
    assert grads[layer_index(layer, "lambda_q1")].abs().sum() > 0  # λ's gradient reaches its vectors


def layer_index(layer, name) -> int:
    return 1 + [n for n, _ in layer.named_parameters()].index(name)


@pytest.mark.parametrize("case", ["bf16", "decode_step", "math_backend", "separate_maps"])
def test_the_fused_kernel_is_not_used_where_it_does_not_apply(case):
    q, k, v, lam, _ = tensors((1, 1 if case == "decode_step" else 8, 8, 4, 2, 8),
                              torch.bfloat16 if case == "bf16" else torch.float32)
    assert fuses(q, k, v) == (case not in ("bf16", "decode_step"))  # one thread (the fixture), fp32, 8 queries
    with separate_maps() if case == "separate_maps" else torch.no_grad():
        assert not fuses(q, k, v, "math" if case == "math_backend" else "auto")


@pytest.mark.parametrize("count", [2, 3])
def test_the_fused_kernel_runs_at_every_thread_count(count):
    """The default on a laptop's cores, not only on one thread: at 2 and 3 torch threads the threaded kernel runs, in
    its taller blocks."""
    with threads(count):
        q, k, v, lam, _ = tensors(SHAPES[1])
        assert fuses(q, k, v) and diff_v1_kernel.block_rows() == diff_v1_kernel.BLOCK_ROWS_THREADED
        calls = []
        real = diff_v1_kernel._FusedDiffV1Threads.apply
        diff_v1_kernel._FusedDiffV1Threads.apply = lambda *a: calls.append(1) or real(*a)
        try:
            diff_v1_attention(q, k, v, lam)
        finally:
            diff_v1_kernel._FusedDiffV1Threads.apply = real
        assert calls == [1]


def test_bad_shapes_are_one_line_errors():
    q, k, v, lam, _ = tensors((1, 8, 8, 4, 2, 8))
    from diffattn.core.errors import ConfigError

    for args in [(q, k, v[..., :8], lam), (q, k[:, :4], v, lam), (q[:, :, :7], k, v, lam), (q, k[:, :, :3], v, lam)]:
        with pytest.raises(ConfigError):
            diff_v1_attention(*args)


# Known-wrong kernels: each changes one thing a fused kernel can get wrong, and the equality check above must fail.
def _top_left_mask(self):
    for start in range(0, self.n, self.size):
        stop = min(self.n, start + self.size)
        yield slice(start * self.r, stop * self.r), stop, stop - start  # forgets the cached keys' offset


def _unmasked_after(first_calls: int):
    """`_softmax_block` that drops the causal mask after its first calls (the forward's): a backward that recomputes
    the maps without it."""
    real, calls = diff_v1_kernel._softmax_block, []

    def wrong(q3, k3, bias, rows, keys, width, n_k, r):
        calls.append(1)
        return real(q3, k3, torch.zeros_like(bias) if len(calls) > first_calls else bias, rows, keys, width, n_k, r)

    return wrong


@pytest.mark.parametrize("wrong", ["top_left_mask", "no_lambda_grad", "lambda_on_the_wrong_map", "wrong_backward_maps"])
def test_known_wrong_kernels_fail_the_check(monkeypatch, wrong, n_threads):
    function = KERNELS[n_threads]
    shape = (2, 5, 64, 8, 1, 8)  # a cached chunk: 5 new queries over 64 keys, one block on either kernel
    if wrong == "top_left_mask":
        monkeypatch.setattr(diff_v1_kernel._Blocks, "__iter__", _top_left_mask)
    elif wrong == "no_lambda_grad":
        backward = function.backward
        monkeypatch.setattr(function, "backward", staticmethod(
            lambda ctx, g: (*backward(ctx, g)[:3], torch.zeros((), dtype=torch.float64), None)))
    elif wrong == "lambda_on_the_wrong_map":
        forward = function.forward
        monkeypatch.setattr(function, "forward", staticmethod(
            lambda ctx, q12, k12, v, lam, r: forward(ctx, q12.flip(0), k12.flip(0), v, lam, r)))
    elif n_threads == 1:  # the backward forgets the saved log-sum-exp: unnormalised maps
        probabilities = diff_v1_kernel._Blocks.probabilities
        monkeypatch.setattr(diff_v1_kernel._Blocks, "probabilities",
                            lambda self, q, k, rows, keys, width, lse: probabilities(
                                self, q, k, rows, keys, width, None if lse is None else torch.zeros_like(lse)))
    else:  # the backward recomputes the maps without the causal mask
        monkeypatch.setattr(diff_v1_kernel, "_softmax_block", _unmasked_after(first_calls=1))
    assert largest_gap(shape) > 1e-6


def test_accounting_counts_the_fused_path_between_the_official_ones():
    """Attention FLOPs per token, fused : two calls : four calls = 4 : 6 : 8 (in units of pairs·context·d): each map's
    q kᵀ once, and one 2d-wide P·V per pair. Decode bytes: K1, K2 and V once (the two-call path reads V twice), what a
    fused decode kernel would read; ours leaves decode steps to SDPA."""
    from diffattn.pure import accounting

    flops = {kernel: accounting.attention_flops_per_token("diff_v1", 8, 16, 100, 4, kernel)
             for kernel in accounting.KERNELS}
    assert flops == {"fused": 4 * 4 * 100 * 16, "two_call": 6 * 4 * 100 * 16, "four_call": 8 * 4 * 100 * 16}
    reads = {kernel: accounting.decode_kv_read_bytes("diff_v1", 8, 16, 4, 2, kernel) for kernel in accounting.KERNELS}
    assert reads == {"fused": 2 * 2 * 4 * 16, "two_call": 2 * 2 * 6 * 16, "four_call": 2 * 2 * 8 * 16}


@pytest.mark.parametrize("seq, group, expected", [(12, 1, 1), (128, 1, (64 * 64 + 64 * 128) / 128**2),
                                                  (10, 64, (10 * 11 / 2) / 100)])
def test_fused_scored_fraction_counts_whole_blocks(seq, group, expected):
    from diffattn.perf.counts import fused_scored_fraction

    assert float(fused_scored_fraction(seq, group)) == pytest.approx(expected)
