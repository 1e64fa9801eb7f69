"""Per-head RMSNorm computed in the input dtype, without the float32 upcast.

Right in float32, but in float16 x² overflows (65504 is the largest fp16) for entries of a few hundred, the mean
square becomes inf and every output 0; in bf16 the mean square and rsqrt lose digits.
"""

import torch


def headwise_norm_low_precision(attn, weight, lambda_init, eps=1e-5):
    normed = attn * torch.rsqrt(attn.pow(2).mean(dim=-1, keepdim=True) + eps)
    if weight is not None:
        normed = normed * weight
    return normed * (1.0 - lambda_init)


OVERRIDES = {"headwise_norm": headwise_norm_low_precision}
LOSES = ("05.3",)
