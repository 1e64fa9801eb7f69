"""RMSNorm over all heads at once (the whole h·2d = d_model width) instead of over each head's 2d channels."""

import torch


def headwise_norm(attn, weight, lambda_init, eps=1e-5):
    x = attn.float()
    ms = x.pow(2).mean(dim=(-2, -1), keepdim=True)  # one RMS per token, across every head
    y = (x * torch.rsqrt(ms + eps)).to(attn.dtype)
    return (y * weight if weight is not None else y) * (1 - lambda_init)


OVERRIDES = {"headwise_norm": headwise_norm}
LOSES = ("05.3",)
