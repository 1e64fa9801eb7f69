"""Lesson 13: a real model's attention geometry, read from a Hugging Face `config.json` or a course preset (stdlib only).

    Architecture     what the planner needs: widths, heads, layers, positions, RoPE, which layers slide and how far
    read_config      a config.json file (multimodal configs: the `text_config` inside)
    from_dict        the same from a parsed dict (the tests' configs, the shipped examples)
    from_preset      a course preset (cpu-tiny, …, diffattn.config.PRESETS) or a shipped example (EXAMPLES)
    model_config     the Architecture as lesson 04's ModelConfig, so every count comes from diffattn.pure.accounting

Field names are transformers' (Llama, Mistral, Mixtral, Qwen2/3, Gemma 2/3, Phi-3): hidden_size,
num_attention_heads, num_key_value_heads, head_dim, intermediate_size, num_hidden_layers, max_position_embeddings,
vocab_size, rope_theta / rope_scaling (transformers < 5) or rope_parameters (≥ 5, per layer type for Gemma 3),
layer_types or the family's own sliding rule (diffattn.plan.families), the experts of a mixture-of-experts FFN and
attn_logit_softcapping. An explicit head_dim wins over hidden / heads: Qwen3-4B's query width is 32 × 128 = 4096 at
hidden 2560. A field the file omits takes its transformers default where that changes the count (named in the plan's
notes); anything inconsistent, or attention the accounting cannot count, raises ConfigError in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from diffattn.config import PRESETS
from diffattn.core.errors import require
from diffattn.plan import families
from diffattn.plan.families import FULL, SLIDING
from diffattn.pure.accounting import ModelConfig
from diffattn.core.results import read_json

EXAMPLES_DIR = Path(__file__).resolve().parent / "configs"
# The shipped example configs, by name: --preset llama-3.1-8b works like --config EXAMPLES_DIR/llama-3.1-8b.json
EXAMPLES = tuple(sorted(p.stem for p in EXAMPLES_DIR.glob("*.json")))
REQUIRED = ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size", "max_position_embeddings")


@dataclass(frozen=True)
class Architecture:
    """A decoder's attention geometry. `layer_types[i]` is FULL or SLIDING; `window` is the sliding layers' span."""

    source: str
    model_type: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    layers: int
    max_positions: int
    vocab: int | None
    tied_embeddings: bool
    rope: dict  # {"theta": float | None, "scaling": dict | None} of the full-attention layers
    layer_types: tuple[str, ...]
    window: int | None
    notes: tuple[str, ...]  # what the reader assumed (a default it filled in), quoted in the plan
    # a mixture-of-experts FFN: `experts` of width `ffn` in `moe_layers` layers, `active_experts` run per token
    # (the other layers: a dense FFN of `dense_ffn`); dense models keep 1, 1, 0
    experts: int = 1
    active_experts: int = 1
    moe_layers: int = 0
    dense_ffn: int | None = None
    attn_softcap: float | None = None  # attn_logit_softcapping: scores capped as cap·tanh(s/cap) before the softmax

    @property
    def query_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def sliding_layers(self) -> int:
        return self.layer_types.count(SLIDING)

    def cached_tokens(self, context: int) -> int:
        """Tokens held in the KV cache summed over layers: a sliding layer keeps the last `window`, a full one all."""
        return sum(min(context, self.window) if kind == SLIDING else context for kind in self.layer_types)

    def check_context(self, context: int) -> None:
        """A context past max_position_embeddings is refused unless the config scales RoPE."""
        require(isinstance(context, int) and context > 0, f"--context must be a positive integer (got {context!r})")
        require(context <= self.max_positions or self.rope["scaling"] is not None,
                f"context {context:,} exceeds max_position_embeddings {self.max_positions:,} of {self.source} and the "
                f"config declares no rope scaling: the model was never trained or scaled to that length")


def _count(raw: dict, key: str, where: str) -> int:
    value = raw[key]
    require(isinstance(value, int) and not isinstance(value, bool) and value > 0,
            f"{key} must be a positive integer in {where} (got {value!r})")
    return value


def _rope(raw: dict) -> dict:
    """The full-attention layers' RoPE: transformers 5's rope_parameters (flat, or keyed by layer type), else the
    older rope_theta / rope_scaling pair. Scaling counts only when its type is not 'default'."""
    params = raw.get("rope_parameters")
    if isinstance(params, dict):
        if isinstance(params.get(FULL), dict):  # keyed by layer type (Gemma 3): the global layers' RoPE
            params = params[FULL]
        kind = params.get("rope_type", "default")
        scaling = {k: v for k, v in params.items() if k != "rope_theta"} if kind != "default" else None
        return {"theta": params.get("rope_theta"), "scaling": scaling}
    scaling = raw.get("rope_scaling")
    require(scaling is None or isinstance(scaling, dict), f"rope_scaling must be an object or null (got {scaling!r})")
    if scaling is not None and scaling.get("rope_type", scaling.get("type", "default")) == "default":
        scaling = None
    return {"theta": raw.get("rope_theta"), "scaling": scaling}


def from_dict(raw: Any, source: str) -> Architecture:
    """Parse a config.json's content; `source` names it in every message."""
    require(isinstance(raw, dict), f"{source} is not a JSON object")
    outer_type = raw.get("model_type")
    if isinstance(raw.get("text_config"), dict):  # Gemma 3, Llava, …: the language model's config is nested
        raw = raw["text_config"]
    model_type = str(raw.get("model_type") or outer_type or "unknown")
    missing = [key for key in REQUIRED if raw.get(key) is None]
    require(not missing, f"{source} (model_type {model_type!r}) lacks {', '.join(missing)}: the planner reads "
                         f"transformers' decoder fields (Llama, Qwen, Gemma, Mistral names)")
    families.refuse_unknown(raw, source)
    raw, notes = families.with_defaults(raw, model_type)
    hidden, heads = _count(raw, "hidden_size", source), _count(raw, "num_attention_heads", source)
    if raw.get("num_key_value_heads") is None:
        kv_heads = heads
        notes.append("num_key_value_heads is absent: multi-head attention (transformers' default, one KV head per head)")
    else:
        kv_heads = _count(raw, "num_key_value_heads", source)
    require(heads % kv_heads == 0,
            f"num_key_value_heads {kv_heads} does not divide num_attention_heads {heads} in {source}")
    if raw.get("head_dim") is not None:
        head_dim = _count(raw, "head_dim", source)
    else:
        require(hidden % heads == 0, f"head_dim is absent and hidden_size {hidden} is not a multiple of "
                                     f"num_attention_heads {heads} in {source}: no head_dim makes heads × head_dim = "
                                     f"hidden_size; give head_dim")
        head_dim = hidden // heads
        notes.append(f"head_dim is absent: hidden_size / num_attention_heads = {head_dim}")
    vocab = raw.get("vocab_size")
    if vocab is not None:
        vocab = _count(raw, "vocab_size", source)
    layers, dense_ffn = _count(raw, "num_hidden_layers", source), _count(raw, "intermediate_size", source)
    kinds, window, slide_notes = families.layer_kinds(raw, model_type, layers, source)
    experts, active, ffn, moe_layers = families.experts(raw, layers, dense_ffn, source)
    softcap = raw.get("attn_logit_softcapping")
    require(softcap is None or (isinstance(softcap, (int, float)) and not isinstance(softcap, bool) and softcap > 0),
            f"attn_logit_softcapping must be a positive number or null in {source} (got {softcap!r})")
    return Architecture(
        source=source, model_type=model_type, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
        ffn=ffn, layers=layers, max_positions=_count(raw, "max_position_embeddings", source), vocab=vocab,
        tied_embeddings=bool(raw.get("tie_word_embeddings", True)), rope=_rope(raw), layer_types=kinds,
        window=window, notes=tuple(notes + slide_notes), experts=experts, active_experts=active, moe_layers=moe_layers,
        dense_ffn=dense_ffn if experts > 1 else None, attn_softcap=float(softcap) if softcap else None)


