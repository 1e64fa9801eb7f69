"""Lesson 09: where the effective attention goes when the model answers (the paper's §3.4, Table 3).

For each asked key we take one row of every layer's effective map (probe.effective_maps): the row of the query's
`=`, whose next-token prediction is the value's first byte. Its entries w_j (j over the context) are split into

    answer     the record `#KEY=VALUE` that holds the answer
    haystack   the filler bytes between records
    (the other records and the query section make up the rest)

and reported as shares of the row's absolute mass, share(S) = Σ_{j∈S} w_j / Σ_j |w_j| ∈ [−1, 1]. For the baseline
(w ≥ 0, Σ w = 1) that is the attention weight itself; DIFF rows sum to 1 − λ and may be negative, so we divide by the
absolute mass to compare variants on one scale (V1 normalises each head's output afterwards anyway). A negative
haystack share means the head subtracts more noise than it adds.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn

from diffattn.data.retrieval import Example, collate, examples as draw
from diffattn.eval.probe import Probe, to_model
from diffattn.eval.needle_accuracy import DEPTHS, check_lengths

PARTS = ("answer", "haystack")


def masks(e: Example, length: int) -> dict[str, Tensor]:
    """Boolean masks over key positions for the parts of one example, one per asked key: {part: (R, T)}."""
    records = [q.record for q in e.queries] + list(e.distractors)
    in_record = torch.zeros(length, dtype=torch.bool)
    for s, t in records:
        in_record[s:t] = True
    haystack = ~in_record
    haystack[e.context_end:] = False
    answer = torch.zeros(len(e.queries), length, dtype=torch.bool)
    for i, q in enumerate(e.queries):
        answer[i, q.record[0]:q.record[1]] = True
    return {"answer": answer, "haystack": haystack.expand(len(e.queries), length)}


def shares(model: nn.Module, items: Sequence[Example]) -> dict[str, Tensor]:
    """{part: (queries, layers, heads)} shares of |effective attention| at each asked key's `=` row.

    One example at a time: the probe keeps every layer's full maps, (heads, T, T) per call."""
    out = {part: [] for part in PARTS}
    for e in items:
        inputs = to_model(model, collate([e])[0])
        with torch.no_grad(), Probe(model) as probe:
            model(inputs)
        maps = probe.effective_maps()  # {layer: (1, heads, T, T)}
        length = inputs.shape[1]
        rows = torch.tensor([q.answer[0] for q in e.queries])
        w = torch.stack([maps[layer][0][:, rows].cpu() for layer in sorted(maps)])  # (layers, heads, R, T)
        w = w.permute(2, 0, 1, 3).float()  # (R, layers, heads, T)
        total = w.abs().sum(-1)
        for part, mask in masks(e, length).items():
            out[part].append((w * mask[:, None, None, :]).sum(-1) / total)
    return {part: torch.cat(v) for part, v in out.items()}


def allocation(model: nn.Module, length: int, samples: int = 16, seed: int = 0, layout: tuple[int, int] = (4, 2),
               depths: Sequence[float] = DEPTHS) -> dict:
    """Mean shares per layer and head, per depth for the last layer's most answer-focused head."""
    check_lengths(model, [length])
    n, r = layout
    per_depth = {}
    for index, depth in enumerate(depths):
        items = draw("needles", samples, length, torch.Generator().manual_seed(seed * 1_000_003 + index),
                     n_needles=n, n_queries=r, depth=depth)
        per_depth[depth] = {part: s.mean(0) for part, s in shares(model, items).items()}  # (layers, heads)
    mean = {part: torch.stack([per_depth[d][part] for d in depths]).mean(0) for part in PARTS}
    last = mean["answer"].shape[0] - 1
    head = int(mean["answer"][last].argmax())
    return {
        "layout": f"N{n}R{r}", "length": length, "samples_per_depth": samples,
        "per_head": {part: mean[part].tolist() for part in PARTS},  # [layer][head]
        "layer_mean": {part: mean[part].mean(-1).tolist() for part in PARTS},
        "best_head": {"layer": last, "head": head,
                      **{part: mean[part][last, head].item() for part in PARTS},
                      "by_depth": {f"{d:.2f}": {part: per_depth[d][part][last, head].item() for part in PARTS}
                                   for d in depths}},
    }


def example_map(model: nn.Module, length: int, seed: int = 0, layout: tuple[int, int] = (4, 2),
                layer: int | None = None, head: int = 0) -> dict:
    """One example's effective map (T × T) for one head, with the parts marked, for a heatmap."""
    check_lengths(model, [length])
    (e,) = draw("needles", 1, length, torch.Generator().manual_seed(seed), n_needles=layout[0], n_queries=layout[1],
                depth=0.5)
    inputs = to_model(model, collate([e])[0])
    with torch.no_grad(), Probe(model) as probe:
        model(inputs)
    maps = probe.effective_maps()
    layer = max(maps) if layer is None else layer
    return {"map": maps[layer][0, head].float().cpu(), "text": e.text()[:-1], "layer": layer, "head": head,
            "answer_rows": [q.answer[0] for q in e.queries], "records": [q.record for q in e.queries]}


def record_allocation(model: nn.Module, items: Sequence[Example]) -> dict:
    """Where each asked key's row puts its |effective attention| among the context's records (mqar, rebind): the
    share on the record that answers it and on every other record, per layer (mean over heads) and for the last
    layer's head that puts most on the answer. `shares` splits answer from haystack; these tasks have no haystack."""
    answer, others = [], []
    for e in items:
        inputs = to_model(model, collate([e])[0])
        with torch.no_grad(), Probe(model) as probe:
            model(inputs)
        maps = probe.effective_maps()
        rows = torch.tensor([q.answer[0] for q in e.queries])
        w = torch.stack([maps[layer][0][:, rows].cpu() for layer in sorted(maps)]).permute(2, 0, 1, 3).float()
        total = w.abs().sum(-1)  # (R, layers, heads)
        in_record = torch.zeros(inputs.shape[1], dtype=torch.bool)
        for r in e.records:
            in_record[r.span[0]:r.span[1]] = True
        for i, q in enumerate(e.queries):
            mine = torch.zeros_like(in_record)
            mine[q.record[0]:q.record[1]] = True
            answer.append((w[i] * mine).sum(-1) / total[i])
            others.append((w[i] * (in_record & ~mine)).sum(-1) / total[i])
    a, o = torch.stack(answer).mean(0), torch.stack(others).mean(0)  # (layers, heads)
    last = a.shape[0] - 1
    head = int(a[last].argmax())
    return {"queries": len(answer), "layer_mean": {"answer": a.mean(-1).tolist(), "other_records": o.mean(-1).tolist()},
            "best_head": {"layer": last, "head": head, "answer": a[last, head].item(),
                          "other_records": o[last, head].item()}}
