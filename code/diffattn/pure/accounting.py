"""Lesson 04: what DIFF V1 and DIFF V2 cost: parameters, KV cache, FLOPs and decode arithmetic intensity (stdlib only).

Every variant is sized from one baseline Transformer layer: D = hidden (d_model), h = baseline query heads,
d = head width (h·d = D), h_kv = baseline KV heads (h_kv = h is MHA). Weights per layer, no biases anywhere (both
official modules use bias=False):

    variant       official module                              q_proj    k_proj, v_proj   o_proj   λ             norm
    baseline      Transformer, h query heads                   D·h·d     D·h_kv·d each    h·d·D    -             -
    baseline_2h   Transformer, 2h query heads (V2's peer)      D·2h·d    D·h_kv·d each    2h·d·D   -             -
    diff_v1       MultiheadDiffAttn(D, depth, h/2, h_kv/2)     D·h·d     D·h_kv·d each    h·d·D    4·d (vectors) 2·d (subln)
    diff_v2       MultiheadFlashDiffV2(D, h, h_kv, d)          D·2h·d    D·h_kv·d each    h·d·D    D·h (W_λ)     -

V1 keeps the baseline's width and halves the head *count*: h/2 differential heads, each with two d-wide query/key maps
and one 2d-wide value. V2 doubles the *query* heads only; pairs (2i, 2i+1) share a KV head, and W_O stays h·d → D.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import NamedTuple

from diffattn.core.errors import require, require_positive
from diffattn.pure import variants
from diffattn.pure.variants import COMPONENTS, KERNEL_ROWS, VARIANTS, CacheLayout, KernelCall

KERNELS = variants.KERNELS


class _RowLabels(Mapping):
    """Labels of table columns (live): every variant's, then each kernel row's (V1 2-call)."""

    def _keys(self) -> list[str]:
        return list(dict.fromkeys([*VARIANTS, *KERNEL_ROWS]))

    def __getitem__(self, key: str) -> str:
        return variants.LABELS[key] if key in variants.LABELS else variants.row_label(key)

    def __iter__(self):
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())


LABELS = _RowLabels()


def require_counts(**sizes: int) -> None:
    """Every keyword must be a positive integer (a count of heads, layers, tokens, bytes ...)."""
    for name, value in sizes.items():
        require(isinstance(value, int) and not isinstance(value, bool), f"{name} must be an integer (got {value!r})")
    require_positive(**sizes)


def check_layout(variant: str, heads: int, head_dim: int, kv_heads: int | None = None, hidden: int | None = None,
                 head_dim_free: bool = False) -> int:
    """Validate a head layout for `variant` and return h_kv (None means MHA, h_kv = h).

    DIFF V2 also needs each query pair (2i, 2i+1) inside one GQA group of size g = 2h/h_kv, i.e. g even; that is
    exactly h_kv | h, the baseline's own condition, so the kv_heads check covers it.
    head_dim_free: the model sets d apart from hidden (Hugging Face's `head_dim`: Qwen3-4B has 32 × 128 = 4096 query
    width at hidden 2560). The baseline and V2 take any d (the official V2 module has a head_dim argument); V1's
    official module derives d = hidden / h, so V1 still needs h·d = hidden.
    """
    spec = variants.get(variant)
    kv_heads = heads if kv_heads is None else kv_heads
    if hidden is not None:
        require_counts(hidden=hidden)
    require_counts(heads=heads, head_dim=head_dim, kv_heads=kv_heads)
    if hidden is not None and not (head_dim_free and not spec.base.paired_heads):
        require(hidden % heads == 0, f"heads must divide hidden (got hidden={hidden}, heads={heads})")
        require(heads * head_dim == hidden,
                f"heads × head_dim must equal hidden (got {heads} × {head_dim} = {heads * head_dim}, hidden={hidden})")
    require(heads % kv_heads == 0, f"kv_heads must divide heads (got heads={heads}, kv_heads={kv_heads})")
    if spec.base.paired_heads:
        require(heads % 2 == 0, f"{spec.label} needs an even number of heads: it has heads/2 differential heads "
                                f"(got heads={heads})")
        require(kv_heads % 2 == 0, f"{spec.label} needs an even kv_heads: it has kv_heads/2 KV heads "
                                   f"(got kv_heads={kv_heads})")
    require((heads * spec.heads_factor) % (kv_heads * spec.kv_factor) == 0,
            f"{spec.name} has {heads * spec.heads_factor} query heads over {kv_heads * spec.kv_factor} KV heads: "
            f"the KV heads must divide the query heads")
    return kv_heads


# ---------------------------------------------------------------------------------------------------- parameters


def attention_components(variant: str, hidden: int, heads: int, head_dim: int, kv_heads: int | None = None,
                         head_dim_free: bool = False) -> dict[str, int]:
    """Weights of one attention module by official name (COMPONENTS order; 0 where the variant has none)."""
    kv_heads = check_layout(variant, heads, head_dim, kv_heads, hidden, head_dim_free)
    spec = variants.get(variant)
    parts = dict.fromkeys(COMPONENTS, 0)
    parts.update(spec.base.components(hidden, heads * spec.heads_factor, head_dim, kv_heads * spec.kv_factor))
    return parts


def attention_params(variant: str, hidden: int, heads: int, head_dim: int, kv_heads: int | None = None) -> int:
    """Parameters of one attention module; `heads` is the baseline's h (V1 builds h/2 differential heads)."""
    return sum(attention_components(variant, hidden, heads, head_dim, kv_heads).values())


