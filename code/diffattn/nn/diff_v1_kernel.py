"""Lesson 12: DIFF V1's attention with each map computed once and V applied once (CPU training and prefill).

    q (b, N, 2h, d)  pairs (2i, 2i+1) = (q1_i, q2_i)      k (b, N_k, 2h_kv, d)  likewise      v (b, N_k, h_kv, 2d)
    head_i = (A1 − λ·A2) V,   A_j = softmax(q_j k_jᵀ / √d) causal, bottom-right aligned      ->  (b, N, h, 2d)

Stock kernels take d-wide values, so V1 normally runs as two attention calls per head, (A1 V) − λ(A2 V), and on CPU
each call again as two d-wide slices (kernels.split_value_attention): four calls, each scoring q kᵀ again. Linearity
lets the maps be combined before V instead:

    per block of query rows     S1 = q1 k1ᵀ/√d,  S2 = q2 k2ᵀ/√d      only keys ≤ the block's last query (causal)
                                P  = softmax(S1) − λ·softmax(S2)      the row is complete, so softmax is exact
                                out = P V                             2d-wide values, once

Forward FLOPs per head, causal: q kᵀ twice (2·½N²·d·2) + P V once (½N²·2d·2) = 4N²d, half the four calls' 8N²d.
The backward recomputes each block's P from the saved log-sum-exp, as FlashAttention does, so nothing N×N is kept.
Blocks hold about BLOCK_ROWS query rows (all query heads of a KV group together; BLOCK_ROWS_THREADED on more than
one thread), so a block's maps stay in cache.

`diff_v1_attention` picks this kernel for CPU fp32/fp64 with more than one query (training, prefill) at any torch
thread count, and otherwise runs the two attention calls; a decode step keeps SDPA's packed GQA call (lesson 12's
decode measurements), and torch.compile keeps the two calls, which Inductor fuses itself. One thread runs
`_FusedDiffV1`, the arithmetic the lessons were computed with; more threads run `_FusedDiffV1Threads`, the same
arithmetic in fewer, larger operations per block, because there every operation is a parallel region that waits for
all threads: the kernel's first version, one form at every thread count, ran 0.24-0.62x the four calls' speed at 2
threads while another process kept one core busy. `diffattn bench` times both forms at 1, 2 and all usable threads,
idle and with one core busy (lesson 12's notes, "Every thread count").
`separate_maps()` switches the fused kernel off: the "before" of the README's A/B and of `bench`.
"""

from __future__ import annotations

import contextlib
import math
from typing import Iterator

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from diffattn.core.errors import require
from diffattn.nn.kernels import attention, resolve_backend

# Query rows (query head × position) per block. One thread: 64, the block the lessons' numbers were computed with.
# More threads: 128, since there every operation is a parallel region and fewer, larger ones wait less for a
# descheduled thread (lesson 12's notes, "Every thread count").
BLOCK_ROWS = 64
BLOCK_ROWS_THREADED = 128


def block_rows() -> int:
    """The block height for torch's present thread count."""
    return BLOCK_ROWS if torch.get_num_threads() == 1 else BLOCK_ROWS_THREADED


_FUSE = True  # read on every call; `separate_maps()` clears it


@contextlib.contextmanager
def separate_maps() -> Iterator[None]:
    """Inside this block DIFF V1 runs as two attention calls per head (four d-wide SDPA calls on CPU), as before the
    fused kernel existed."""
    global _FUSE
    previous, _FUSE = _FUSE, False
    try:
        yield
    finally:
        _FUSE = previous


def fuses(q: Tensor, k: Tensor, v: Tensor, backend: str = "auto") -> bool:
    """Whether `diff_v1_attention` runs the fused kernel for these tensors."""
    # not under torch.compile: the kernel reads λ with .item(), a graph break, and Inductor fuses the two calls itself
    return (_FUSE and not torch.compiler.is_compiling() and q.device.type == "cpu"
            and q.dtype in (torch.float32, torch.float64) and q.shape[1] > 1
            and resolve_backend(q, k, v, backend) == "sdpa")


