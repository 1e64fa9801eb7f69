"""The "gradient compensation" of a widely shared explanation: per-head RMSNorm, then × √2 instead of × (1 − λ_init)."""

import math

import torch


def headwise_norm(attn, weight, lambda_init, eps=1e-5):
    x = attn.float()
    y = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)).to(attn.dtype)
    return (y * weight if weight is not None else y) * math.sqrt(2)


OVERRIDES = {"headwise_norm": headwise_norm}
LOSES = ("05.3",)
