"""Lesson 07: decoding with a KV cache, and sampling.

A causal model's logits at position t depend only on tokens 0 … t, and every layer's keys and values at position j
depend only on tokens 0 … j. So the K/V of earlier positions never change as the sequence grows: compute them once,
keep them (the KV cache), and each new token costs one position's work instead of a whole forward pass.

    prefill:  logits[:, :P]  = model(prompt, caches)            every block appends P positions of K/V to its cache
    decode:   logits[:, t]   = model(token_t[:, None], caches)    one query over t+1 cached keys, bottom-right causal

The cached logits equal the full forward pass up to float rounding (same math, different summation order):
`incremental_logits` is that check, `generate` is the loop that uses it.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from diffattn.core.errors import require
from diffattn.model.gpt import GPT
from diffattn.nn.cache import Cache


def sample_next(logits: Tensor, temperature: float = 1.0, top_k: int | None = None,
                generator: torch.Generator | None = None) -> Tensor:
    """logits (b, V) → next token ids (b,).

    temperature 0 is greedy (argmax). Otherwise sample from softmax(logits / temperature), restricted to the top_k
    largest logits when top_k is given; pass a seeded `generator` (on the logits' device) to make sampling repeatable.
    """
    require(logits.dim() == 2, f"logits must be (batch, vocab) (got shape {tuple(logits.shape)})")
    require(math.isfinite(temperature) and temperature >= 0, f"temperature must be finite and >= 0 (got {temperature})")
    require(top_k is None or 1 <= top_k <= logits.shape[-1], f"top_k must be in [1, {logits.shape[-1]}] (got {top_k})")
    if generator is not None:
        require(generator.device == logits.device,
                f"the generator is on {generator.device} but the logits are on {logits.device}")
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (b, 1): the k-th largest logit of each row
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(model: GPT, prompt: Tensor, max_new_tokens: int, *, temperature: float = 1.0, top_k: int | None = None,
             generator: torch.Generator | None = None, use_cache: bool = True, cache: str = "cat") -> Tensor:
    """Extend `prompt` (b, P) by `max_new_tokens` tokens → (b, P + max_new_tokens).

    With use_cache=False every step re-runs the whole sequence: the slow path, kept to show both give the same tokens.
    `cache` picks the KV cache (`diffattn.nn.cache`): "cat" grows by torch.cat, "static" preallocates the positions
    this call needs and writes each step in place (lesson 12 times decode on it).
    """
    require(max_new_tokens >= 0, f"max_new_tokens must be >= 0 (got {max_new_tokens})")
    require(prompt.dim() == 2 and prompt.shape[1] >= 1, f"prompt must be (batch, seq) with seq >= 1 (got {tuple(prompt.shape)})")
    fed = prompt.shape[1] + max_new_tokens - 1  # the last new token is sampled, never fed back to the model
    require(fed <= model.config.max_seq_len,
            f"prompt + new tokens - 1 = {fed} positions exceeds max_seq_len {model.config.max_seq_len}")
    tokens = prompt
    caches = model.new_caches(cache, capacity=max(fed, prompt.shape[1])) if use_cache else None
    step_input = prompt
    for _ in range(max_new_tokens):
        logits = model(step_input, caches) if use_cache else model(tokens)  # (b, n, V)
        next_token = sample_next(logits[:, -1], temperature, top_k, generator)[:, None]  # (b, 1)
        tokens = torch.cat([tokens, next_token], dim=1)
        step_input = next_token  # the cache already holds everything before it
    return tokens


@torch.no_grad()
def incremental_logits(model: GPT, tokens: Tensor, prefill: int = 1, cache: str = "cat") -> tuple[Tensor, list[Cache]]:
    """Logits (b, N, V) for `tokens` (b, N) computed the decoding way: prefill the first `prefill` tokens in one call,
    then one token per call through the caches. Returns the logits and the filled caches (one per block)."""
    require(1 <= prefill <= tokens.shape[1], f"prefill must be in [1, {tokens.shape[1]}] (got {prefill})")
    caches = model.new_caches(cache, capacity=tokens.shape[1])
    steps = [model(tokens[:, :prefill], caches)]
    steps += [model(tokens[:, t:t + 1], caches) for t in range(prefill, tokens.shape[1])]
    return torch.cat(steps, dim=1), caches


def cache_nbytes(caches: list[Cache]) -> int:
    """Bytes of the cached K and V (measured from the tensors, not computed from a config): a static cache counts its
    filled positions, the bytes a decode step reads, not the capacity it reserved."""
    return sum(t.numel() * t.element_size() for cache in caches for t in (cache.k, cache.v) if t is not None)
