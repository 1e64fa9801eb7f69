"""Lesson 08: English text as byte tokens, split train/val, cut into random windows.

The default corpus ships inside the package (nothing is downloaded): `tinyshakespeare.txt`, 1,115,394 bytes of plays
by William Shakespeare (public domain), the selection Andrej Karpathy published as data/tinyshakespeare/input.txt in
github.com/karpathy/char-rnn (commit 6f9487a) and that nanoGPT's character-level example uses. Plain ASCII.

    tokens   = the file's UTF-8 bytes, each an id in [0, 256)           no tokenizer: vocabulary 256, ~1 token per letter
    train    = tokens[: ⌊0.9·n⌋],  val = tokens[⌊0.9·n⌋ :]               a fixed split: the last 10% is held out
    window i = tokens[s_i : s_i + T + 1];  inputs = window[:-1], targets = window[1:]     (T = seq_len)

A real tokenizer (BPE, e.g. tiktoken's cl100k_base, which the paper uses) packs about four bytes of English
into one token, so the same context covers ~4× more text and the loss is per token instead of per byte (compare
models by bits per byte, not by loss, across tokenizers); the vocabulary grows from 256 to ~100k rows, which then
dominates a small model's parameters.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from diffattn.core.errors import ConfigError, require

DEFAULT_CORPUS = Path(__file__).with_name("tinyshakespeare.txt")
VAL_FRACTION = 0.1
TEXT_SUFFIXES = (".txt", ".md", ".rst", ".text")


def read_corpus(path: str | Path | None = None) -> bytes:
    """The bytes of `path` (a UTF-8 file, or a folder whose *.txt/*.md/*.rst files are joined in name order), or of
    the built-in corpus. ConfigError if it is missing, empty, has no text files, or is not UTF-8."""
    path = DEFAULT_CORPUS if path is None else Path(path)
    require(path.exists(), f"--data {path} does not exist")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
        require(bool(files), f"--data {path} is a folder with no text files ({', '.join(TEXT_SUFFIXES)})")
    else:
        files = [path]
    parts = []
    for file in files:
        data = file.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"--data {file} is not UTF-8 text (bad byte at offset {exc.start})") from None
        parts.append(data)
    corpus = b"\n".join(parts)
    require(len(corpus) > 0, f"--data {path} is empty")
    return corpus


def split(corpus: bytes, seq_len: int) -> tuple[Tensor, Tensor]:
    """(train, val) int64 token tensors; each must hold at least one window of seq_len + 1 tokens."""
    tokens = torch.frombuffer(bytearray(corpus), dtype=torch.uint8).long()  # (n,) byte ids
    cut = int(len(tokens) * (1 - VAL_FRACTION))
    train, val = tokens[:cut], tokens[cut:]
    require(len(val) > seq_len, f"the text is too short for seq_len {seq_len}: its validation tenth has {len(val)} "
                                f"bytes, needs more than {seq_len} ({len(corpus)} bytes in all)")
    return train, val


def windows(tokens: Tensor, starts: Tensor, seq_len: int) -> tuple[Tensor, Tensor]:
    """inputs, targets (len(starts), seq_len) for windows beginning at `starts`."""
    offsets = starts[:, None] + torch.arange(seq_len + 1)  # (B, T + 1) positions
    chunk = tokens[offsets]
    return chunk[:, :-1], chunk[:, 1:]


def random_windows(tokens: Tensor, batch_size: int, seq_len: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """`batch_size` windows at uniformly random starts (drawn from `generator`, so a seed fixes the data order)."""
    starts = torch.randint(0, len(tokens) - seq_len, (batch_size,), generator=generator)
    return windows(tokens, starts, seq_len)


def evenly_spaced_windows(tokens: Tensor, count: int, seq_len: int) -> tuple[Tensor, Tensor]:
    """`count` windows spread evenly over `tokens`: the fixed validation set (no randomness)."""
    starts = torch.linspace(0, len(tokens) - seq_len - 1, count).long()
    return windows(tokens, starts, seq_len)
