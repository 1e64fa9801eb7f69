"""Lesson 08: how large each attention branch's output is at initialisation, against the residual stream it joins.

Before blaming an architecture for training worse, measure the set-up. A pre-norm block adds attn(norm(x)) to x; at
step 0, x is the token embedding (RMS ≈ 0.02 with GPT-2's N(0, 0.02²) init). What each variant adds there:

    baseline  out_proj(A V): V = norm(x) W_v has RMS ≈ 0.02·√d_model, averaging over many keys shrinks it, and
              out_proj (std 0.02) shrinks it again: a branch about the embedding's size
    DIFF V1   out_proj((1 − λ_init) · RMSNorm(head)): the per-head norm makes every head unit-RMS whatever A and V are,
              so the branch is ≈ (1 − λ_init) · 0.02·√d_model, several times the residual it is added to
    DIFF V2   out_proj(A1 V − σ(λ) A2 V): no norm, and the difference of two near-equal averages is smaller still

`branch_rms` measures it on real inputs (one forward pass over validation text, hooks on each block's attention
module), so the table in lesson 08 is a measurement, not this arithmetic.
"""

from __future__ import annotations

import statistics
from typing import Iterable

import torch

from diffattn.config import GPTConfig
from diffattn.model.gpt import GPT


def _rms(t: torch.Tensor) -> float:
    return float(t.float().pow(2).mean().sqrt())


def branch_rms(config: GPTConfig, tokens: torch.Tensor, seed: int) -> dict:
    """RMS of the embedding entering block 0 and of each block's attention output, for a model freshly built with
    `torch.manual_seed(seed)` (the trainer's initialisation), on `tokens` (b, N)."""
    torch.manual_seed(seed)
    model = GPT(config).eval()
    found: dict[str, list[float]] = {"attention": []}
    hooks = [block.attn.register_forward_hook(lambda _m, _i, out: found["attention"].append(_rms(out)))
             for block in model.blocks]
    hooks.append(model.blocks[0].register_forward_pre_hook(
        lambda _m, args: found.__setitem__("embedding", _rms(args[0]))))
    try:
        with torch.no_grad():
            model(tokens)
    finally:
        for hook in hooks:
            hook.remove()
    return {"embedding": found["embedding"], "attention": found["attention"]}


def mean_over_seeds(config: GPTConfig, tokens: torch.Tensor, seeds: Iterable[int]) -> dict:
    """branch_rms averaged over seeds, with the ratio attention / embedding per layer."""
    runs = [branch_rms(config, tokens, seed) for seed in seeds]
    embedding = statistics.fmean(r["embedding"] for r in runs)
    attention = [statistics.fmean(r["attention"][layer] for r in runs) for layer in range(config.n_layer)]
    return {"embedding": embedding, "attention": attention, "ratio": [a / embedding for a in attention],
            "seeds": len(runs)}
