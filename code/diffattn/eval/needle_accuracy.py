"""Lesson 09: multi-needle retrieval accuracy, laid out like the paper's Table 2 (the paper's §3.4).

For each cell (N needles, R asked keys, context length T, needle depth) we draw `samples` examples from
`diffattn.data.retrieval` with a fixed seed and run the model once per batch (teacher forcing). A query counts as
answered when every byte of its value is the argmax of its row **by a margin of at least MARGIN** over the runner-up:
with teacher forcing that is exactly greedy decoding, and the margin keeps the count the same on every CPU (a kernel
that moves logits by 1e-6 cannot flip a decision that is 1e-3 clear; see numberkinds.py).

Accuracy = answered queries / asked queries, with a 95% bootstrap interval that resamples whole examples (the two
keys asked of one haystack are not independent draws, so a binomial interval over keys would be too narrow); it is
the sampling error of the examples we drew, not of training seeds. Beside it stand the null models of
`diffattn.data.nulls` on the same queries, the paired test of the accuracy against the best key-free one, and the
verdict of `diffattn.eval.criterion` (an effect of a declared size, not only a significant one).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import torch
from torch import Tensor, nn

from diffattn.data import nulls
from diffattn.data.retrieval import MARGIN, TABLE2, Example, answered, collate, examples as draw
from diffattn.core.errors import require
from diffattn.eval import criterion
from diffattn.eval.probe import Probe, Quantizer, to_model
from diffattn.core.progress import Progress
from diffattn.core.stats import clustered_difference

MANY = 4  # "many needles": N >= 4
__all__ = ["MARGIN", "answered"]  # the scoring rule lives with the tasks (the trainer scores with it too)
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


def answer_loss(logits: Tensor, targets: Tensor) -> tuple[float, int]:
    """Summed cross-entropy over the answer bytes and how many there are."""
    mask = targets != -100
    loss = torch.nn.functional.cross_entropy(logits[mask].float(), targets[mask], reduction="sum")
    return float(loss), int(mask.sum())


def run_batches(model: nn.Module, items: Sequence[Example], batch_size: int = 32,
                quantizer: Quantizer | None = None) -> dict:
    """Over `items`: the answered flag of every asked key, its example (cluster), every null rule's probability of
    answering it (diffattn.data.nulls), and the mean answer loss."""
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
    return {"flags": flags, "clusters": nulls.clusters(items), "nulls": nulls.query_nulls(items),
            "answered": sum(flags), "asked": len(flags), "answer_loss": loss / count}


def pooled(runs: Sequence[dict]) -> dict:
    """run_batches results over disjoint example sets, as one (cluster ids kept apart)."""
    out = {"flags": [], "clusters": [], "nulls": {rule: [] for rule in nulls.RULES}, "answer_loss_sum": 0.0}
    for i, r in enumerate(runs):
        out["flags"] += r["flags"]
        out["clusters"] += [(i, c) for c in r["clusters"]]
        for rule in nulls.RULES:
            out["nulls"][rule] += r["nulls"][rule]
        out["answer_loss_sum"] += r["answer_loss"] * r["asked"]
    return {**out, "answered": sum(out["flags"]), "asked": len(out["flags"]),
            "answer_loss": out.pop("answer_loss_sum") / max(1, len(out["flags"]))}


def summarise(result: dict) -> dict:
    """Accuracy with a 95% interval clustered by example, beside the null rules' scores on the same queries and the
    paired test against the best key-free one (`vs_null`: accuracy − null, clustered bootstrap interval)."""
    flags, clusters = [float(f) for f in result["flags"]], result["clusters"]
    accuracy = clustered_difference(flags, [0.0] * len(flags), clusters)
    judged = criterion.verdict(flags, result["nulls"], clusters)
    ids = {c: i for i, c in enumerate(dict.fromkeys(clusters))}
    null = {rule: sum(p) / len(p) for rule, p in result["nulls"].items()}
    return {"answered": result["answered"], "asked": result["asked"], "accuracy": accuracy["difference"],
            "ci95": accuracy["ci95"], "examples": accuracy["clusters"], "answer_loss": result["answer_loss"],
            "null": null, "null_rule": judged["null_rule"], "null_best": judged["null_best"],
            "vs_null": judged["vs_null"], "margin": judged["margin"], "vs_order_blind": judged["vs_order_blind"],
            "retrieves": judged["retrieves"],
            "answered_flags": "".join("1" if f else "0" for f in result["flags"]),
            "query_examples": [ids[c] for c in clusters]}


def check_lengths(model: nn.Module, lengths: Iterable[int]) -> None:
    longest = model.config.max_seq_len
    for t in lengths:
        require(0 < t <= longest, f"context length {t} is longer than this checkpoint's model supports "
                                  f"(max_seq_len {longest})")


def table2(model: nn.Module, lengths: Sequence[int], samples: int = 20, seed: int = 0,
           layouts: Sequence[tuple[int, int]] = TABLE2, depths: Sequence[float] = DEPTHS,
           quantizer: Quantizer | None = None, progress: bool = False, label: str = "multi-needle retrieval") -> dict:
    """Accuracy per (N, R) layout, per context length and per depth, `samples` examples per cell (`label` names the
    run on the progress line).

    Every model sees the same examples: the generator is seeded per cell from (seed, layout, length, depth).
    """
    check_lengths(model, lengths)
    cells = [(layout, t, depth) for layout in layouts for t in lengths for depth in depths]
    per_cell = {}
    with Progress(len(cells), label, enabled=progress) as bar:
        for index, ((n, r), t, depth) in enumerate(cells):
            g = torch.Generator().manual_seed(seed * 1_000_003 + index)
            items = draw("needles", samples, t, g, n_needles=n, n_queries=r, depth=depth)
            per_cell[(n, r, t, depth)] = run_batches(model, items, quantizer=quantizer)
            bar.advance()

    def total(select) -> dict:
        return summarise(pooled([v for k, v in per_cell.items() if select(*k)]))

    out = {
        "overall": total(lambda *_: True),
        "layouts": {f"N{n}R{r}": total(lambda a, b, *_: (a, b) == (n, r)) for n, r in layouts},
        "lengths": {str(t): total(lambda a, b, tt, d: tt == t) for t in lengths},
        "depths": {f"{d:.2f}": total(lambda a, b, tt, dd: dd == d) for d in depths},
        "samples_per_cell": samples,
    }
    if any(n >= MANY for n, _ in layouts):  # the hard end of Table 2: 4 and 6 needles, 2 keys asked
        out["many_needles"] = total(lambda a, *_: a >= MANY)
    return out


def rows(table: dict) -> dict[str, dict]:
    """Every row of a table2 result (or of `paired`'s) by a flat name: overall, many_needles, layouts.N4R2, …"""
    out = {k: table[k] for k in ("overall", "many_needles") if k in table}
    for group in ("layouts", "lengths", "depths"):
        out |= {f"{group}.{k}": v for k, v in table[group].items()}
    return out


def paired(a: dict, b: dict) -> dict:
    """a − b on every row of two table2 results over the same examples (same seed, lengths, layouts), laid out like
    them (overall, many_needles, layouts, lengths, depths): the paired difference of accuracies, with a bootstrap
    interval clustered by example."""
    def difference(ra: dict, rb: dict) -> dict:
        require(ra["query_examples"] == rb["query_examples"], "paired needs two tables over the same examples")
        return clustered_difference([float(c == "1") for c in ra["answered_flags"]],
                                    [float(c == "1") for c in rb["answered_flags"]], ra["query_examples"])

    out: dict = {k: difference(a[k], b[k]) for k in ("overall", "many_needles") if k in a}
    for group in ("layouts", "lengths", "depths"):
        out[group] = {k: difference(a[group][k], b[group][k]) for k in a[group]}
    return out


def without_flags(tree):
    """`tree` minus the per-query flags and example ids (kept in eval JSON files, too long for numbers.json)."""
    if isinstance(tree, dict):
        return {k: without_flags(v) for k, v in tree.items() if k not in ("answered_flags", "query_examples")}
    if isinstance(tree, list):
        return [without_flags(v) for v in tree]
    return tree
