"""Per-head RMSNorm with eps added to the RMS, x / (√mean(x²) + eps), instead of inside the root.

Indistinguishable at eps = 1e-5 on unit-scale heads, but not the norm the official code (and its eps) defines.
"""

import torch


def headwise_norm_eps_outside(attn, weight, lambda_init, eps=1e-5):
    x = attn.float()
    normed = (x / (x.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)).to(attn.dtype)
    if weight is not None:
        normed = normed * weight
    return normed * (1.0 - lambda_init)


OVERRIDES = {"headwise_norm": headwise_norm_eps_outside}
LOSES = ("05.3",)
