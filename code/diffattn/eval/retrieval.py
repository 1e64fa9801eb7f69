"""Lesson 09: multi-needle retrieval accuracy, laid out like the paper's Table 2 (diff-spec.md §3.4).

For each cell (N needles, R asked keys, context length T, needle depth) we draw `samples` examples from
`diffattn.data.retrieval` with a fixed seed and run the model once per batch (teacher forcing). A query counts as
answered when every byte of its value is the argmax of its row **by a margin of at least MARGIN** over the runner-up:
with teacher forcing that is exactly greedy decoding, and the margin keeps the count the same on every CPU (a kernel
that moves logits by 1e-6 cannot flip a decision that is 1e-3 clear; see numberkinds.py).

Accuracy = answered queries / asked queries, with a Wilson 95% interval (binomial, so it is the sampling error of
the examples we drew, not of training seeds).
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import torch
from torch import Tensor, nn

from diffattn.data.retrieval import TABLE2, Example, collate, examples as draw
from diffattn.errors import require
from diffattn.eval.probe import Probe, Quantizer, to_model
from diffattn.progress import Progress

MARGIN = 1e-3
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
Z95 = 1.959963984540054


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def answered(logits: Tensor, batch: Sequence[Example]) -> list[bool]:
    """One bool per asked key of each example: all its value bytes win by ≥ MARGIN. logits (B, T, vocab)."""
    values, indices = (t.cpu() for t in logits.float().topk(2, dim=-1))  # (B, T, 2) each
    out = []
    for row, e in enumerate(batch):
        for q in e.queries:
            ok = True
            for p in range(*q.answer):
                target = e.tokens[p + 1]
                ok &= int(indices[row, p, 0]) == target and float(values[row, p, 0] - values[row, p, 1]) >= MARGIN
            out.append(ok)
    return out


def answer_loss(logits: Tensor, targets: Tensor) -> tuple[float, int]:
    """Summed cross-entropy over the answer bytes and how many there are."""
    mask = targets != -100
    loss = torch.nn.functional.cross_entropy(logits[mask].float(), targets[mask], reduction="sum")
    return float(loss), int(mask.sum())


def run_batches(model: nn.Module, items: Sequence[Example], batch_size: int = 32,
                quantizer: Quantizer | None = None) -> dict:
    """Answered flags for every asked key, and the mean answer loss, over `items`."""
    flags, loss, count = [], 0.0, 0
    for start in range(0, len(items), batch_size):
        batch = items[start:start + batch_size]
        inputs, targets = (to_model(model, t) for t in collate(batch))
        with torch.no_grad():
            if quantizer is None:
                logits = model(inputs)
            else:
                with Probe(model, record=False, quantizer=quantizer):
                    logits = model(inputs)
        flags += answered(logits, batch)
        s, n = answer_loss(logits, targets)
        loss, count = loss + s, count + n
    return {"answered": sum(flags), "asked": len(flags), "answer_loss": loss / count}


def summarise(answered_: int, asked: int) -> dict:
    low, high = wilson(answered_, asked)
    return {"answered": answered_, "asked": asked, "accuracy": answered_ / asked, "ci95": [low, high]}


def check_lengths(model: nn.Module, lengths: Iterable[int]) -> None:
    longest = model.config.max_seq_len
    for t in lengths:
        require(0 < t <= longest, f"context length {t} is longer than this checkpoint's model supports "
                                  f"(max_seq_len {longest})")


def table2(model: nn.Module, lengths: Sequence[int], samples: int = 20, seed: int = 0,
           layouts: Sequence[tuple[int, int]] = TABLE2, depths: Sequence[float] = DEPTHS,
           quantizer: Quantizer | None = None, progress: bool = False) -> dict:
    """Accuracy per (N, R) layout, per context length and per depth, `samples` examples per cell.

    Every model sees the same examples: the generator is seeded per cell from (seed, layout, length, depth).
    """
    check_lengths(model, lengths)
    cells = [(layout, t, depth) for layout in layouts for t in lengths for depth in depths]
    per_cell = {}
    with Progress(len(cells), "multi-needle retrieval", enabled=progress) as bar:
        for index, ((n, r), t, depth) in enumerate(cells):
            g = torch.Generator().manual_seed(seed * 1_000_003 + index)
            items = draw("needles", samples, t, g, n_needles=n, n_queries=r, depth=depth)
            per_cell[(n, r, t, depth)] = run_batches(model, items, quantizer=quantizer)
            bar.advance()

    def total(select) -> dict:
        chosen = [v for k, v in per_cell.items() if select(*k)]
        out = summarise(sum(c["answered"] for c in chosen), sum(c["asked"] for c in chosen))
        out["answer_loss"] = sum(c["answer_loss"] * c["asked"] for c in chosen) / sum(c["asked"] for c in chosen)
        return out

    return {
        "overall": total(lambda *_: True),
        "layouts": {f"N{n}R{r}": total(lambda a, b, *_: (a, b) == (n, r)) for n, r in layouts},
        "lengths": {str(t): total(lambda a, b, tt, d: tt == t) for t in lengths},
        "depths": {f"{d:.2f}": total(lambda a, b, tt, dd: dd == d) for d in depths},
        "samples_per_cell": samples,
    }
