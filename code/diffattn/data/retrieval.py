"""Synthetic retrieval tasks on bytes: multi-needle key→value lookup (the paper's Table 2 in miniature) and MQAR.

Every token is a byte (vocabulary 256), so one model trains on text and on these tasks. Everything is drawn from a
`torch.Generator`, so a seed fixes every example; the trainer (`task_batch`) and the evaluators (`examples`, with
spans and positions) run the same code.

needles   a haystack of filler (lowercase letters and spaces) with N records `#KEY=VAL` hidden in it, then R queries
          `?KEY=VAL` for R of the N keys. KEY is upper-case letters, VAL digits. The N − R records nobody asks about are
          distractors; by default their keys are near-duplicates of the queried keys (one letter changed), so a model
          that matches keys approximately copies the wrong value. `depth` ∈ [0, 1] places the queried records at that
          fraction of the haystack (0: right after the start, 1: just before the queries), as in the paper's §3.4.

              | ff#QKV=31fffff#QKW=77ffffffffff … ff?QKV=31|        (seq_len + 1 bytes; inputs = [:-1], targets = [1:])

mqar      multi-query associative recall (Zoology's MQAR): P pairs `Kv` (key: upper-case letter, value: lower-case
          letter) at the start, dots as padding, then `|` and R queries `Kv` at the end: after each queried key the
          model must emit its value. `pad="end"` puts the padding after the queries instead, so the queries follow
          the pairs directly (the padding then changes nothing a causal model sees before an answer).

              AbCdEfGh ………………………… |EfAb               pad="between" (the default)
              AbCdEfGh|EfAb …………………………               pad="end"

rebind    associative recall where keys are bound more than once and only the latest binding answers: K keys, B of
          them bound a second time to a different value, the K + B pairs `Kv` in a random order, padding, then `|`
          and R queries. `ask="rebound"` (the default) asks only rebound keys, `ask="all"` any of the K keys (a clean
          key has one binding, a rebound one two); `pad` places the padding as for mqar. The earlier binding shares
          the asked key, so it is the kind of in-context noise differential attention claims to cancel: a model that
          finds the key but not the latest binding scores 1/2 on a rebound key (`diffattn.data.nulls`).

              AbCdAxEf ………………………… |Ax                           (A was bound to b, then to x: the answer is x)

Targets are −100 (PyTorch's ignore_index) everywhere except on the answer tokens: the R values. Exact match means every
answer token is the argmax of its row; with teacher forcing that equals greedy decoding of the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch import Tensor

from diffattn.core.errors import ConfigError, require

IGNORE = -100
# A value byte counts as answered when it is the argmax of its row by at least this margin over the runner-up: with
# teacher forcing that is greedy decoding, and a kernel that moves logits by 1e-6 cannot flip a decision 1e-3 clear.
MARGIN = 1e-3
UPPER = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = b"abcdefghijklmnopqrstuvwxyz"
DIGITS = b"0123456789"
FILLER = LOWER + b" "
NEEDLE, QUERY, EQUALS, BAR, PAD = ord("#"), ord("?"), ord("="), ord("|"), ord(".")
# The paper's Table 2 layout: (N needles, R queried keys). Training draws uniformly from these.
TABLE2 = ((1, 1), (2, 2), (4, 2), (6, 2))
PADDING = ("between", "end")  # where mqar's and rebind's padding goes: between the context and the queries, or last
ASKED = ("rebound", "all")  # which keys rebind asks


@dataclass(frozen=True)
class Query:
    """One asked key. Spans are [start, end) positions in the example's inputs (tokens[:-1])."""

    key: bytes
    value: bytes
    record: tuple[int, int]  # where `#KEY=VAL` (needles) or `Kv` (mqar) sits in the context
    answer: tuple[int, int]  # the input positions whose targets are the value's bytes


@dataclass(frozen=True)
class Record:
    """One key→value binding in the context, in the order the context holds them."""

    key: bytes
    value: bytes
    span: tuple[int, int]


@dataclass(frozen=True)
class Example:
    tokens: tuple[int, ...]  # seq_len + 1 bytes
    queries: tuple[Query, ...]
    distractors: tuple[tuple[int, int], ...]  # spans of records nobody asks about
    context_end: int  # inputs [0, context_end) are the haystack with its records; the queries follow
    depth: float | None = None
    records: tuple[Record, ...] = ()  # every binding in the context, in order (what the null models copy from)

    @property
    def inputs(self) -> list[int]:
        return list(self.tokens[:-1])

    @property
    def targets(self) -> list[int]:
        """Next-token targets, IGNORE except at answer positions."""
        out = [IGNORE] * (len(self.tokens) - 1)
        for q in self.queries:
            for p in range(*q.answer):
                out[p] = self.tokens[p + 1]
        return out

    def text(self) -> str:
        return decode(self.tokens)


