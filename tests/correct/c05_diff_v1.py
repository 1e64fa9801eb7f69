"""05.1–05.3, correct: V1's λ re-parameterisation, λ_init(depth), and the per-head RMSNorm × (1 − λ_init).

How it differs from the reference (diffattn.nn.functional):
  reparameterized_lambda  torch.dot on upcast vectors, and exp(a) − exp(b) as exp(m)·(exp(a − m) − exp(b − m)) with
                          m = max(a, b), so equal large dot products give λ_init instead of inf − inf = NaN.
  lambda_init             0.8 − 0.6·r^depth with r = exp(−0.3) (a power, not exp of a product), and exactly 0.8
                          for depths so deep that the term is below half an ulp of 0.8 (no float conversion of a
                          huge int, which the reference's −0.3·depth raises OverflowError on).
  headwise_norm           each head is first scaled by a power of two (exact) that brings its largest |entry| into
                          [0.5, 1), with eps scaled to match, so mean(x²) cannot overflow float32 (the reference's
                          x.pow(2) is inf for float32/bfloat16 entries above ~1.8e19 and then returns 0); the weight
                          and (1 − λ_init) follow the cast back, and the result is cast to attn's dtype once at the end.
"""

from __future__ import annotations

import math
import numbers

import torch

from diffattn.core.errors import ConfigError

_DECAY = math.exp(-0.3)


def _compute_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def reparameterized_lambda(lambda_q1, lambda_k1, lambda_q2, lambda_k2, lambda_init):
    dtype = _compute_dtype(lambda_q1.dtype)
    a = torch.dot(lambda_q1.to(dtype), lambda_k1.to(dtype))
    b = torch.dot(lambda_q2.to(dtype), lambda_k2.to(dtype))
    top = torch.maximum(a, b)
    difference = torch.exp(a - top) - torch.exp(b - top)  # one of the two is exp(0) = 1
    size = torch.exp(top)
    # exp(top) = inf with no difference left (a = b, both huge): λ is λ_init; everywhere else the plain product
    scaled = torch.where(torch.isinf(size) & (difference == 0), torch.zeros_like(difference), size * difference)
    return scaled + lambda_init


def lambda_init(depth):
    if isinstance(depth, bool) or not isinstance(depth, numbers.Integral):
        raise ConfigError(f"depth must be a 0-based integer layer index (got {depth!r})")
    if depth < 0:
        raise ConfigError(f"depth is 0-based and must be >= 0 (got {depth})")
    if depth > 2000:  # 0.6·exp(−0.3·depth) < 1e-260: far below half an ulp of 0.8
        return 0.8
    return 0.8 - 0.6 * _DECAY ** int(depth)


def headwise_norm(attn, weight, lambda_init, eps=1e-5):
    x = attn.to(_compute_dtype(attn.dtype))
    largest = x.abs().amax(dim=-1, keepdim=True)
    _, exponent = torch.frexp(largest)  # largest = m·2^e with m in [0.5, 1); 0 for an all-zero head
    exponent = torch.where(torch.isfinite(largest), exponent, torch.zeros_like(exponent))
    limit = 1000 if x.dtype == torch.float64 else 100  # 2^±limit is a normal number of the compute dtype
    exponent = exponent.clamp(-limit, limit)
    scaled = torch.ldexp(x, -exponent)
    if eps:
        scaled_eps = eps * torch.ldexp(torch.ones_like(largest), -2 * exponent)  # eps / 2^(2e): inf is fine here
    else:
        scaled_eps = torch.zeros_like(largest)
    y = (scaled / torch.sqrt(scaled.square().mean(dim=-1, keepdim=True) + scaled_eps)).to(attn.dtype)
    if weight is not None:
        y = y * weight
    return (y * (1.0 - lambda_init)).to(attn.dtype)


OVERRIDES = {"reparameterized_lambda": reparameterized_lambda, "lambda_init": lambda_init,
             "headwise_norm": headwise_norm}
