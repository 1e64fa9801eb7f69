"""Null models for the retrieval tasks: what a rule that never matches the asked key scores on the same examples.

An accuracy means nothing without them. On `needles` with one record in the context, copying "the value that is
there" answers every query without reading a key; with two records it answers about half. Each rule below gives, for
every asked key of an example, the probability that it answers correctly (a random rule in expectation, exactly):

    copy_any         copy the value of a record drawn uniformly from the context
    copy_unanswered  the same, but never a value the example's earlier queries already answered
    copy_latest      copy the value of the last record before the queries (the most recent binding)
    chance           guess a value uniformly from the task's alphabet (10^-L for L digits)
    any_binding      (not key-free) find the asked key, then copy one of its bindings uniformly: what a model that
                     matches keys but ignores which binding came last scores; 1 on needles/mqar, 1/2 on `rebind`

The **key-free null** of a set of queries is the best of the first four rules' mean scores on those queries: the
best a fixed rule reaches without matching the key. A model "retrieves" only where it beats it with a paired test
(`diffattn.core.stats.clustered_difference`, clustered by example because the queries of one haystack share it).
"""

from __future__ import annotations

from typing import Iterable

from diffattn.data.retrieval import DIGITS, LOWER, UPPER, Example

KEY_FREE = ("copy_any", "copy_unanswered", "copy_latest", "chance")
RULES = KEY_FREE + ("any_binding",)


def _alphabet(value: bytes) -> int:
    """How many symbols one value byte is drawn from: digits (needles) or lower-case letters (mqar, rebind)."""
    for alphabet in (DIGITS, LOWER, UPPER):
        if all(b in alphabet for b in value):
            return len(alphabet)
    raise ValueError(f"value {value!r} is not drawn from one of the tasks' alphabets")


def _share(values: list[bytes], target: bytes) -> float:
    return sum(v == target for v in values) / len(values) if values else 0.0


def example_nulls(e: Example) -> dict[str, list[float]]:
    """Per rule, one probability per asked key of `e` (in `e.queries` order)."""
    if not e.records:
        raise ValueError("this example lists no records: build it with diffattn.data.retrieval")
    context = [r.value for r in e.records]
    out: dict[str, list[float]] = {rule: [] for rule in RULES}
    answered: list[bytes] = []
    for q in e.queries:
        unanswered = [v for v in context if v not in answered]
        out["copy_any"].append(_share(context, q.value))
        out["copy_unanswered"].append(_share(unanswered, q.value) if unanswered else _share(context, q.value))
        out["copy_latest"].append(float(context[-1] == q.value))
        out["chance"].append(_alphabet(q.value) ** -len(q.value))
        out["any_binding"].append(_share([r.value for r in e.records if r.key == q.key], q.value))
        answered.append(q.value)
    return out


def query_nulls(items: Iterable[Example]) -> dict[str, list[float]]:
    """Per rule, one probability per asked key of every example, in order (the order `answered` flags come in)."""
    out: dict[str, list[float]] = {rule: [] for rule in RULES}
    for e in items:
        for rule, values in example_nulls(e).items():
            out[rule] += values
    return out


def best_key_free(nulls: dict[str, list[float]]) -> str:
    """The key-free rule with the highest mean on these queries (the first such rule on a tie)."""
    return max(KEY_FREE, key=lambda rule: sum(nulls[rule]))


def clusters(items: Iterable[Example]) -> list[int]:
    """The example index of every asked key: queries of one example share its haystack."""
    return [i for i, e in enumerate(items) for _ in e.queries]