def decode(tokens) -> str:
    """Bytes as text (latin-1, so every byte is one character)."""
    return bytes(int(t) for t in tokens).decode("latin-1")


def _randint(g: torch.Generator, low: int, high: int) -> int:
    """One integer in [low, high)."""
    return int(torch.randint(low, high, (1,), generator=g))


def _word(g: torch.Generator, alphabet: bytes, length: int) -> bytes:
    return bytes(alphabet[i] for i in torch.randint(0, len(alphabet), (length,), generator=g).tolist())


def _near_duplicate(g: torch.Generator, key: bytes) -> bytes:
    """`key` with one letter replaced by a different one."""
    pos = _randint(g, 0, len(key))
    letter = UPPER[(UPPER.index(key[pos]) + _randint(g, 1, len(UPPER))) % len(UPPER)]
    return key[:pos] + bytes([letter]) + key[pos + 1:]


def needles_length(n_needles: int, n_queries: int, key_len: int, value_len: int) -> int:
    """Bytes the records and queries take, before any filler: the shortest seq_len + 1 that fits them."""
    return (n_needles + n_queries) * (key_len + value_len + 2)


def _counts(g: torch.Generator, n_needles: int | None, n_queries: int | None) -> tuple[int, int]:
    if n_needles is None and n_queries is None:
        return TABLE2[_randint(g, 0, len(TABLE2))]
    if n_needles is None:
        n_needles = max(n_queries, TABLE2[_randint(g, 0, len(TABLE2))][0])
    if n_queries is None:
        n_queries = min(n_needles, 2)
    return n_needles, n_queries


def longest_needles(options: dict[str, Any]) -> int:
    """The bytes the largest layout these `needles` options can draw needs (records and queries, no filler): a
    context shorter than this would fail on some later batch, so the trainer checks it once, up front."""
    n, r = options.get("n_needles"), options.get("n_queries")
    layouts = [(n, r if r is not None else min(n, 2))] if n is not None else (
        TABLE2 if r is None else [(max(r, big), r) for big, _ in TABLE2])
    return max(needles_length(a, b, options.get("key_len", 1), options.get("value_len", 1)) for a, b in layouts)


