"""Lesson 10: massive values, the paper's Table 5 in miniature.

Per layer, over a batch of held-out sequences:

    attention logits   z = q kᵀ/√d on the visible (causal) entries of every map (V1: both maps of a pair)
    hidden states      the block's output x_{l+1} (the residual stream), every channel of every token

and for each: the largest absolute value (top-1), the median absolute value, and their ratio. The paper reports
the same statistics over 0.4M tokens of a 3B model; a high top-1/median ratio is what makes low-bit quantization hard
(lesson 10's quantize section).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from diffattn.pure import variants
from diffattn.eval.probe import Call, Probe, to_model

# Visible logits kept on the CPU for the exact median (2^28 fp32 values = 1 GiB): at gpu-small's size one
# sequence of 2,048 tokens already holds 12 layers × 24 maps (V2) × 2,098,176 visible pairs = 604M of them.
LOGIT_BUDGET = 2**28


def stats(values: Tensor) -> dict:
    a = values.detach().float().abs().flatten().cpu()
    top, median = a.max().item(), a.median().item()
    return {"top1": top, "median": median, "ratio": top / median}


def sequences_within_budget(model: nn.Module, length: int, wanted: int) -> int:
    """How many of `wanted` sequences of `length` tokens keep the visible logits within LOGIT_BUDGET (at least 1)."""
    c = model.config
    maps = c.n_head * variants.get(c.attention).maps_per_head  # per layer: V1 has n_head/2 pairs of maps, V2 2·n_head
    per_sequence = c.n_layer * maps * length * (length + 1) // 2
    return max(1, min(wanted, LOGIT_BUDGET // per_sequence))


def outliers(model: nn.Module, inputs: Tensor, bins: int = 60) -> dict:
    """Per-layer top-1 / median of |attention logits| and |hidden states|, plus log-spaced histograms. Only the
    visible logits of each call are kept (on the CPU), never the maps."""
    parts: dict[int, list[Tensor]] = {}

    def keep_visible_logits(call: Call) -> None:
        parts.setdefault(call.layer, []).append(call.logits[..., call.visible].float().cpu())

    with torch.no_grad(), Probe(model, on_call=keep_visible_logits) as probe:
        model(to_model(model, inputs))
    logits = {layer: torch.cat(p) for layer, p in parts.items()}
    out = {"tokens": int(inputs.numel()), "logits": [], "hidden": []}
    for layer in sorted(logits):
        out["logits"].append(stats(logits[layer]))
        out["hidden"].append(stats(probe.hidden[layer]))
    every_logit = torch.cat(list(logits.values())).abs().float().cpu()
    every_hidden = torch.cat([h.flatten() for h in probe.hidden.values()]).abs().float().cpu()
    out["histograms"] = {"logits": histogram(every_logit, bins), "hidden": histogram(every_hidden, bins)}
    return out


def histogram(a: Tensor, bins: int) -> dict:
    """Counts of |values| in log-spaced bins from 1e-4 to the maximum (smaller values go into the first bin)."""
    edges = torch.logspace(-4, float(torch.log10(a.max().clamp_min(1e-3))), bins + 1)
    counts = torch.histc(a.clamp(min=1e-4).log10(), bins=bins, min=-4.0, max=float(edges[-1].log10()))
    return {"edges": edges.tolist(), "counts": [int(c) for c in counts.tolist()]}
