"""05.3 mistake: the default eps is 1e-6 (a common RMSNorm default elsewhere) instead of the official 1e-5."""

import torch


def headwise_norm(attn, weight, lambda_init, eps=1e-6):
    x = attn.float()
    y = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)).to(attn.dtype)
    if weight is not None:
        y = y * weight
    return y * (1 - lambda_init)


OVERRIDES = {"headwise_norm": headwise_norm}
LOSES = ("05.3",)