def diff_v1_attention(q: Tensor, k: Tensor, v: Tensor, lam: Tensor, backend: str = "auto") -> Tensor:
    """Every DIFF V1 head's (A1 − λ·A2) V, causal: shapes in the module docstring; λ a 0-dim tensor (gets a grad)."""
    b, n, two_h, d = q.shape
    two_h_kv = k.shape[2]
    require(two_h % 2 == 0 and two_h_kv % 2 == 0, f"V1 needs even query and key head counts (got {two_h}, {two_h_kv})")
    require(v.shape[-1] == 2 * d and 2 * v.shape[2] == two_h_kv,
            f"V1 values are (b, N_k, {two_h_kv // 2}, {2 * d}) for these keys (got {tuple(v.shape)})")
    require(q.shape[0] == k.shape[0] == v.shape[0] and k.shape[1] == v.shape[1] and k.shape[-1] == d,
            f"q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} do not fit one attention call")
    require(n <= k.shape[1], f"causal attention needs N_q <= N_k (got {n} > {k.shape[1]})")
    h, h_kv = two_h // 2, two_h_kv // 2
    require(h % h_kv == 0, f"query heads ({h}) must be a multiple of KV heads ({h_kv})")
    if not fuses(q, k, v, backend):
        q1, q2 = q.view(b, n, h, 2, d).unbind(3)  # (b, N, h, d) each: unbind's backward stacks once
        k1, k2 = k.view(b, k.shape[1], h_kv, 2, d).unbind(3)
        attn1 = attention(q1, k1, v, causal=True, backend=backend)  # A1 V: (b, N, h, 2d)
        attn2 = attention(q2, k2, v, causal=True, backend=backend)  # A2 V, the same V
        return attn1 - lam.to(attn1.dtype) * attn2  # (A1 − λA2) V by linearity
    r = h // h_kv  # query heads per KV head
    # both maps in one tensor (map 1, map 2 first), so every step below is one operation for the two maps; rows of one
    # KV group position-major: row p·r + j is query head j of the group at position p
    q12 = q.view(b, n, h_kv, r, 2, d).permute(4, 0, 2, 1, 3, 5).reshape(2, b, h_kv, n * r, d)
    k12 = k.view(b, k.shape[1], h_kv, 2, d).permute(3, 0, 2, 1, 4).contiguous()  # (2, b, h_kv, N_k, d)
    kernel = _FusedDiffV1 if torch.get_num_threads() == 1 else _FusedDiffV1Threads
    out = kernel.apply(q12, k12, v.transpose(1, 2).contiguous(), lam, r)  # (b, h_kv, N·r, 2d)
    return out.view(b, h_kv, n, r, 2 * d).permute(0, 2, 1, 3, 4).reshape(b, n, h, 2 * d)


def scored_pairs(n: int, n_k: int, group: int) -> int:
    """(query position, key) pairs the kernel scores per query head and map: whole blocks of positions against every
    key up to each block's last (FlopCounterMode sees these, lesson 12)."""
    return sum(width * keys for _, keys, width in _Blocks(n, n_k, group, block_rows(), torch.device("cpu")))