def needle_example(generator: torch.Generator, seq_len: int, n_needles: int | None = None,
                   n_queries: int | None = None, depth: float | None = None, key_len: int = 1, value_len: int = 1,
                   near_duplicates: bool = True) -> Example:
    """One multi-needle example of seq_len + 1 bytes. None draws N, R from TABLE2 and each record's place uniformly.

    The defaults (1-letter keys, 1-digit values) are what the cpu-tiny preset can learn in its 150 steps: with 2-letter
    keys a 2-layer model stayed at chance (answer loss ln 10) for 400 steps, with 1-letter keys it was at about half
    of the answers after 150 (a measurement of this repository's first version; lesson 09 reports the real runs).
    With 1-letter keys every other key is a "near-duplicate"; key_len=2 and up make the distractors meaningful."""
    g = generator
    n_needles, n_queries = _counts(g, n_needles, n_queries)
    require(1 <= n_queries <= n_needles, f"need 1 <= n_queries <= n_needles (got R={n_queries}, N={n_needles})")
    require(key_len >= 1 and value_len >= 1, f"key_len and value_len must be >= 1 (got {key_len}, {value_len})")
    require(n_needles <= len(UPPER) ** key_len // 2, f"{n_needles} needles need longer keys than {key_len} letters")
    require(depth is None or 0.0 <= depth <= 1.0, f"depth must lie in [0, 1] (got {depth})")
    record_len = key_len + value_len + 2
    filler_len = seq_len + 1 - needles_length(n_needles, n_queries, key_len, value_len)
    require(filler_len >= 0, f"seq_len {seq_len} is too short for {n_needles} needles and {n_queries} queries "
                             f"(needs >= {seq_len - filler_len})")

    keys: list[bytes] = []
    while len(keys) < n_queries:  # the asked keys: distinct, random
        key = _word(g, UPPER, key_len)
        keys += [key] if key not in keys else []
    while len(keys) < n_needles:  # the distractors: near-duplicates of the asked keys, or random
        key = _near_duplicate(g, keys[len(keys) % n_queries]) if near_duplicates else _word(g, UPPER, key_len)
        keys += [key] if key not in keys else []
    values = [_word(g, DIGITS, value_len) for _ in keys]

    # where each record goes: an offset into the filler (records at one offset keep their order)
    offsets = [_randint(g, 0, filler_len + 1) for _ in keys]
    if depth is not None:
        offsets[:n_queries] = [round(depth * filler_len)] * n_queries
    order = sorted(range(n_needles), key=lambda i: (offsets[i], i))
    filler = _word(g, FILLER, filler_len)

    tokens, spans, done = bytearray(), {}, 0
    for i in order:
        tokens += filler[done:offsets[i]]
        done = offsets[i]
        spans[i] = (len(tokens), len(tokens) + record_len)
        tokens += bytes([NEEDLE]) + keys[i] + bytes([EQUALS]) + values[i]
    tokens += filler[done:]
    context_end = len(tokens)

    asked = [int(i) for i in torch.randperm(n_queries, generator=g)]  # the order the keys are asked in
    queries = []
    for i in asked:
        start = len(tokens)
        tokens += bytes([QUERY]) + keys[i] + bytes([EQUALS]) + values[i]
        first = start + key_len + 1  # the `=`: its target is the value's first byte
        queries.append(Query(keys[i], values[i], spans[i], (first, first + value_len)))
    assert len(tokens) == seq_len + 1
    distractors = tuple(spans[i] for i in range(n_queries, n_needles))
    records = tuple(Record(keys[i], values[i], spans[i]) for i in order)
    return Example(tuple(tokens), tuple(queries), distractors, context_end, depth, records)


def _check_padding(pad: str) -> None:
    require(pad in PADDING, f"pad must be one of {', '.join(PADDING)} (got {pad!r})")


def _padded(tokens: bytearray, count: int, pad: str) -> int:
    """Append `count` padding bytes where `pad="between"` wants them (before the queries); the context's end."""
    if pad == "between":
        tokens += bytes([PAD]) * count
    return len(tokens)


def mqar_example(generator: torch.Generator, seq_len: int, n_pairs: int = 8, n_queries: int = 4,
                 pad: str = "between") -> Example:
    """One MQAR example: n_pairs key-value pairs, then n_queries of the keys with their values; the padding between
    the two (pad="between") or after the queries (pad="end")."""
    g = generator
    require(1 <= n_queries <= n_pairs <= len(UPPER),
            f"need 1 <= n_queries <= n_pairs <= {len(UPPER)} (got n_queries={n_queries}, n_pairs={n_pairs})")
    _check_padding(pad)
    used = 2 * n_pairs + 1 + 2 * n_queries
    require(seq_len + 1 >= used, f"seq_len {seq_len} is too short for {n_pairs} pairs and {n_queries} queries "
                                 f"(needs >= {used - 1})")
    keys = [UPPER[i] for i in torch.randperm(len(UPPER), generator=g)[:n_pairs].tolist()]
    values = [LOWER[i] for i in torch.randint(0, len(LOWER), (n_pairs,), generator=g).tolist()]
    tokens = bytearray()
    for k, v in zip(keys, values):
        tokens += bytes([k, v])
    context_end = _padded(tokens, seq_len + 1 - used, pad)
    tokens += bytes([BAR])
    asked = torch.randperm(n_pairs, generator=g)[:n_queries].tolist()
    queries = []
    for i in asked:
        tokens += bytes([keys[i], values[i]])
        queries.append(Query(bytes([keys[i]]), bytes([values[i]]), (2 * i, 2 * i + 2), (len(tokens) - 2, len(tokens) - 1)))
    tokens += bytes([PAD]) * (seq_len + 1 - len(tokens))  # pad="end": the rest (nothing for "between")
    distractors = tuple((2 * i, 2 * i + 2) for i in range(n_pairs) if i not in asked)
    records = tuple(Record(bytes([k]), bytes([v]), (2 * i, 2 * i + 2)) for i, (k, v) in enumerate(zip(keys, values)))
    return Example(tuple(tokens), tuple(queries), distractors, context_end, None, records)


def rebind_example(generator: torch.Generator, seq_len: int, n_keys: int = 8, n_rebinds: int = 4,
                   n_queries: int = 2, ask: str = "rebound", pad: str = "between") -> Example:
    """One rebinding example: n_keys keys, n_rebinds of them bound twice (the second value differs from the first),
    the bindings in a random order, then n_queries keys with their latest values: rebound keys only (ask="rebound")
    or any key (ask="all"); the padding between bindings and queries (pad="between") or after the queries."""
    g = generator
    require(1 <= n_keys <= len(UPPER), f"need 1 <= n_keys <= {len(UPPER)} (got n_keys={n_keys})")
    require(1 <= n_rebinds <= n_keys, f"need 1 <= n_rebinds <= n_keys (got n_rebinds={n_rebinds}, n_keys={n_keys})")
    require(ask in ASKED, f"ask must be one of {', '.join(ASKED)} (got {ask!r})")
    _check_padding(pad)
    if ask == "rebound":
        require(1 <= n_queries <= n_rebinds, f"every query asks a rebound key: need 1 <= n_queries <= n_rebinds "
                                             f"(got n_queries={n_queries}, n_rebinds={n_rebinds})")
    else:
        require(1 <= n_queries <= n_keys, f"need 1 <= n_queries <= n_keys (got n_queries={n_queries}, "
                                          f"n_keys={n_keys})")
    used = 2 * (n_keys + n_rebinds) + 1 + 2 * n_queries
    require(seq_len + 1 >= used, f"seq_len {seq_len} is too short for {n_keys} keys, {n_rebinds} rebindings and "
                                 f"{n_queries} queries (needs >= {used - 1})")
    keys = [UPPER[i] for i in torch.randperm(len(UPPER), generator=g)[:n_keys].tolist()]
    rebound = torch.randperm(n_keys, generator=g)[:n_rebinds].tolist()
    events = list(range(n_keys)) + rebound  # one event per binding, named by its key's index
    events = [events[i] for i in torch.randperm(len(events), generator=g).tolist()]
    latest: dict[int, int] = {}
    tokens, records = bytearray(), []
    for k in events:
        value = LOWER[_randint(g, 0, len(LOWER))]
        while k in latest and value == latest[k]:  # a rebinding always changes the value
            value = LOWER[_randint(g, 0, len(LOWER))]
        latest[k] = value
        records.append(Record(bytes([keys[k]]), bytes([value]), (len(tokens), len(tokens) + 2)))
        tokens += bytes([keys[k], value])
    context_end = _padded(tokens, seq_len + 1 - used, pad)
    tokens += bytes([BAR])
    queries = []
    asked_keys = ([rebound[i] for i in torch.randperm(n_rebinds, generator=g)[:n_queries].tolist()] if ask == "rebound"
                  else torch.randperm(n_keys, generator=g)[:n_queries].tolist())
    for k in asked_keys:
        answer = next(r for r in reversed(records) if r.key == bytes([keys[k]]))
        tokens += bytes([keys[k], latest[k]])
        queries.append(Query(answer.key, answer.value, answer.span, (len(tokens) - 2, len(tokens) - 1)))
    tokens += bytes([PAD]) * (seq_len + 1 - len(tokens))  # pad="end": the rest
    asked = {q.record for q in queries}
    distractors = tuple(r.span for r in records if r.span not in asked)
    assert len(tokens) == seq_len + 1
    return Example(tuple(tokens), tuple(queries), distractors, context_end, None, tuple(records))


BUILDERS = {"needles": needle_example, "mqar": mqar_example, "rebind": rebind_example}
TASKS = tuple(BUILDERS)


def examples(task: str, batch_size: int, seq_len: int, generator: torch.Generator, **options: Any) -> list[Example]:
    """`batch_size` examples of `task`, drawn one after another from `generator`."""
    require(task in BUILDERS, f"task must be one of {', '.join(BUILDERS)} (got {task!r})")
    require(batch_size > 0 and seq_len > 0, f"batch_size and seq_len must be > 0 (got {batch_size}, {seq_len})")
    try:
        return [BUILDERS[task](generator, seq_len, **options) for _ in range(batch_size)]
    except TypeError as exc:  # an option this task does not have
        raise ConfigError(f"{task}: {exc}") from None


def collate(batch: list[Example]) -> tuple[Tensor, Tensor]:
    """(inputs, targets), each LongTensor (B, T)."""
    return (torch.tensor([e.inputs for e in batch], dtype=torch.long),
            torch.tensor([e.targets for e in batch], dtype=torch.long))


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


def task_batch(task: str, batch_size: int, seq_len: int, generator: torch.Generator,
               **options: Any) -> tuple[Tensor, Tensor]:
    """What the trainer calls: inputs and targets (B, seq_len), targets −100 except on the answer bytes."""
    return collate(examples(task, batch_size, seq_len, generator, **options))
