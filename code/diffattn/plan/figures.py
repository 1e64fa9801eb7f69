"""Lesson 13: the numbers of a plan, each computed by lessons 04 and 12's code for one real architecture (stdlib only).

    layer_table    per variant: the attention module's weights by official name, projection shapes, the delta against
                   each fair baseline, KV cache, forward FLOPs per token, V1's λ_init per layer
    decode_table   per variant: one decode step's bytes and roofline time at batch 1, and the crossover batch B*
    budget_cost    the extra training FLOPs a DIFF variant costs over a token budget

Fair baselines (lesson 04): every variant is sized from the model's own layer (h heads of d, h_kv KV heads); V2's
peer with the same query width is `baseline_2h` (2h query heads). V1 exists only where its official module can be
built: h·d = hidden (it derives d from hidden) and even h and h_kv; elsewhere its row says why.
Sliding-window layers (Gemma 2 and 3, Mistral, Phi-3) cache and attend to at most `window` tokens; the figures count
that. A mixture-of-experts FFN (Mixtral, Qwen3-MoE) holds every expert's weights but runs `active_experts` of them per
token: lesson 04 counts one dense FFN per layer, and `expert_extra` adds the rest (the attention deltas, which DIFF
changes, do not depend on it).
"""

from __future__ import annotations

import math

from diffattn.core.errors import ConfigError
from diffattn.core.hardware import DATASHEET_BF16
from diffattn.pure.variants import REFERENCE, VARIANTS
from diffattn.plan.hfconfig import SLIDING, Architecture, model_config
from diffattn.pure import accounting, roofline
from diffattn.pure.attention import lambda_init

# The default machine of a plan's decode figures: an H200 SXM at its datasheet ceilings (NVIDIA's specifications:
# 989 TFLOP/s dense bf16, 4.8 TB/s HBM3e), the machine lesson 12 works its example on.
H200 = {"name": "H200 SXM (datasheet)", "peak_flops": DATASHEET_BF16["H200"], "bandwidth": 4.8e12}
V1_KERNEL = "two_call"  # the official recommended path (multihead_flashdiff_1: two calls, each reading a 2d value)


def expert_extra(arch: Architecture) -> tuple[int, int]:
    """(weights, weights each token is multiplied by) that the model's FFNs hold beyond lesson 04's count of one FFN
    of width `arch.ffn` per layer: per MoE layer the other experts (all of them held, active − 1 of them run) and its
    router (hidden → experts, no bias, always run); per dense layer of an MoE model, its own width. (0, 0) when dense."""
    if arch.experts == 1:
        return 0, 0
    one, router = accounting.ffn_params(arch.hidden, arch.ffn), arch.hidden * arch.experts
    dense = (arch.layers - arch.moe_layers) * (accounting.ffn_params(arch.hidden, arch.dense_ffn or arch.ffn) - one)
    held = arch.moe_layers * ((arch.experts - 1) * one + router) + dense
    run = arch.moe_layers * ((arch.active_experts - 1) * one + router) + dense
    return held, run


def _components(arch: Architecture, variant: str) -> dict[str, int]:
    return accounting.attention_components(variant, arch.hidden, arch.heads, arch.head_dim, arch.kv_heads,
                                           head_dim_free=True)


def applicable(arch: Architecture) -> dict[str, str | None]:
    """None for each variant the architecture can take, else the one-line reason it cannot."""
    reasons = {}
    for variant in VARIANTS:
        try:
            _components(arch, variant)
            reasons[variant] = None
        except ConfigError as exc:
            reasons[variant] = str(exc)
    return reasons


