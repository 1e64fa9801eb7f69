"""Lesson 13: turn a trained baseline GPT (lesson 08) into DIFF V2 or DIFF V1, keeping what it learned.

DIFF V2, exact. The baseline has h query heads of width d reading h_kv KV heads; V2 has 2h query heads on the same
KV heads and head_i = A_2i V − σ(λ_i) A_2i+1 V with λ = W_λ x. The conversion

    W_Q rows of V2 heads 2i and 2i+1  ←  W_Q rows of baseline head i      both read KV head i // (h / h_kv), as before
    W_λ = 0                          →  σ(λ) = ½ for every token and head
    W_O (V2's o_proj)                ←  2 · W_O (the baseline's out_proj)

gives A_2i+1 = A_2i, so head_i = A V − ½ A V = ½ A V and o_proj(head) = 2W_O · ½ A V = W_O A V: the baseline's
output. Multiplying by ½ and 2 only changes a float's exponent, and the two copies of a head are computed alike, so
the logits agree to the last bit or within rounding of the kernel (tests/test_13_convert.py: ≤ 1e-5 in fp32).
It is also trainable: ∂L/∂q_2i+1 = −σ(λ)·∂L/∂q_2i at step 0, so the two copies are pushed apart from the first
update, and W_λ's gradient −σ′(0)·(A V)·∂L/∂head is not zero.
The alternatives fail one way or the other. Zeroing W_Q of head 2i+1 makes A_2i+1 the causal mean of V, and σ(0) = ½
subtracts half of it: not the baseline. Pushing σ(λ) to 0 needs a bias on W_λ, which the official lambda_proj does not
have (λ = W_λ x cannot be a constant), and σ′(λ) ≈ e^λ would starve λ of gradient.

DIFF V1, approximate (it cannot be exact). V1 has h/2 heads whose output is (1 − λ_init)·RMSNorm((A1 − λA2)·[V_a V_b]):
the RMSNorm divides each head by the RMS of that token's own output, a per-token factor no linear W_O can undo; and
one map A1 multiplies both d-wide value halves, where the baseline has a map per value head. So the conversion keeps
what it can and the lesson measures the rest:

    q1 of V1 head i (group g)     ←  the k-th baseline query head reading KV head 2g    (A1 = that head's map, exactly)
    q2 of V1 head i               ←  the k-th baseline query head reading KV head 2g+1
    k, v, out_proj                ←  the baseline's, with out_proj's columns moved with their heads
    λ vectors                     →  λ = 0 (to float precision), so head_i = A1·[V_2g V_2g+1] at step 0
    subln.weight (per layer)      →  the mean RMS of each head's output on a calibration batch, / (1 − λ_init)

so the first half of each V1 head is the baseline head up to the norm's per-token factor, and the second half reads
V_2g+1 through the wrong map. `step0_gap` measures how far that lands.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import Tensor

from diffattn.pure import variants
from diffattn.core.errors import require
from diffattn.model.gpt import GPT
from diffattn.pure.variants import REFERENCE, ATTENTION
from diffattn.nn.functional import query_head_groups
from diffattn.training.warmstart import TARGETS

# λ's second exponent starts at exp(λ_q2·λ_k2) with these vectors constant at this value: small, and not zero, so that
# neither pair of λ vectors sits at the saddle λ_q·λ_k = 0 where both get no gradient
V1_LAMBDA_ENTRY = 0.1


def check_source(model: GPT) -> None:
    """A conversion starts from a baseline GPT; anything else is a one-line ConfigError."""
    found = model.config.attention
    require(found == REFERENCE, f"convert starts from a baseline checkpoint; this one is {found} "
                                 f"(known attention kinds: {', '.join(ATTENTION)})")


def to_diff_v2(model: GPT) -> GPT:
    """The DIFF V2 GPT whose logits equal `model`'s at step 0 (module docstring)."""
    check_source(model)
    c = model.config
    v2 = GPT(dataclasses.replace(c, attention="diff_v2")).to(model.tok_emb.weight.dtype)
    state = {k: v for k, v in model.state_dict().items() if ".attn." not in k}
    h, d = c.n_head, c.head_dim
    for i, block in enumerate(model.blocks):
        prefix, attn = f"blocks.{i}.attn.", block.attn
        q = attn.q_proj.weight.detach().view(h, d, -1)  # (h, d, d_model): baseline head i's rows
        state[prefix + "q_proj.weight"] = q.repeat_interleave(2, dim=0).reshape(2 * h * d, -1)  # heads 2i, 2i+1
        state[prefix + "k_proj.weight"] = attn.k_proj.weight.detach().clone()
        state[prefix + "v_proj.weight"] = attn.v_proj.weight.detach().clone()
        state[prefix + "o_proj.weight"] = 2.0 * attn.out_proj.weight.detach()  # × ½ from σ(0), × 2 here: exact
        state[prefix + "lambda_proj.weight"] = torch.zeros_like(v2.blocks[i].attn.lambda_proj.weight)
    v2.load_state_dict(state)
    return v2.train(model.training)


