"""Lesson 07: a small GPT whose attention layer is the baseline, DIFF V1 or DIFF V2.

    x_0     = E[tokens]                                          (b, N, d_model); E is also the output head (tied)
    y_l     = x_l + Attn_l(RMSNorm(x_l), rope, cache_l)           pre-norm residual blocks, no biases, no dropout
    x_{l+1} = y_l + SwiGLU(RMSNorm(y_l))                          SwiGLU(x) = W_down(silu(W_gate x) ⊙ W_up x)
    logits  = RMSNorm(x_L) Eᵀ                                     (b, N, vocab)

`GPTConfig.n_head` is always the *baseline* head count h_base; the variant decides how the attention layer spends it
(the parameter matching of lesson 04, now as real modules, see `matched_configs`):

    baseline     h_base heads of d, h_kv KV heads                   MultiheadAttention(d_model, h_base, h_kv, d)
    diff_v1      h_base/2 differential heads: Q/K width d, V width 2d   DiffAttentionV1(d_model, depth, h_base/2, h_kv/2)
                 same projections as the baseline, + 4d (λ vectors) + 2d (subln weight) per layer
    diff_v2      2·h_base query heads, h_base output heads, h_kv KV heads   DiffAttentionV2(d_model, h_base, h_kv, d)
                 baseline + d_model·h·d (second half of W_Q) + d_model·h (W_λ) per layer

V2 is compared against two baselines: the same-heads baseline above and the same-query-width baseline
(`baseline` with 2·h_base heads of d and the same h_kv KV heads), which has V2's W_Q but a W_O twice as wide.

Embeddings are tied by default (`tie_embeddings=True`, as in GPT-2 and nanoGPT): with a real tokenizer's vocabulary,
vocab·d_model is the largest matrix of a small model, and sharing it cannot favour a variant, since the variants
differ only inside attention. `tie_embeddings=False` gives the LLaMA-style untied head.
"""

from __future__ import annotations

import importlib
from typing import Mapping, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from diffattn.config import INIT_STD, GPTConfig
from diffattn.core.errors import ConfigError, require
from diffattn.nn.attention import state_dict_variant
from diffattn.nn.cache import Cache, new_cache
from diffattn.nn.norm import RMSNorm
from diffattn.nn.rope import rope_cos_sin
from diffattn.pure import variants

def attention_layer(config: GPTConfig, depth: int) -> nn.Module:
    """The attention module of block `depth` (0-based; DIFF V1's λ_init(depth) schedule depends on it), built by the
    module class its kind declares (diffattn.pure.variants)."""
    return module_class(config.attention).from_config(config, depth)


def module_class(kind: str) -> type[nn.Module]:
    """The torch module class a kind names ("package.module:Class" in diffattn.pure.variants), imported here."""
    path, _, name = variants.get(kind).base.module.partition(":")
    return getattr(importlib.import_module(path), name)


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.w_gate = nn.Linear(d_model, hidden, bias=False)
        self.w_up = nn.Linear(d_model, hidden, bias=False)
        self.w_down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))  # (b, N, hidden) gate ⊙ value → (b, N, d_model)


