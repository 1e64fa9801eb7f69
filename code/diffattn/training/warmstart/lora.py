"""Lesson 13: the LoRA-only warm start. A common claim, with no published source, is that "a LoRA on the Q projection
can approximate DIFF"; this is that idea made concrete on a V2 conversion (diffattn.training.warmstart.convert): freeze everything, and train
only a rank-r update of the *second* query head of every pair plus W_λ,

    q_2i   = W_Q,2i x                       frozen: the baseline's head i
    q_2i+1 = W_Q,2i x + B_i A x             A (r, d_model) random, B (h·d, r) zero: the model starts as the conversion
    λ      = W_λ x                          trainable, starts at 0 (σ = ½)

so the trainable part is exactly what makes the layer differential: the second map and how much of it to subtract.

A few lines of torch instead of the `peft` library: peft is not a dependency of the course, and its LoRA adds
B·A to a whole Linear layer's output, while this update must reach only the odd query heads (the even ones stay
the baseline's maps); restricting peft to half the rows of q_proj would need this wrapper anyway.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from diffattn.pure import variants
from diffattn.core.errors import require
from diffattn.model.gpt import GPT


class SecondQueryLoRA(nn.Module):
    """A frozen V2 q_proj (2h heads of d) plus a trainable rank-r update of heads 1, 3, 5, … only."""

    def __init__(self, q_proj: nn.Linear, num_heads: int, head_dim: int, rank: int):
        super().__init__()
        require(rank >= 1, f"the LoRA rank must be >= 1 (got {rank})")
        self.num_heads, self.head_dim = num_heads, head_dim
        self.weight = nn.Parameter(q_proj.weight.detach().clone(), requires_grad=False)  # (2h·d, d_model)
        # A random, B zero (Hu et al.; peft): nn.Linear's default init is the uniform one peft gives A
        self.lora_a = nn.Linear(self.weight.shape[1], rank, bias=False)  # d_model → r
        self.lora_b = nn.Parameter(torch.zeros(num_heads * head_dim, rank))  # r → h·d; draws no random numbers

    def forward(self, x: Tensor) -> Tensor:
        base = x @ self.weight.T  # (b, N, 2h·d): the frozen projection
        delta = self.lora_a(x) @ self.lora_b.T  # (b, N, h·d): one update per pair
        shape = (*x.shape[:-1], self.num_heads, 1, self.head_dim)
        update = torch.cat([torch.zeros_like(delta).view(shape), delta.view(shape)], dim=-2)  # (b, N, h, 2, d)
        return base + update.flatten(-3)  # only the odd heads 2i+1 move


def lora_only(v2: GPT, rank: int) -> GPT:
    """Freeze every parameter of the converted V2 model `v2` (in place) except a rank-`rank` second-query update and
    W_λ in every layer; returns it. Trainable parameters per layer: rank·(d_model + h·d) + h·d_model."""
    require(variants.get(v2.config.attention).lambda_kind == "gate", f"the LoRA-only variant wraps a DIFF V2 model (got {v2.config.attention})")
    for p in v2.parameters():
        p.requires_grad_(False)
    for block in v2.blocks:
        attn = block.attn
        attn.q_proj = SecondQueryLoRA(attn.q_proj, attn.num_heads, attn.head_dim, rank)
        attn.lambda_proj.weight.requires_grad_(True)
    return v2


def trainable_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
