"""Lesson 08: what the trainer trains on. Every task is next-token prediction over bytes (vocabulary 256):

    text      English text (diffattn.data.text): every target counts
    needles   multi-needle key→value retrieval (diffattn.data.retrieval, lesson 09): only the answer bytes count
    mqar      multi-query associative recall (diffattn.data.retrieval): only the answer bytes count
    rebind    associative recall in which keys are rebound and only the latest binding answers (lesson 09)

A task gives `batch(batch_size, seq_len, generator)` → (inputs, targets), each LongTensor (B, T), targets −100
(ignored by the loss) where nothing is asked, and a fixed validation set `validation(count, seq_len)`. Nothing is
downloaded: text ships with the package, retrieval examples are generated on the fly from a seed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from diffattn.data import retrieval, text
from diffattn.core.errors import require
from diffattn.core.names import TASKS

VOCAB_SIZE = 256
IGNORE_INDEX = -100
VALIDATION_SEED = 2_147_483_647  # retrieval validation examples: a generator no training seed reaches


class TextTask:
    def __init__(self, seq_len: int, data: str | Path | None = None):
        self.train_tokens, self.val_tokens = text.split(text.read_corpus(data), seq_len)

    def batch(self, batch_size: int, seq_len: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        return text.random_windows(self.train_tokens, batch_size, seq_len, generator)

    def validation(self, count: int, seq_len: int) -> tuple[Tensor, Tensor]:
        return text.evenly_spaced_windows(self.val_tokens, count, seq_len)


class RetrievalTask:
    def __init__(self, name: str, seq_len: int, options: dict[str, Any]):
        self.name, self.options = name, options
        self.batch(1, seq_len, torch.Generator().manual_seed(0))  # a bad option or a too-short context fails now
        if name == "needles":  # and one that only the largest layout (drawn later) would not fit
            need = retrieval.longest_needles(options)
            require(seq_len + 1 >= need, f"seq_len {seq_len} is too short for the largest needles layout these "
                                         f"options draw (needs >= {need - 1})")

    def batch(self, batch_size: int, seq_len: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        return retrieval.task_batch(self.name, batch_size, seq_len, generator, **self.options)

    def validation(self, count: int, seq_len: int) -> tuple[Tensor, Tensor]:
        return retrieval.collate(self.validation_examples(count, seq_len))

    def validation_examples(self, count: int, seq_len: int) -> list[retrieval.Example]:
        """The validation set as examples (with their queries and records), for accuracy and its null models."""
        return retrieval.examples(self.name, count, seq_len, torch.Generator().manual_seed(VALIDATION_SEED),
                                  **self.options)


def make_task(name: str, seq_len: int, data: str | Path | None = None,
              options: dict[str, Any] | None = None) -> TextTask | RetrievalTask:
    """The task `name`; ConfigError for an unknown name, unusable --data, or --data given to a synthetic task."""
    require(name in TASKS, f"task must be one of {', '.join(TASKS)} (got {name!r})")
    if name == "text":
        require(not options, f"the text task takes no options (got {options})")
        return TextTask(seq_len, data)
    require(data is None, f"--data is for the text task; {name} is generated on the fly")
    return RetrievalTask(name, seq_len, options or {})
