"""Exercises 05.1-05.3 · the three pieces DIFF V1 adds around two softmax maps.  Lesson: lessons/05-diff-v1-pytorch.md

Grade them with `make grade EX=ex05` (`make grade` grades every exercise).

You may use torch and `diffattn.core.errors.require`; do not import the reference `diffattn.nn.functional` or
`diffattn.pure.attention.lambda_init` (that grades the reference, not you). Once all three pass, the module
`diffattn.nn.attention.DiffAttentionV1` is exactly these three functions around two attention calls.
"""

from __future__ import annotations

import torch  # noqa: F401  (you will need torch.exp, torch.sum, torch.rsqrt, tensor.to(...))
from torch import Tensor


def reparameterized_lambda(
    lambda_q1: Tensor, lambda_k1: Tensor, lambda_q2: Tensor, lambda_k2: Tensor, lambda_init: float
) -> Tensor:
    """Exercise 05.1 · V1's λ from four learned vectors (paper eq. 2).

        λ = exp(λ_q1 · λ_k1) − exp(λ_q2 · λ_k2) + λ_init            (· is the dot product over the d entries)

    Args:
        lambda_q1, lambda_k1, lambda_q2, lambda_k2: four (d,) tensors, any float dtype (the module keeps them fp32;
            a bf16 model may hand you bf16 ones), whose dot products λ_q1·λ_k1 and λ_q2·λ_k2 are at most 88:
            exp of a larger one overflows float32, the dtype λ is computed in (trained vectors give dot products
            near 0).
        lambda_init: the float λ_init of this layer (exercise 05.2).
    Returns:
        A 0-dim tensor (ONE scalar per layer, shared by every head; not one per channel or per head), computed in
        float32 whatever the input dtype: upcast the vectors to float32 before multiplying, because exp magnifies
        rounding error and this one number scales every head. (float64 inputs may stay float64.)
    Tolerance: the grader compares with a float64 computation at atol 1e-6 (float32 and bfloat16 inputs).

    Example (all-zero vectors: exp(0) − exp(0) = 0, so λ = λ_init):
        >>> z = torch.zeros(4)
        >>> reparameterized_lambda(z, z, z, z, 0.2)
        tensor(0.2000)
    """
    raise NotImplementedError("exercise 05.1: reparameterized_lambda")


def lambda_init(depth: int) -> float:
    """Exercise 05.2 · V1's initial λ for the layer at 0-based `depth` (the official code's convention).

        λ_init(depth) = 0.8 − 0.6 · exp(−0.3 · depth)

    The paper writes the same schedule with a 1-based layer index l as exp(−0.3 · (l − 1)); the code's depth is
    l − 1, so the FIRST layer (depth 0) gets exactly 0.2, and deeper layers approach 0.8.

    Args:
        depth: 0 for the first layer, 1 for the second, ... (an int of any size: far out λ_init is 0.8).
    Returns:
        a Python float.
    Raises:
        diffattn.core.errors.ConfigError (a ValueError) if depth < 0, with a one-line message naming the constraint.
    Tolerance: 1e-12.

    Example:
        >>> round(lambda_init(1), 4)
        0.3555
    """
    raise NotImplementedError("exercise 05.2: lambda_init")


def headwise_norm(attn: Tensor, weight: Tensor | None, lambda_init: float, eps: float = 1e-5) -> Tensor:
    """Exercise 05.3 · per-head RMSNorm, then the constant (1 − λ_init) (paper eq. 3; "GroupNorm" in its Fig. 2).

    Args:
        attn: (b, N, h, 2d), the differential heads' outputs (A1 − λA2)V. Each head i owns the 2d channels
            attn[:, :, i, :]. Entries of size up to 1e18, as the official RMSNorm: x² is computed in float32 and
            would overflow beyond ~1.8e19.
        weight: (2d,) learnable scale shared by ALL heads, or None (no scale).
        lambda_init: the layer's λ_init.
        eps: added to the mean square.
    Returns:
        (b, N, h, 2d), same dtype as `attn`, where for every (batch, token, head) vector x of length 2d:

            y = x / sqrt(mean(x²) + eps)          RMS only: NO mean subtraction (this is not LayerNorm),
                                                  over the head's own 2d channels (not over all h·2d of d_model)
            y = y.to(attn.dtype) * weight         compute the line above in float32, cast back, then the weight
            y = y * (1 − λ_init)                  a fixed constant: not √2, not learned

        The result has attn's dtype even when `weight` does not (a float32 weight kept in a bfloat16 model).

    Tolerance: the grader compares with a float64 computation at atol 1e-5 (float32 inputs).

    Example (one head, x = [3, −3, 3, −3]: mean(x²) = 9, so x / 3 = [1, −1, 1, −1], times 1 − 0.2):
        >>> headwise_norm(torch.tensor([[[[3., -3., 3., -3.]]]]), None, 0.2, eps=0.0)
        tensor([[[[ 0.8000, -0.8000,  0.8000, -0.8000]]]])
    """
    raise NotImplementedError("exercise 05.3: headwise_norm")
