"""Lesson 13: what a config.json leaves to transformers, by model_type, and what the planner cannot model (stdlib only).

    DEFAULTS         the layout fields transformers' configuration class fills in when a file omits them
    layer_kinds      which layers slide, by the rule the model's own transformers code applies
    experts          a mixture-of-experts FFN: (experts, active per token, expert width, MoE layers), or refused
    refuse_unknown   attention the planner's accounting cannot count (latent or chunked attention): one-line refusal

A real config.json is not the model: transformers fills in what the file omits, and each family decides in its own
code which layers slide. Read naively, Gemma 2's `sliding_window: 4096` makes every layer slide, while its modeling
code slides only the even ones; Qwen2.5's `sliding_window: 131072` is switched off by `use_sliding_window: false`.
Sizes (hidden, heads, layers, FFN, positions) are never filled in: a file without them is refused, not planned with
another model's numbers. Sources are transformers' own files, src/transformers/models/<type>/configuration_<type>.py
and modeling_<type>.py (github.com/huggingface/transformers), named at each rule.
"""

from __future__ import annotations

from diffattn.core.errors import require

FULL, SLIDING = "full_attention", "sliding_attention"

# Only the fields that change what the planner counts; the numbers are the configuration classes' defaults.
DEFAULTS: dict[str, dict] = {
    # Gemma2Config: head_dim 256, num_key_value_heads 4, sliding_window 4096, tie_word_embeddings True
    "gemma2": {"head_dim": 256, "num_key_value_heads": 4, "sliding_window": 4096, "tie_word_embeddings": True},
    # Gemma3TextConfig: the same, plus sliding_window_pattern 6 ("for configuring HybridCache to work with 5:1")
    "gemma3_text": {"head_dim": 256, "num_key_value_heads": 4, "sliding_window": 4096, "sliding_window_pattern": 6,
                    "tie_word_embeddings": True},
    # MistralConfig / MixtralConfig: 8 KV heads; Mistral slides over 4096 unless the file says null, Mixtral's
    # default is no window
    "mistral": {"num_key_value_heads": 8, "sliding_window": 4096, "tie_word_embeddings": False},
    "mixtral": {"num_key_value_heads": 8, "sliding_window": None, "tie_word_embeddings": False},
    # Qwen2Config / Qwen3Config: use_sliding_window False switches sliding_window off; Qwen3's head_dim is 128
    "qwen2": {"use_sliding_window": False, "max_window_layers": 28, "tie_word_embeddings": False},
    "qwen3": {"head_dim": 128, "use_sliding_window": False, "max_window_layers": 28, "tie_word_embeddings": False},
    "qwen3_moe": {"use_sliding_window": False, "tie_word_embeddings": False},
    # Phi3Config: no sliding window unless the file sets one; num_key_value_heads None means one per head
    "phi3": {"sliding_window": None, "tie_word_embeddings": False},
    # LlamaConfig: untied embeddings; Llama has no sliding window at all (LlamaAttention passes none)
    "llama": {"tie_word_embeddings": False},
}
# model_type -> the rule its modeling code uses to pick the sliding layers when the file lists no layer_types
RULES = {
    "gemma2": "alternate",  # Gemma2Config: "sliding_attention" if bool((i + 1) % 2): the even layers slide
    "gemma3_text": "pattern",  # Gemma 3: layer i is global when (i + 1) % sliding_window_pattern == 0 (5 local : 1)
    "qwen2": "qwen", "qwen3": "qwen",  # only with use_sliding_window, then the layers i >= max_window_layers
    "qwen3_moe": "qwen",  # Qwen3MoeConfig has no max_window_layers: with use_sliding_window, every layer
    # config.sliding_window goes to every layer's attention call: read in modeling_phi3.py (Phi3Attention passes
    # sliding_window=getattr(self.config, "sliding_window", None)); Mistral's and Mixtral's attention, which Phi-3's
    # follows, do the same (their modeling files' logic as known, not re-read for this table)
    "mistral": "every", "mixtral": "every", "phi3": "every",
    "llama": "none",
}


def with_defaults(raw: dict, model_type: str) -> tuple[dict, list[str]]:
    """The config with its family's defaults filled in where the file has no such key, and a note for each; the keys
    that only pick the sliding layers are left alone when the file lists its layer_types."""
    filled, notes = dict(raw), []
    listed = {"sliding_window_pattern", "use_sliding_window", "max_window_layers"} if "layer_types" in raw else set()
    for key, value in DEFAULTS.get(model_type, {}).items():
        if key not in raw and key not in listed:
            filled[key] = value
            notes.append(f"{key} is absent: transformers' {model_type} default {value}")
    return filled, notes


def _positive(raw: dict, key: str, where: str) -> int:
    value = raw[key]
    require(isinstance(value, int) and not isinstance(value, bool) and value > 0,
            f"{key} must be a positive integer in {where} (got {value!r})")
    return value


