"""11.1–11.4, correct: a trained DIFF layer with λ (V1) or σ(λ) (V2) replaced, the restoring sweep, the best value.

How it differs from the reference (diffattn.eval.lambda_sweep), which shadows V1's lambda_full / swaps V2's
lambda_proj and then calls the layer's own forward:
  v1_forward   recomputes the layer from its weights: both maps in ONE attention call (the two query/key halves
               stacked along the batch axis), and the head (A1 − λ·A2)V normalised as sign(λ)·RMSNorm(A1V/λ − A2V)
               with eps/λ² when |λ| > 1 (RMSNorm is scale-free), so any finite λ works; the reference's λ·A2V
               squared in float32 overflows for |λ| ≳ 1e19 and its float32 λ is inf above 3.4e38.
  v2_forward   recomputes the layer with the pair weights [1, −gate] contracted against a (h, 2) view of the heads;
               lambda_proj is never called.
  sweep_model  shadows each layer's `forward` with the functions above (an instance attribute, restored in a
               finally block, keeping any instance `forward` that was there before); the model kind and every
               value are checked first, also when `values` is empty.
  best_value   one pass with a running best index that starts at None (not at 0 or −inf), skipping NaN scores.
"""

from __future__ import annotations

import math

import torch

from diffattn.core.errors import ConfigError
from diffattn.nn.kernels import attention
from diffattn.nn.rope import apply_rope

_ABSENT = object()


def _finite(value, what):
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} must be a number (got {value!r})") from None
    if not math.isfinite(number):
        raise ConfigError(f"{what} must be finite (got {value!r})")
    return number


def _gate(value):
    number = _finite(value, "the V2 coefficient σ(λ)")
    if not 0.0 < number < 1.0:
        raise ConfigError(f"the V2 coefficient σ(λ) must lie strictly between 0 and 1 (got {value!r})")
    return number


def _v1(attn, x, rope, lam, cache=None):
    b, n, _ = x.shape
    h, h_kv, d = attn.num_heads, attn.num_kv_heads, attn.head_dim
    q = apply_rope(attn.q_proj(x).view(b, n, 2 * h, d), *rope)
    k = apply_rope(attn.k_proj(x).view(b, n, 2 * h_kv, d), *rope)
    v = attn.v_proj(x).view(b, n, h_kv, 2 * d)
    if cache is not None:
        k, v = cache.update(k, v)
    both = attention(torch.cat([q[:, :, 0::2], q[:, :, 1::2]]), torch.cat([k[:, :, 0::2], k[:, :, 1::2]]),
                     torch.cat([v, v]), causal=True, backend=getattr(attn, "backend", "auto"))
    a1v, a2v = both.to(torch.promote_types(x.dtype, torch.float32)).chunk(2)  # (b, N, h, 2d) each
    eps = getattr(attn.subln, "eps", 1e-5)
    if abs(lam) <= 1.0:
        head, sign = a1v - lam * a2v, 1.0
    else:  # (A1 − λA2)V = λ·(A1V/λ − A2V), and RMSNorm(λ·y) = sign(λ)·y / √(mean(y²) + eps/λ²)
        head, sign, eps = a1v / lam - a2v, math.copysign(1.0, lam), eps / lam / lam
    normed = (sign * head * torch.rsqrt(head.square().mean(dim=-1, keepdim=True) + eps)).to(x.dtype)
    normed = (normed * attn.subln.weight).to(x.dtype) * (1.0 - attn.lambda_init)
    return attn.out_proj(normed.reshape(b, n, h * 2 * d))


def _v2(attn, x, rope, gate, cache=None):
    b, n, _ = x.shape
    h, h_kv, d = attn.num_heads, attn.num_kv_heads, attn.head_dim
    q = apply_rope(attn.q_proj(x).view(b, n, 2 * h, d), *rope)
    k = apply_rope(attn.k_proj(x).view(b, n, h_kv, d), *rope)
    v = attn.v_proj(x).view(b, n, h_kv, d)
    if cache is not None:
        k, v = cache.update(k, v)
    out = attention(q, k, v, causal=True, backend=getattr(attn, "backend", "auto"))  # (b, N, 2h, d)
    weights = torch.tensor([1.0, -gate], dtype=out.dtype, device=out.device)
    heads = torch.einsum("bnhpd,p->bnhd", out.reshape(b, n, h, 2, d), weights)
    return attn.o_proj(heads.reshape(b, n, h * d))


def v1_forward(attn, x, rope, lam):
    return _v1(attn, x, rope, _finite(lam, "λ"))


def v2_forward(attn, x, rope, gate):
    return _v2(attn, x, rope, _gate(gate))


def sweep_model(model, values, evaluate):
    variant = getattr(getattr(model, "config", None), "attention", None)
    if variant not in ("diff_v1", "diff_v2"):
        raise ConfigError(f"only DIFF models have a λ to sweep (model.config.attention is {variant!r})")
    layers = [block.attn for block in model.blocks]
    marker = "lambda_full" if variant == "diff_v1" else "lambda_proj"
    if not layers or not all(hasattr(attn, marker) for attn in layers):
        raise ConfigError(f"a {variant} model whose attention layers are not all {variant} layers")
    check, forward = (lambda v: _finite(v, "λ"), _v1) if variant == "diff_v1" else (_gate, _v2)
    settings = [check(value) for value in values]  # every value, before evaluate is ever called
    scores = []
    for setting in settings:
        shadowed = []
        try:
            for attn in layers:
                shadowed.append((attn, attn.__dict__.get("forward", _ABSENT)))
                attn.forward = (lambda a, s: lambda x, rope, cache=None: forward(a, x, rope, s, cache))(attn, setting)
            scores.append(float(evaluate(model)))
        finally:
            for attn, previous in reversed(shadowed):
                if previous is _ABSENT:
                    del attn.forward
                else:
                    attn.forward = previous
    return scores


def best_value(values, scores):
    values, scores = list(values), list(scores)
    if not values or len(values) != len(scores):
        raise ConfigError(f"need one score per value and at least one (got {len(values)} and {len(scores)})")
    best = None
    for i, score in enumerate(scores):
        if score != score:  # NaN: a diverged setting never wins
            continue
        if best is None or score > scores[best]:
            best = i
    if best is None:
        raise ConfigError("every score is NaN: no setting can be chosen")
    return values[best]


OVERRIDES = {"v1_forward": v1_forward, "v2_forward": v2_forward, "sweep_model": sweep_model,
             "best_value": best_value}
