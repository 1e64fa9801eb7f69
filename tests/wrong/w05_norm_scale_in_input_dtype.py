"""05.3 mistake (class D, dtype order): only the mean square is computed in float32; the factor
1/√(mean(x²) + eps) is cast back to the input dtype and the multiplication x · factor runs in bfloat16/float16.

The docstring: "y = x / sqrt(mean(x²) + eps)... compute the line above in float32, cast back, then the weight".
Here the normalisation itself is rounded twice in low precision (factor, then product) instead of once (the cast):
up to ~2 bf16 ulps (≈ 1%) off the official RMSNorm, inside the graded bf16 tolerance of 2e-2. Exact in float32.
"""

import torch


def headwise_norm(attn, weight, lambda_init, eps=1e-5):
    mean_square = attn.float().pow(2).mean(dim=-1, keepdim=True)  # float32: no fp16 overflow
    y = attn * torch.rsqrt(mean_square + eps).to(attn.dtype)  # the product in attn's dtype
    if weight is not None:
        y = (y * weight).to(attn.dtype)
    return y * (1.0 - lambda_init)


OVERRIDES = {"headwise_norm": headwise_norm}
LOSES = ("05.3",)
