"""The per-head "GroupNorm" taken literally as LayerNorm: subtract each head's mean before dividing by its std."""

import torch


def headwise_norm(attn, weight, lambda_init, eps=1e-5):
    x = attn.float()
    centred = x - x.mean(dim=-1, keepdim=True)
    y = (centred * torch.rsqrt(centred.pow(2).mean(dim=-1, keepdim=True) + eps)).to(attn.dtype)
    return (y * weight if weight is not None else y) * (1 - lambda_init)


OVERRIDES = {"headwise_norm": headwise_norm}
LOSES = ("05.3",)