def read_config(path: Path | str) -> Architecture:
    """A config.json on disk; unreadable or malformed files raise ConfigError in one line."""
    path = Path(path)
    return from_dict(read_json(path), str(path))


def from_preset(name: str) -> Architecture:
    """A course preset's baseline (its GPTConfig) or a shipped example config, by name."""
    if name in EXAMPLES:
        return replace(read_config(EXAMPLES_DIR / f"{name}.json"), source=f"{name} (shipped example config: "
                                                                         f"code/diffattn/plan/configs/{name}.json)")
    require(name in PRESETS, f"--preset must be one of {', '.join((*PRESETS, *EXAMPLES))} (got {name!r})")
    m = PRESETS[name].model
    return Architecture(
        source=f"preset {name}", model_type="diffattn", hidden=m.d_model, heads=m.n_head, kv_heads=m.n_kv_head,
        head_dim=m.head_dim, ffn=m.ffn_hidden, layers=m.n_layer, max_positions=m.max_seq_len, vocab=m.vocab_size,
        tied_embeddings=m.tie_embeddings, rope={"theta": m.rope_base, "scaling": None},
        layer_types=(FULL,) * m.n_layer, window=None, notes=())


def model_config(arch: Architecture) -> ModelConfig:
    """Lesson 04's ModelConfig of the baseline; head_dim_free, since a real model sets head_dim itself."""
    return ModelConfig(hidden=arch.hidden, heads=arch.heads, head_dim=arch.head_dim, layers=arch.layers,
                       kv_heads=arch.kv_heads, ffn=arch.ffn, vocab=arch.vocab, head_dim_free=True)