class Block(nn.Module):
    def __init__(self, config: GPTConfig, depth: int):
        super().__init__()
        self.attn_norm = RMSNorm(config.d_model, eps=config.norm_eps)
        self.attn = attention_layer(config, depth)
        self.ffn_norm = RMSNorm(config.d_model, eps=config.norm_eps)
        self.ffn = SwiGLU(config.d_model, config.ffn_hidden)

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor], cache: Cache | None = None) -> Tensor:
        x = x + self.attn(self.attn_norm(x), rope, cache)
        return x + self.ffn(self.ffn_norm(x))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config, depth) for depth in range(config.n_layer))
        self.norm = RMSNorm(config.d_model, eps=config.norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(_init_weights)
        for block in self.blocks if config.out_std != INIT_STD else ():  # redrawn only when changed: same RNG
            projection = getattr(block.attn, "out_proj", None) or block.attn.o_proj  # V2 calls it o_proj
            nn.init.normal_(projection.weight, mean=0.0, std=config.out_std)
        if config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight

    def new_caches(self, kind: str = "cat", capacity: int | None = None) -> list[Cache]:
        """One empty KV cache per block, for `forward(..., caches)` and `diffattn.model.generate`: "cat" grows by
        torch.cat, "static" preallocates `capacity` positions (default max_seq_len) and writes them in place."""
        return [new_cache(kind, capacity or self.config.max_seq_len) for _ in self.blocks]

    def forward(self, tokens: Tensor, caches: Sequence[Cache] | None = None) -> Tensor:
        """tokens (b, N) int64 → logits (b, N, vocab).

        With `caches`, `tokens` continue the sequence the caches hold: they sit at positions len(cache) … len+N−1,
        each block appends their K/V to its cache and attends over cached + new keys (causal, bottom-right aligned).
        """
        start = self._check_input(tokens, caches)
        x = self.tok_emb(tokens)  # (b, N, d_model)
        if self.config.embed_scale != 1.0:
            x = x * self.config.embed_scale
        # cos, sin: (N, d/2) for positions start … start+N−1, kept in ≥ fp32 even for a bf16 model (angles grow with p)
        rope = rope_cos_sin((start, tokens.shape[1]), self.config.head_dim, base=self.config.rope_base,
                            device=x.device, dtype=torch.promote_types(x.dtype, torch.float32))
        for i, block in enumerate(self.blocks):
            x = block(x, rope, None if caches is None else caches[i])
        return self.lm_head(self.norm(x))

    def _check_input(self, tokens: Tensor, caches: Sequence[Cache] | None) -> int:
        """Bad input fails here with a one-line ConfigError instead of deep inside a kernel; returns the start position."""
        # every forward: plain comparisons, one reduction; a message is built only when a check fails
        if tokens.dim() != 2:
            raise ConfigError(f"tokens must be (batch, seq) (got shape {tuple(tokens.shape)})")
        if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
            raise ConfigError(f"tokens must be an integer tensor (got {tokens.dtype})")
        device = self.tok_emb.weight.device
        if tokens.device != device:
            raise ConfigError(f"tokens are on {tokens.device} but the model is on {device}")
        if tokens.numel() == 0:
            raise ConfigError("tokens must hold at least one token")
        # In eager mode only: under torch.compile this data-dependent test would break the graph every step (the
        # trainer's batches come from the tasks, whose ids are in range by construction)
        if not torch.compiler.is_compiling() and not bool(((tokens >= 0) & (tokens < self.config.vocab_size)).all()):
            raise ConfigError(f"token ids must lie in [0, {self.config.vocab_size}) "
                              f"(got {int(tokens.min())} … {int(tokens.max())})")
        start = 0
        if caches is not None:
            if len(caches) != len(self.blocks):
                raise ConfigError(f"need one KV cache per block: {len(self.blocks)}, got {len(caches)}")
            start = len(caches[0])
        end = start + tokens.shape[1]
        if end > self.config.max_seq_len:
            raise ConfigError(f"positions {start} … {end - 1} exceed max_seq_len {self.config.max_seq_len}")
        return start

    def load_state_dict(self, state_dict: Mapping[str, Tensor], strict: bool = True, assign: bool = False):
        """`nn.Module.load_state_dict`, but a checkpoint of another variant or shape fails with one line naming it."""
        check_checkpoint(self, state_dict, strict)
        return super().load_state_dict(state_dict, strict=strict, assign=assign)


def _init_weights(module: nn.Module) -> None:
    """N(0, 0.02) for every Linear and the embedding (GPT-2): the tied head then starts with logits ≈ 0, loss ≈ ln V.
    DIFF V1's λ vectors are plain Parameters, so they keep their own N(0, 0.1²) init."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)


def checkpoint_variant(state_dict: Mapping[str, Tensor]) -> str | None:
    """Which attention variant a GPT state dict was saved from (None if it has no first block), read off the
    parameter names only that variant's attention module has (`diffattn.nn.attention.state_dict_variant`)."""
    prefix = "blocks.0.attn."
    found = state_dict_variant(key[len(prefix):] for key in state_dict if key.startswith(prefix))
    return next((kind for kind in variants.ATTENTION if module_class(kind).VARIANT == found), None)


def check_checkpoint(model: GPT, state_dict: Mapping[str, Tensor], strict: bool = True) -> None:
    """Raise ConfigError unless `state_dict` fits `model`: same variant, same tensor shapes, same keys (if strict)."""
    found, expected = checkpoint_variant(state_dict), model.config.attention
    require(found in (None, expected), f"checkpoint is a {found} model but this GPT has attention={expected!r}")
    own = model.state_dict()
    for key, value in state_dict.items():
        if key in own:
            require(tuple(value.shape) == tuple(own[key].shape),
                    f"checkpoint {key} has shape {tuple(value.shape)}, this model's is {tuple(own[key].shape)}: "
                    f"the configs differ (heads, KV heads, head_dim, d_model or vocab)")
    if strict:
        missing, unexpected = sorted(set(own) - set(state_dict)), sorted(set(state_dict) - set(own))
        require(not missing and not unexpected,
                f"checkpoint keys differ from this model's (n_layer or tie_embeddings?): "
                f"missing {missing[:3]}, unexpected {unexpected[:3]}")


def parameter_breakdown(model: GPT) -> dict[str, int]:
    """Parameter counts by part; a tied output head is counted once (under embedding)."""
    parts = {"embedding": 0, "attention": 0, "ffn": 0, "norms": 0, "lm_head": 0}
    for name, p in model.named_parameters():  # named_parameters yields a tied weight once
        part = name.split(".")[2] if name.startswith("blocks.") else name.split(".")[0]
        key = {"tok_emb": "embedding", "attn": "attention", "ffn": "ffn", "lm_head": "lm_head"}.get(part, "norms")
        parts[key] += p.numel()
    parts["attention_per_layer"] = parts["attention"] // model.config.n_layer
    parts["total"] = sum(p.numel() for p in model.parameters())
    return parts