def layer_kinds(raw: dict, model_type: str, layers: int, where: str) -> tuple[tuple[str, ...], int | None, list[str]]:
    """(FULL or SLIDING per layer, the window, notes): layer_types when the file lists them (transformers ≥ 4.53 and 5
    write them), else the family's rule; a model type the planner does not know slides every layer when it sets a
    sliding_window (unless use_sliding_window is false), and the plan says it assumed so."""
    window, notes = raw.get("sliding_window"), []
    types = raw.get("layer_types")
    if types is not None:
        require(isinstance(types, list) and len(types) == layers,
                f"layer_types must list one type per layer ({layers}) in {where} (got {types!r:.80})")
        unknown = sorted({t for t in types if t not in (FULL, SLIDING)}, key=str)
        require(not unknown, f"layer_types has {', '.join(map(str, unknown))} in {where}: the planner models only "
                             f"{FULL} and {SLIDING} layers")
        kinds = tuple(types)
    else:
        rule = RULES.get(model_type)
        if rule is None and window is not None and raw.get("use_sliding_window") is not False:
            notes.append(f"model_type {model_type!r} lists no layer_types: every layer is assumed to slide over "
                         f"sliding_window {window}")
        kinds = tuple(SLIDING if _slides(raw, rule, i) else FULL for i in range(layers))
    if SLIDING not in kinds:
        return kinds, None, notes
    require(window is not None, f"{where} has sliding_attention layers but no sliding_window")
    return kinds, _positive(raw, "sliding_window", where), notes


def _slides(raw: dict, rule: str | None, i: int) -> bool:
    if raw.get("sliding_window") is None or rule == "none":
        return False
    if rule == "alternate":
        return i % 2 == 0
    if rule == "pattern":
        return (i + 1) % _positive(raw, "sliding_window_pattern", "the config") != 0
    if rule == "qwen":
        return raw.get("use_sliding_window") is True and i >= raw.get("max_window_layers", 0)
    return raw.get("use_sliding_window") is not False  # "every", and a model type the planner does not know


def experts(raw: dict, layers: int, dense_ffn: int, where: str) -> tuple[int, int, int, int]:
    """(experts, active experts per token, expert FFN width, layers with experts) of a mixture-of-experts FFN;
    (1, 1, dense_ffn, 0) for a dense model.

    Mixtral: num_local_experts experts of intermediate_size, num_experts_per_tok of them per token, in every layer.
    Qwen3-MoE: num_experts of moe_intermediate_size; layer i has experts unless it is in mlp_only_layers or
    (i + 1) % decoder_sparse_step != 0 (Qwen3MoeDecoderLayer), a dense intermediate_size FFN otherwise. Each MoE
    layer adds its router, a bias-free hidden → experts projection. Shared experts (Qwen2-MoE, DeepSeek) are refused.
    """
    count = raw.get("num_local_experts") or raw.get("num_experts") or raw.get("n_routed_experts")
    if not count:
        return 1, 1, dense_ffn, 0
    shared = {k: raw[k] for k in ("shared_expert_intermediate_size", "n_shared_experts", "first_k_dense_replace")
              if raw.get(k)}
    require(not shared, f"{where} has shared or leading dense experts ({', '.join(f'{k} {v}' for k, v in shared.items())}):"
                        " the planner counts only routed experts; plan this model by hand")
    count = _positive({"experts": count}, "experts", where)
    require(raw.get("num_experts_per_tok") is not None, f"{where} has {count} experts but no num_experts_per_tok")
    active = _positive(raw, "num_experts_per_tok", where)
    require(active <= count, f"num_experts_per_tok {active} exceeds the {count} experts in {where}")
    width = _positive(raw, "moe_intermediate_size", where) if raw.get("moe_intermediate_size") else dense_ffn
    step = raw.get("decoder_sparse_step") or 1
    dense_layers = set(raw.get("mlp_only_layers") or [])
    moe_layers = sum(1 for i in range(layers) if i not in dense_layers and (i + 1) % step == 0)
    return (count, active, width, moe_layers) if moe_layers else (1, 1, dense_ffn, 0)


UNMODELLED = {
    "kv_lora_rank": "multi-head latent attention (DeepSeek-V2/V3): its cache holds a compressed latent of "
                    "kv_lora_rank plus a shared RoPE key per token, not h_kv·d keys and values",
    "q_lora_rank": "multi-head latent attention (DeepSeek-V2/V3): queries and keys come through low-rank "
                   "projections, not one W_Q, W_K and W_V per layer",
    "attention_chunk_size": "chunked attention (each query sees only its own chunk of attention_chunk_size tokens)",
}


def refuse_unknown(raw: dict, where: str) -> None:
    """One ConfigError line when the attention is of a kind lesson 04's accounting cannot count."""
    for key, what in UNMODELLED.items():
        require(raw.get(key) is None, f"{where} sets {key} {raw.get(key)!r}: {what}; the planner models only "
                                      "multi-head, grouped-query and multi-query attention, so it does not plan "
                                      "this model")