class _Blocks:
    """The query blocks of a causal (N·r rows) × N_k problem, and the mask of each block's last `size` keys."""

    def __init__(self, n: int, n_k: int, r: int, rows: int, device: torch.device) -> None:
        self.n, self.n_k, self.r, self.rows = n, n_k, r, rows
        self.size = max(1, rows // r)  # query positions per block
        # query t of a block sees key c of the block's diagonal square iff c ≤ t: (size·r, size), True = hidden
        self.hidden = torch.ones(self.size, self.size, dtype=torch.bool, device=device).triu_(1).repeat_interleave(r, 0)

    def bias(self, dtype: torch.dtype) -> Tensor:
        """The mask as an additive bias, laid out so that `bias[:width·r, n_k + width − keys : n_k + width]` is a
        block's: zeros over the keys every row sees, then the diagonal square's −inf above its diagonal."""
        square = torch.zeros(self.hidden.shape, dtype=dtype, device=self.hidden.device).masked_fill_(self.hidden,
                                                                                                     float("-inf"))
        return torch.cat([square.new_zeros(square.shape[0], self.n_k), square], dim=1)

    def __iter__(self) -> Iterator[tuple[slice, int, int]]:
        """(rows, keys seen, positions in the block); keys before the diagonal square are seen by every row."""
        offset = self.n_k - self.n  # bottom-right: query p sees keys ≤ p + offset
        for start in range(0, self.n, self.size):
            stop = min(self.n, start + self.size)
            yield slice(start * self.r, stop * self.r), offset + stop, stop - start

    def probabilities(self, q: Tensor, k: Tensor, rows: slice, keys: int, width: int, lse: Tensor | None):
        """softmax(q kᵀ/√d) of both maps' rows over keys [0, keys): (2, b, h_kv, rows, keys), and the log-sum-exp."""
        logits = torch.matmul(q[..., rows, :], k[..., :keys, :].transpose(-1, -2)).mul_(1.0 / math.sqrt(q.shape[-1]))
        hidden = self.hidden if width == self.size else self.hidden[: width * self.r, :width]
        logits[..., keys - width:].masked_fill_(hidden, float("-inf"))  # only the diagonal square has hidden keys
        if lse is None:
            lse = torch.logsumexp(logits, dim=-1, keepdim=True)  # (2, b, h_kv, rows, 1); finite: key 0 is always seen
        return logits.sub_(lse).exp_(), lse


class _FusedDiffV1(torch.autograd.Function):
    """q12 (2, b, h_kv, N·r, d) and k12 (2, b, h_kv, N_k, d): maps 1 and 2; v (b, h_kv, N_k, 2d); lam 0-dim
    -> (b, h_kv, N·r, 2d)."""

    @staticmethod
    def forward(ctx, q12: Tensor, k12: Tensor, v: Tensor, lam: Tensor, r: int) -> Tensor:
        blocks = _Blocks(q12.shape[3] // r, k12.shape[3], r, block_rows(), q12.device)
        lam_value = lam.to(q12.dtype).item()  # rounded to the tensors' dtype, as the two-call path rounds it
        out = q12.new_empty(*q12.shape[1:-1], v.shape[-1])
        lse = q12.new_empty(*q12.shape[:-1], 1)
        for rows, keys, width in blocks:
            p, lse[..., rows, :] = blocks.probabilities(q12, k12, rows, keys, width, None)
            out[:, :, rows] = p[0].sub_(p[1], alpha=lam_value) @ v[:, :, :keys]  # (A1 − λA2) V: V applied once
        ctx.save_for_backward(q12, k12, v, lam, lse)
        ctx.r, ctx.rows = r, blocks.rows  # the backward walks the same blocks, whatever the thread count is by then
        return out

    @staticmethod
    @once_differentiable  # its in-place steps have no second derivative: say so instead of failing inside them
    def backward(ctx, grad_out: Tensor):
        q12, k12, v, lam, lse = ctx.saved_tensors
        blocks = _Blocks(q12.shape[3] // ctx.r, k12.shape[3], ctx.r, ctx.rows, q12.device)
        lam_value, scale = lam.to(q12.dtype).item(), 1.0 / math.sqrt(q12.shape[-1])
        # dA1 = dP and dA2 = −λ dP; with the 1/√d of S = q kᵀ/√d: dS1 = scale·(…), dS2 = −λ·scale·(…)
        factor = torch.tensor([scale, -lam_value * scale], dtype=q12.dtype, device=q12.device).view(2, 1, 1, 1, 1)
        dq12, dk12, dv = torch.empty_like(q12), torch.zeros_like(k12), torch.zeros_like(v)
        dlam = torch.zeros((), dtype=torch.float64)
        for rows, keys, width in blocks:
            p, _ = blocks.probabilities(q12, k12, rows, keys, width, lse[..., rows, :])  # recomputed, never stored
            g = grad_out[:, :, rows]  # (b, h_kv, rows, 2d)
            dv[:, :, :keys] += (p[0] - lam_value * p[1]).transpose(-1, -2) @ g  # dV = Pᵀ dO
            dp = g @ v[:, :, :keys].transpose(-1, -2)  # dP = dO Vᵀ: (b, h_kv, rows, keys)
            weighted = dp * p  # (2, …): dP ⊙ A for each map
            # dλ = −Σ dP ⊙ A2 over every output of the layer, summed in fp64: an fp32 sum's order follows the CPU's
            # vector width, and training amplifies it (lesson 08, NUMBER_KINDS)
            dlam -= torch.sum(weighted[1], dtype=torch.float64)
            # softmax backward: dS = A ⊙ (dA − rowsum(dA ⊙ A)), per map
            ds = p.mul_(dp - weighted.sum(-1, keepdim=True)).mul_(factor)
            dq12[..., rows, :] = ds @ k12[..., :keys, :]
            dk12[..., :keys, :] += ds.transpose(-1, -2) @ q12[..., rows, :]  # sums over the group's query heads too
        return dq12, dk12, dv, dlam.to(lam.dtype), None


class _FusedDiffV1Threads(torch.autograd.Function):
    """The same arithmetic in fewer, larger operations per block, for more than one torch thread, where every operation
    is a parallel region that waits for all threads: q scaled once, the mask added inside the q kᵀ product (baddbmm),
    one softmax with no saved log-sum-exp (the backward recomputes the same softmax), dV and dK accumulated in place,
    and the per-map factors of dS (1 and −λ) applied once after the loop. Sums run in another order than the one-thread
    kernel's, so the last bits differ; lessons run on one thread. Shapes as `_FusedDiffV1`."""

    @staticmethod
    def forward(ctx, q12: Tensor, k12: Tensor, v: Tensor, lam: Tensor, r: int) -> Tensor:
        _, b, h_kv, nr, d = q12.shape
        n_k, bh = k12.shape[3], b * h_kv
        blocks = _Blocks(nr // r, n_k, r, block_rows(), q12.device)
        lam_value = lam.to(q12.dtype).item()
        q3 = (q12 * (1.0 / math.sqrt(d))).reshape(2 * bh, nr, d)  # maps 1 and 2 of every (batch, KV head), stacked
        k3, v3 = k12.reshape(2 * bh, n_k, d), v.reshape(bh, n_k, v.shape[-1])
        bias = blocks.bias(q12.dtype)
        out = q12.new_empty(bh, nr, v.shape[-1])
        for rows, keys, width in blocks:
            p = _softmax_block(q3, k3, bias, rows, keys, width, n_k, r).view(2, bh, -1, keys)
            out[:, rows] = torch.bmm(torch.sub(p[0], p[1], alpha=lam_value), v3[:, :keys])  # (A1 − λA2) V
        ctx.save_for_backward(q3, k3, v3, lam)
        ctx.r, ctx.rows, ctx.shapes = r, blocks.rows, (q12.shape, v.shape)
        return out.view(b, h_kv, nr, v.shape[-1])

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor):
        q3, k3, v3, lam = ctx.saved_tensors
        q_shape, v_shape = ctx.shapes
        _, b, h_kv, nr, d = q_shape
        n_k, bh = k3.shape[1], b * h_kv
        blocks = _Blocks(nr // ctx.r, n_k, ctx.r, ctx.rows, q3.device)
        lam_value = lam.to(q3.dtype).item()
        bias, g = blocks.bias(q3.dtype), grad_out.reshape(bh, nr, v_shape[-1])
        dq3, dk3, dv = torch.empty_like(q3), torch.zeros_like(k3), torch.zeros_like(v3)  # dS's factors come last
        dlam = torch.zeros((), dtype=torch.float64)
        for rows, keys, width in blocks:
            p = _softmax_block(q3, k3, bias, rows, keys, width, n_k, ctx.r).view(2, bh, -1, keys)
            g_rows = g[:, rows]
            dv[:, :keys].baddbmm_(torch.sub(p[0], p[1], alpha=lam_value).transpose(1, 2), g_rows)  # dV += Pᵀ dO
            dp = torch.bmm(g_rows, v3[:, :keys].transpose(1, 2))  # dP = dO Vᵀ
            weighted = p * dp  # dP ⊙ A per map
            row_sums = weighted.sum(-1, keepdim=True)
            dlam -= row_sums[1].sum(dtype=torch.float64)  # dλ = −Σ dP ⊙ A2
            ds = weighted.addcmul_(p, row_sums, value=-1).view(2 * bh, -1, keys)  # A ⊙ (dP − rowsum), before factors
            dq3[:, rows] = torch.bmm(ds, k3[:, :keys])
            dk3[:, :keys].baddbmm_(ds.transpose(1, 2), q3[:, rows])  # q3 holds the 1/√d already
        factor = torch.tensor([1.0, -lam_value], dtype=q3.dtype, device=q3.device).view(2, 1, 1, 1)
        dq12 = (dq3.view(2, bh, nr, d) * (factor / math.sqrt(d))).view(q_shape)
        dk12 = (dk3.view(2, bh, n_k, d) * factor).view(2, b, h_kv, n_k, d)
        return dq12, dk12, dv.view(v_shape), dlam.to(lam.dtype), None


def _softmax_block(q3: Tensor, k3: Tensor, bias: Tensor, rows: slice, keys: int, width: int, n_k: int,
                   r: int) -> Tensor:
    """softmax(q kᵀ/√d + mask) of a block's rows over keys [0, keys), both maps: (2·b·h_kv, rows, keys)."""
    mask = bias[: width * r, n_k + width - keys: n_k + width]
    return torch.softmax(torch.baddbmm(mask, q3[:, rows], k3[:, :keys].transpose(1, 2)), dim=-1)