def swiglu_width(hidden: int, multiple_of: int = 256) -> int:
    """LLaMA's SwiGLU width: ⌊8/3·D⌋ rounded up to a multiple of 256 (D = 4096 → 11008)."""
    require_counts(hidden=hidden, multiple_of=multiple_of)
    return -(-(8 * hidden // 3) // multiple_of) * multiple_of


def ffn_params(hidden: int, ffn: int) -> int:
    """SwiGLU (swish(x W_G) ⊙ x W_1) W_2: two D × F matrices in, one F × D out."""
    return 3 * hidden * ffn


def norm_params(hidden: int) -> int:
    """The layer's two pre-norm RMSNorm weights (before attention, before the FFN), D each."""
    return 2 * hidden


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only model, described by its baseline Transformer; every variant is derived from it.

    kv_heads None → MHA (h_kv = h); ffn None → `swiglu_width(hidden)`; vocab None → no embedding counts.
    The config must be valid for all four variants, so it also needs V1's even head counts; with head_dim_free
    (a real model's own head_dim, see `check_layout`) only the baseline, the 2h model and V2 are checked here, and V1
    where it is asked for.
    """

    hidden: int
    heads: int
    head_dim: int
    layers: int
    kv_heads: int | None = None
    ffn: int | None = None
    vocab: int | None = None
    head_dim_free: bool = False

    def __post_init__(self) -> None:
        kv_heads = self.heads if self.kv_heads is None else self.kv_heads
        require_counts(hidden=self.hidden, heads=self.heads, head_dim=self.head_dim, layers=self.layers, kv_heads=kv_heads)
        ffn = swiglu_width(self.hidden) if self.ffn is None else self.ffn
        require_counts(ffn=ffn, **({} if self.vocab is None else {"vocab": self.vocab}))
        for variant in variants.ATTENTION:  # the kinds; a derived variant is checked where it is asked for
            if not (self.head_dim_free and variants.get(variant).base.paired_heads):
                check_layout(variant, self.heads, self.head_dim, kv_heads, self.hidden, self.head_dim_free)
        object.__setattr__(self, "kv_heads", kv_heads)  # frozen: resolve the defaults once, here
        object.__setattr__(self, "ffn", ffn)


def layer_params(config: ModelConfig, variant: str) -> dict[str, int]:
    """One block: attention + SwiGLU + its two RMSNorm weights."""
    attention = sum(attention_components(variant, config.hidden, config.heads, config.head_dim, config.kv_heads,
                                         config.head_dim_free).values())
    parts = {"attention": attention, "ffn": ffn_params(config.hidden, config.ffn), "norms": norm_params(config.hidden)}
    return {**parts, "total": sum(parts.values())}


def model_params(config: ModelConfig, variant: str, tied_embeddings: bool = False) -> dict[str, int]:
    """Whole model: L blocks + final RMSNorm + token embedding + LM head (untied by default, as in LLaMA)."""
    embedding = (config.vocab or 0) * config.hidden
    parts = {
        "layers": config.layers * layer_params(config, variant)["total"],
        "final_norm": config.hidden,
        "embedding": embedding,
        "lm_head": 0 if tied_embeddings else embedding,
    }
    return {**parts, "total": sum(parts.values())}


def matmul_params(config: ModelConfig, variant: str) -> int:
    """Weights each token is multiplied by: every *_proj, the FFN and the LM head.

    V1's λ vectors are combined once per forward pass and its subln weight is elementwise, so neither counts; V2's
    W_λ is a per-token projection and does.
    """
    parts = attention_components(variant, config.hidden, config.heads, config.head_dim, config.kv_heads,
                                 config.head_dim_free)
    per_layer = sum(n for name, n in parts.items() if name.endswith("_proj")) + ffn_params(config.hidden, config.ffn)
    return config.layers * per_layer + (config.vocab or 0) * config.hidden


# ---------------------------------------------------------------------------------------------------- KV cache


def cache_layout(variant: str, heads: int, head_dim: int, kv_heads: int | None = None) -> CacheLayout:
    """V1 caches h_kv/2 heads, each with keys k1‖k2 (2d) and one 2d value; everything else caches h_kv heads of d."""
    kv_heads = check_layout(variant, heads, head_dim, kv_heads)
    spec = variants.get(variant)
    return spec.base.cache(heads * spec.heads_factor, head_dim, kv_heads * spec.kv_factor)


def kv_cache_bytes_per_token(variant: str, layers: int, heads: int, head_dim: int, kv_heads: int | None = None,
                             bytes_per_value: int = 2) -> int:
    """Bytes of K and V cached per token for the whole model (bytes_per_value 2 = bf16)."""
    cache = cache_layout(variant, heads, head_dim, kv_heads)
    require_counts(layers=layers, bytes_per_value=bytes_per_value)
    return layers * cache.kv_heads * (cache.key_width + cache.value_width) * bytes_per_value


# ---------------------------------------------------------------------------------------------------- FLOPs


def kernel_calls(variant: str, heads: int, head_dim: int, kv_heads: int | None = None,
                 v1_kernel: str = "two_call") -> tuple[KernelCall, ...]:
    """The attention-kernel calls one layer makes (V1 has two official paths and our fused CPU kernel, counted as a
    second call without values; other variants ignore v1_kernel)."""
    kv_heads = check_layout(variant, heads, head_dim, kv_heads)
    require(v1_kernel in KERNELS, f"v1_kernel must be one of {', '.join(KERNELS)} (got {v1_kernel!r})")
    spec = variants.get(variant)
    return spec.base.calls(heads * spec.heads_factor, head_dim, kv_heads * spec.kv_factor, v1_kernel)


def attention_flops_per_token(variant: str, heads: int, head_dim: int, context: int, kv_heads: int | None = None,
                              v1_kernel: str = "two_call") -> int:
    """Forward FLOPs per token of one layer's attention core (Q Kᵀ and A·V), causal prefill of `context` tokens.

    Convention (the causal count of FlashAttention's benchmarks): a query sees context/2 keys on average, and each key costs 2·d_qk FLOPs for the
    score plus 2·d_v for the weighted value (2 FLOPs per multiply-add): 2 · context/2 · (d_qk + d_v) per map.
    """
    require_counts(context=context)
    calls = kernel_calls(variant, heads, head_dim, kv_heads, v1_kernel)
    return sum(call.query_heads * context * (call.key_width + call.value_width) for call in calls)


def forward_flops_per_token(config: ModelConfig, variant: str, context: int, v1_kernel: str = "two_call") -> dict[str, int]:
    """Whole-model forward FLOPs per token: attention core (above) + 2 FLOPs per matmul weight."""
    core = config.layers * attention_flops_per_token(variant, config.heads, config.head_dim, context, config.kv_heads,
                                                     v1_kernel)
    parts = {"attention_core": core, "projections": 2 * matmul_params(config, variant)}
    return {**parts, "total": sum(parts.values())}


def decode_kv_read_bytes(variant: str, heads: int, head_dim: int, kv_heads: int | None = None, bytes_per_value: int = 2,
                         v1_kernel: str = "two_call") -> int:
    """Bytes one layer reads per cached token to decode one new token: each kernel call reads its own K and V."""
    require_counts(bytes_per_value=bytes_per_value)
    calls = kernel_calls(variant, heads, head_dim, kv_heads, v1_kernel)
    return sum(call.kv_heads * (call.key_width + call.value_width) for call in calls) * bytes_per_value


def decode_flops_per_byte(variant: str, heads: int, head_dim: int, kv_heads: int | None = None, bytes_per_value: int = 2,
                          v1_kernel: str = "two_call") -> float:
    """Arithmetic intensity of the decode attention step, FLOPs per byte of KV read; the context length cancels.

    One new query sees all T cached keys: 2·(d_qk + d_v) FLOPs per key and query head, against the bytes above.
    """
    calls = kernel_calls(variant, heads, head_dim, kv_heads, v1_kernel)
    flops = sum(2 * call.query_heads * (call.key_width + call.value_width) for call in calls)
    return flops / decode_kv_read_bytes(variant, heads, head_dim, kv_heads, bytes_per_value, v1_kernel)


class DecodeStep(NamedTuple):
    """What one decode step of the whole model computes and moves (lesson 12's roofline is built on it)."""

    flops: int
    bytes: int

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved."""
        return self.flops / self.bytes


def decode_step_bytes(config: ModelConfig, variant: str, context: int, bytes_per_value: int = 2,
                      v1_kernel: str = "two_call") -> int:
    """Bytes one decode step moves at batch 1: every matmul weight once, plus the KV reads at `context` cached tokens.

    Weights are taken in the cache's dtype. At batch 1 both terms are memory-bound, so this is what sets the speed.
    """
    require_counts(context=context)
    per_token = decode_kv_read_bytes(variant, config.heads, config.head_dim, config.kv_heads, bytes_per_value, v1_kernel)
    return matmul_params(config, variant) * bytes_per_value + config.layers * context * per_token


# ---------------------------------------------------------------------------------------------------- the table


def accounting_table(config: ModelConfig, context: int = 131072, bytes_per_value: int = 2) -> dict:
    """Every number `diffattn accounting` prints, as a JSON-ready dict (format it with `format_table`)."""
    require_counts(context=context, bytes_per_value=bytes_per_value)
    geometry = (config.heads, config.head_dim, config.kv_heads)
    params, kv_cache = {}, {}
    shown = [v for v in VARIANTS if variants.fits(v, config.heads, config.kv_heads)]  # a variant that fits the shape
    for variant in shown:
        layer = layer_params(config, variant)
        params[variant] = {
            **attention_components(variant, config.hidden, *geometry),
            **{name: layer[name] for name in ("attention", "ffn", "norms")},
            "layer": layer["total"],
            "model": model_params(config, variant)["total"],
        }
        per_token = kv_cache_bytes_per_token(variant, config.layers, *geometry, bytes_per_value)
        kv_cache[variant] = {"bytes_per_token": per_token, "bytes_at_context": per_token * context}
    flops, decode = {}, {}
    for row, (variant, kernel) in ((r, vk) for r, vk in KERNEL_ROWS.items() if vk[0] in shown):
        flops[row] = forward_flops_per_token(config, variant, context, kernel)
        read = decode_kv_read_bytes(variant, *geometry, bytes_per_value, kernel) * config.layers
        decode[row] = {
            "kv_bytes_read_per_token": read,
            "kv_read_vs_cache": read / kv_cache[variant]["bytes_per_token"],
            "flops_per_byte": decode_flops_per_byte(variant, *geometry, bytes_per_value, kernel),
            "step_bytes": decode_step_bytes(config, variant, context, bytes_per_value, kernel),
        }
    reference = variants.REFERENCE
    for row in flops:
        flops[row]["attention_core_vs_baseline"] = flops[row]["attention_core"] / flops[reference]["attention_core"]
        decode[row]["step_bytes_vs_baseline"] = decode[row]["step_bytes"] / decode[reference]["step_bytes"]
    record = {key: value for key, value in asdict(config).items() if key != "head_dim_free"}  # the table has V1: False
    return {"config": record, "context": context, "bytes_per_value": bytes_per_value, "params": params,
            "kv_cache": kv_cache, "flops_per_token": flops, "decode": decode}


def human_bytes(n: float) -> str:
    """1024-based units, e.g. 131072 → '128.0 KiB', 17179869184 → '16.00 GiB'."""
    for unit, scale, decimals in (("GiB", 2**30, 2), ("MiB", 2**20, 2), ("KiB", 2**10, 1)):
        if n >= scale:
            return f"{n / scale:.{decimals}f} {unit}"
    return f"{n:.0f} B"


def format_table(table: dict) -> str:
    """The text form of `accounting_table`: parameters by component, KV cache, FLOPs, decode traffic."""
    c, params, flops, decode = table["config"], table["params"], table["flops_per_token"], table["decode"]
    columns, kernel_rows = list(params), list(flops)  # the variants that fit the table's shape

    def counts(key: str) -> list[str]:
        return [f"{params[v][key]:,}" if params[v][key] else "-" for v in columns]

    rows: list[tuple[str, list[str]] | None] = [("parameters per layer", [LABELS[v] for v in columns])]  # None: blank line
    rows += [(name, counts(name)) for name in (*COMPONENTS, "attention", "ffn", "norms", "layer")]
    reference = params[variants.REFERENCE]["attention"]
    rows.append(("attention vs baseline", [f"{params[v]['attention'] - reference:+,}" for v in columns]))
    rows += [("whole model", counts("model")), None, ("KV cache", [LABELS[v] for v in columns])]
    rows.append(("per token", [human_bytes(table["kv_cache"][v]["bytes_per_token"]) for v in columns]))
    rows.append((f"at {table['context']:,} tokens", [human_bytes(table["kv_cache"][v]["bytes_at_context"]) for v in columns]))
    rows += [None, ("forward GFLOP per token", [LABELS[r] for r in kernel_rows])]
    rows += [(key.replace("_", " "), [f"{flops[r][key] / 1e9:.2f}" for r in kernel_rows])
             for key in ("attention_core", "projections", "total")]
    rows.append(("core vs baseline", [f"{flops[r]['attention_core_vs_baseline']:.2f}×" for r in kernel_rows]))
    rows += [None, ("decode one new token", [LABELS[r] for r in kernel_rows])]
    rows.append(("KV bytes read / cache", [f"{decode[r]['kv_read_vs_cache']:.2f}×" for r in kernel_rows]))
    rows.append(("FLOPs / byte of KV read", [f"{decode[r]['flops_per_byte']:.2f}" for r in kernel_rows]))
    rows.append(("step bytes, batch 1", [human_bytes(decode[r]["step_bytes"]) for r in kernel_rows]))
    rows.append(("step bytes vs baseline", [f"{decode[r]['step_bytes_vs_baseline']:.2f}×" for r in kernel_rows]))
    width = 2 + max(len(cell) for entry in rows if entry for cell in entry[1])
    lines = [
        f"hidden {c['hidden']}, {c['heads']} heads × d {c['head_dim']}, {c['kv_heads']} KV heads, {c['layers']} layers, "
        f"FFN {c['ffn']}, vocab {c['vocab'] or 'none'}; {table['bytes_per_value']} bytes per cached value; "
        f"context {table['context']:,}",
        "",
    ]
    lines += [f"  {entry[0]:<24}" + "".join(f"{cell:>{width}}" for cell in entry[1]) if entry else "" for entry in rows]
    lines += ["", "FLOPs: forward, causal prefill (a query sees context/2 keys on average), 2 FLOPs per multiply-add.",
              "Decode: one new token; each kernel call reads the K and V it uses for every cached token; a step at",
              "batch 1 also reads every matmul weight once (weights in the cache's dtype)."]
    return "\n".join(lines)