def shapes(parts: dict[str, int], hidden: int) -> dict[str, str]:
    """Each projection as 'in → out' widths, read back from its weight count (every projection has hidden on one side)."""
    widths = {"q_proj": ("D", parts["q_proj"] // hidden), "k_proj": ("D", parts["k_proj"] // hidden),
              "v_proj": ("D", parts["v_proj"] // hidden), "o_proj": (parts["o_proj"] // hidden, "D"),
              "lambda_proj": ("D", parts["lambda_proj"] // hidden)}
    return {name: f"{a} → {b}".replace("D", str(hidden)) for name, (a, b) in widths.items() if parts[name]}


def attended_keys(arch: Architecture, context: int) -> float:
    """Σ over layers of the keys an average query of a causal prefill of `context` tokens attends to, times two.

    Lesson 04's convention counts context/2 keys per query for a full layer, so a full layer contributes `context`;
    a sliding layer's query t sees min(t, W) keys, on average W − W²/(2·context) when context > W.
    """
    def doubled_mean(kind: str) -> float:
        window = arch.window if kind == SLIDING else None
        return context if window is None or context <= window else 2 * window - window * window / context
    return sum(doubled_mean(kind) for kind in arch.layer_types)


def layer_table(arch: Architecture, context: int, bytes_per_value: int = 2) -> dict:
    """Per variant: weights, shapes, deltas, KV cache and FLOPs; inapplicable variants carry their reason."""
    config = model_config(arch)
    held, run = expert_extra(arch)
    rows: dict[str, dict] = {}
    for variant, why_not in applicable(arch).items():
        if why_not:
            rows[variant] = {"applicable": False, "why_not": why_not}
            continue
        parts = _components(arch, variant)
        per_layer_token = accounting.kv_cache_bytes_per_token(variant, 1, arch.heads, arch.head_dim, arch.kv_heads,
                                                              bytes_per_value)
        core_unit = accounting.attention_flops_per_token(variant, arch.heads, arch.head_dim, 1, arch.kv_heads, V1_KERNEL)
        projections = accounting.forward_flops_per_token(config, variant, context, V1_KERNEL)["projections"] + 2 * run
        core = core_unit * attended_keys(arch, context)
        rows[variant] = {
            "applicable": True,
            "components": parts,
            "shapes": shapes(parts, arch.hidden),
            "attention_per_layer": sum(parts.values()),
            "model_params": accounting.model_params(config, variant, arch.tied_embeddings)["total"] + held,
            "kv_bytes_per_token_per_layer": per_layer_token,
            "kv_bytes_at_context": per_layer_token * arch.cached_tokens(context),
            "forward_flops_per_token": {"attention_core": core, "projections": projections,
                                        "total": core + projections},
        }
    base = rows["baseline"]
    for variant, row in rows.items():
        if row["applicable"]:
            row["delta"] = {peer: _delta(row, rows[peer]) for peer in ("baseline", "baseline_2h")
                            if rows[peer]["applicable"] and peer != variant}
    if rows["diff_v1"]["applicable"]:
        rows["diff_v1"]["lambda_init"] = [lambda_init(depth) for depth in range(arch.layers)]
    return {"context": context, "bytes_per_value": bytes_per_value, "cached_tokens": arch.cached_tokens(context),
            "baseline_kv_bytes_at_context": base["kv_bytes_at_context"], "variants": rows}


def _delta(row: dict, peer: dict) -> dict:
    flops, peer_flops = row["forward_flops_per_token"]["total"], peer["forward_flops_per_token"]["total"]
    return {"attention_params_per_layer": row["attention_per_layer"] - peer["attention_per_layer"],
            "model_params": row["model_params"] - peer["model_params"],
            "kv_bytes_at_context": row["kv_bytes_at_context"] - peer["kv_bytes_at_context"],
            "forward_flops_ratio": flops / peer_flops}


def decode_table(arch: Architecture, context: int, machine: dict = H200, bytes_per_value: int = 2) -> dict:
    """One decode step at batch 1, and B*, per applicable variant, from lesson 12's roofline.

    Sliding layers hold fewer tokens, so the step is taken at the mean cached length per layer, rounded up: exact for
    all-global models, at most one token per layer over for the others (roofline.decode_step is linear in it).
    A mixture-of-experts step at batch 1 reads and runs only its active experts; its B* counts every expert's weights,
    since at the batches where decode turns compute-bound the tokens reach all of them, and each sequence's FLOPs
    through its active experts."""
    config = model_config(arch)
    held, run = expert_extra(arch)
    mean_cached = math.ceil(arch.cached_tokens(context) / arch.layers)
    peak, bandwidth = machine["peak_flops"], machine["bandwidth"]
    rows = {}
    for variant, why_not in applicable(arch).items():
        if why_not:
            continue
        step = roofline.decode_step(config, variant, mean_cached, 1, bytes_per_value, V1_KERNEL)
        step = accounting.DecodeStep(step.flops + 2 * run, step.bytes + bytes_per_value * run)
        if arch.experts == 1:
            crossover = roofline.crossover_batch(config, variant, mean_cached, peak, bandwidth, bytes_per_value,
                                                 V1_KERNEL)
        else:
            weights = accounting.matmul_params(config, variant)
            crossover = roofline.roofline_crossover(
                bytes_per_value * (weights + held), step.flops, step.bytes - bytes_per_value * (weights + run), peak,
                bandwidth)
        rows[variant] = {"flops": step.flops, "bytes": step.bytes, "seconds": roofline.step_seconds(step, peak, bandwidth),
                         "crossover_batch": crossover,
                         "kv_read_per_token": accounting.decode_kv_read_bytes(
                             variant, arch.heads, arch.head_dim, arch.kv_heads, bytes_per_value, V1_KERNEL)}
    for row in rows.values():
        row["seconds_vs_baseline"] = row["seconds"] / rows["baseline"]["seconds"]
    return {"machine": machine, "mean_cached_tokens": mean_cached, "ridge": roofline.ridge_point(peak, bandwidth),
            "variants": rows}


def budget_cost(layers: dict, tokens: int) -> dict:
    """Training FLOPs over `tokens` per applicable variant (≈ 3 × forward per token) and each one's excess."""
    rows = {v: r for v, r in layers["variants"].items() if r["applicable"]}
    total = {v: 3 * r["forward_flops_per_token"]["total"] * tokens for v, r in rows.items()}
    return {"tokens": tokens, "training_flops": total,
            "excess_vs_baseline": {v: total[v] / total[REFERENCE] - 1 for v in total if v != REFERENCE}}