def v1_query_order(n_head: int, n_kv_head: int) -> list[int]:
    """Baseline query heads in V1's q_proj order: V1 head i takes its (q1, q2) from positions (2i, 2i+1).

    V1 head i reads V1 KV group g = i // (h / h_kv), i.e. the baseline's KV heads 2g (for q1) and 2g+1 (for q2); the
    k-th head of group g pairs the k-th baseline query head of KV head 2g with the k-th of KV head 2g+1, so every
    q1 keeps the keys it was trained with."""
    groups = query_head_groups(n_head, n_kv_head)
    members = [[j for j in range(n_head) if groups[j] == kv] for kv in range(n_kv_head)]
    per_group = n_head // n_kv_head
    order = []
    for i in range(n_head // 2):
        g, k = divmod(i, per_group)
        order += [members[2 * g][k], members[2 * g + 1][k]]
    return order


def _lambda_vectors(lambda_init: float, d: int) -> dict[str, Tensor]:
    """λ_q1, λ_k1, λ_q2, λ_k2 (constant vectors) with exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init = 0 (in fp64)."""
    second = math.exp(d * V1_LAMBDA_ENTRY**2)  # exp(λ_q2·λ_k2) > 1 > λ_init, so the log below is defined
    first_dot = math.log(second - lambda_init)  # λ_q1·λ_k1
    k1_entry = first_dot / (d * V1_LAMBDA_ENTRY)
    entries = {"lambda_q1": V1_LAMBDA_ENTRY, "lambda_k1": k1_entry, "lambda_q2": V1_LAMBDA_ENTRY,
               "lambda_k2": V1_LAMBDA_ENTRY}
    return {name: torch.full((d,), value, dtype=torch.float32) for name, value in entries.items()}


@torch.no_grad()
def to_diff_v1(model: GPT, calibration: Tensor) -> GPT:
    """The DIFF V1 GPT closest to `model` that V1's layout allows (module docstring); `calibration` (b, N) tokens
    set each layer's norm gain, layer by layer, on the converted layers below it."""
    check_source(model)
    c = model.config
    require(c.n_head % 2 == 0 and c.n_kv_head % 2 == 0 and c.n_head * c.head_dim == c.d_model,
            f"DIFF V1 needs an even number of heads and KV heads and heads·head_dim = d_model "
            f"(got {c.n_head}, {c.n_kv_head}, {c.n_head}·{c.head_dim} vs {c.d_model})")
    v1 = GPT(dataclasses.replace(c, attention="diff_v1")).to(model.tok_emb.weight.dtype)
    order = torch.tensor(v1_query_order(c.n_head, c.n_kv_head))
    d = c.head_dim
    state = {k: v for k, v in model.state_dict().items() if ".attn." not in k}
    for i, block in enumerate(model.blocks):
        prefix, attn = f"blocks.{i}.attn.", block.attn
        q = attn.q_proj.weight.detach().view(c.n_head, d, -1)[order]  # (h, d, d_model), V1's order
        out = attn.out_proj.weight.detach().view(c.d_model, c.n_head, d)[:, order]  # columns follow their heads
        state[prefix + "q_proj.weight"] = q.reshape(c.n_head * d, -1).clone()
        state[prefix + "out_proj.weight"] = out.reshape(c.d_model, -1).clone()
        state[prefix + "k_proj.weight"] = attn.k_proj.weight.detach().clone()
        state[prefix + "v_proj.weight"] = attn.v_proj.weight.detach().clone()
        for name, vector in _lambda_vectors(v1.blocks[i].attn.lambda_init, d).items():
            state[prefix + name] = vector
        state[prefix + "subln.weight"] = torch.ones(2 * d)
    v1.load_state_dict(state)
    v1.eval()
    for block in v1.blocks:  # bottom-up: each gain is measured on the inputs the converted layers below produce
        rms = []
        hook = block.attn.register_forward_hook(lambda m, args, _out: rms.append(
            m.differential_heads(*args).float().pow(2).mean(-1).sqrt().mean()))
        try:
            v1(calibration)
        finally:
            hook.remove()
        block.attn.subln.weight.fill_(float(rms[0]) / (1.0 - block.attn.norm_lambda))
    return v1.train(model.training)


def convert(model: GPT, target: str, calibration: Tensor | None = None) -> GPT:
    require(target in TARGETS, f"convert can make {' or '.join(TARGETS)} (got {target!r})")
    if not variants.get(target).paired_heads:  # V2: exact, from the weights alone
        return to_diff_v2(model)
    require(calibration is not None, "a DIFF V1 conversion needs calibration tokens")
    return to_diff_v1(model, calibration)


@torch.no_grad()
def step0_gap(before: GPT, after: GPT, tokens: Tensor, targets: Tensor | None = None) -> dict[str, float]:
    """How far the converted model lands from the original at step 0 on `tokens` (b, N): the largest |Δ logit|,
    the largest |logit| for scale, and with `targets` both models' loss (mean over counted targets)."""
    was = before.training, after.training
    before.eval(), after.eval()
    a, b = before(tokens).float(), after(tokens).float()
    before.train(was[0]), after.train(was[1])
    out = {"max_abs_logit_gap": float((a - b).abs().max()), "max_abs_logit": float(a.abs().max())}
    if targets is not None:
        for name, logits in (("loss_before", a), ("loss_after", b)):
            out[name] = float(torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                                                                ignore_index=-100))
    return out
