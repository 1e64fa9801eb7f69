"""RMSNorm as a module: the pre-norm of every block and DIFF V1's per-head `subln`."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from diffattn.nn.functional import rms_norm


class RMSNorm(nn.Module):
    """y = x / √(mean(x²) + eps) · weight over the last dim; computed in fp32, cast back (see `functional.rms_norm`).

    With `elementwise_affine=False` there is no `weight` parameter (the state dict has no key for it), which is how
    the first DIFF V1 release and HF DiffLlama build their per-head norm.
    """

    def __init__(self, dim: int, eps: float = 1e-5, elementwise_affine: bool = True):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.ones(dim)) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}, elementwise_affine={self.weight is not None}"
