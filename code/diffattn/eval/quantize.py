"""Lesson 10: attention logits quantized to b bits, the paper's Fig. 8 in miniature.

What is quantized: the attention logits z = q kᵀ/√d of every map, just before the softmax (the paper quantizes
"attention logits" with dynamic post-training absmax quantization). How: symmetric, per (sequence, head) map, with the
scale computed on the fly from that map's visible (causal) entries:

    s = max_j |z_ij| / (2^(b−1) − 1)          one scale per map: the largest logit decides the step for all others
    ẑ = round(z / s) · s                      2^b − 1 levels, none saturate (absmax)

A map with one huge logit (an outlier, lesson 10's first half) gets a coarse step: its small logits all round to the
same few levels, and the softmax over them goes flat. b = 16 is practically lossless here. Bit widths 2 to 16.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn

from diffattn.core.errors import require
from diffattn.eval.probe import Probe, Quantizer, to_model
from diffattn.eval.needle_accuracy import table2

BITS = (16, 8, 6, 4)


def check_bits(bits: Sequence[int]) -> None:
    for b in bits:
        require(isinstance(b, int) and 2 <= b <= 16, f"bit widths must be integers from 2 to 16 (got {b})")


def absmax_quantizer(bits: int) -> Quantizer:
    check_bits([bits])
    levels = 2 ** (bits - 1) - 1

    def quantize(logits: Tensor, visible: Tensor) -> Tensor:
        scale = logits.masked_fill(~visible, 0).abs().amax(dim=(-2, -1), keepdim=True).clamp_min(1e-12) / levels
        return torch.round(logits / scale) * scale

    return quantize


def quantized_loss(model: nn.Module, inputs: Tensor, targets: Tensor, bits: int | None) -> float:
    """Mean next-token cross-entropy on (inputs, targets) with the logits quantized to `bits` (None: unquantized)."""
    with torch.no_grad(), Probe(model, record=False, quantizer=None if bits is None else absmax_quantizer(bits)):
        logits = model(to_model(model, inputs))
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), to_model(model, targets).flatten(),
                                             ignore_index=-100).item()


def quantized_retrieval(model: nn.Module, bits: Sequence[int], lengths: Sequence[int], samples: int, seed: int = 0,
                        progress: bool = False) -> dict:
    """Table-2 accuracy (all layouts and depths pooled) at each bit width, and unquantized."""
    check_bits(bits)
    out = {"unquantized": table2(model, lengths, samples, seed)["overall"]}
    for b in bits:
        out[str(b)] = table2(model, lengths, samples, seed, quantizer=absmax_quantizer(b), progress=progress,
                             label=f"{model.config.attention}, logits in {b} bits")["overall"]
    return out
