"""11.1 mistake: adds the value to the trained λ (λ + lam, an offset) instead of replacing λ by it."""

import torch

from diffattn.core.errors import require


def v1_forward(attn, x, rope, lam):
    require(torch.isfinite(torch.tensor(float(lam))).item(), "λ must be finite")
    trained = attn.lambda_full().detach()
    attn.lambda_full = lambda: trained + lam
    try:
        return attn(x, rope)
    finally:
        del attn.lambda_full


OVERRIDES = {"v1_forward": v1_forward}
LOSES = ("11.1",)
