"""Lesson 13: `diffattn plan` on the config.json files of real models (tests/fixtures/plan/, each citing its
Hugging Face address): the KV cache and the V2 delta of every one, recomputed here by hand from the architecture, equal
the plan's JSON; Gemma 2's alternating windows, Gemma 3's 5:1 pattern, Mistral's and Phi-3's all-layer windows and
Qwen2.5's switched-off one are read as transformers reads them; mixture-of-experts FFNs are counted expert by expert;
attention the planner cannot count (DeepSeek's latent attention) is refused in one line."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from diffattn import cli

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "plan"
BF16 = 2  # bytes per cached value: the plan's default


def run_plan(name: str, context: int, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["plan", "--config", str(FIXTURES / f"{name}.json"), "--context", str(context),
                         "--hallucination", "high", "--budget-tokens", "1T", "--mode", "pretrain", *extra])
    return code, out.getvalue(), err.getvalue()


def plan_json(name: str, context: int) -> dict:
    code, text, err = run_plan(name, context, "--json")
    assert code == 0, err
    return json.loads(text)


def test_every_fixture_cites_the_public_config_it_copies():
    names = sorted(p.stem for p in FIXTURES.glob("*.json"))
    assert len(names) >= 10
    for name in names:
        source = json.loads((FIXTURES / f"{name}.json").read_text())["_source"]
        assert source.startswith("https://huggingface.co/") and "/blob/main/config.json" in source, name


# (fixture, context, KV bytes per token per layer, cached layer-tokens, V2's extra attention weights per layer,
#  V1's extra weights per layer or None where V1's module cannot be built). Written out from each model's numbers:
#  a layer caches K and V of h_kv heads of d values, 2 · h_kv · d · 2 bytes per token in bf16; a sliding layer keeps
#  at most its window; V2 adds the second half of W_Q (D × h·d) and W_λ (D × h); V1 adds λq1, λk1, λq2, λk2 (d
#  each) and its per-head norm (2d), and exists only where h·d = D with even head counts.
CASES = [
    # Llama-3.2-3B: D 3072, 24 × 128, 8 KV heads, 28 global layers
    ("llama-3.2-3b-instruct", 8192, 2 * 8 * 128 * BF16, 28 * 8192, 3072 * 24 * 128 + 3072 * 24, 4 * 128 + 2 * 128),
    # Mistral-7B-v0.1: every one of its 32 layers slides over 4,096 tokens
    ("mistral-7b-v0.1", 8192, 2 * 8 * 128 * BF16, 32 * 4096, 4096 * 32 * 128 + 4096 * 32, 4 * 128 + 2 * 128),
    # Mixtral-8x7B: Mistral's attention, no window (sliding_window null)
    ("mixtral-8x7b-v0.1", 32768, 2 * 8 * 128 * BF16, 32 * 32768, 4096 * 32 * 128 + 4096 * 32, 4 * 128 + 2 * 128),
    # Qwen2.5-7B: D 3584, 28 × 128, 4 KV heads; sliding_window 131072 is switched off (use_sliding_window false)
    ("qwen2.5-7b-instruct", 32768, 2 * 4 * 128 * BF16, 28 * 32768, 3584 * 28 * 128 + 3584 * 28, 4 * 128 + 2 * 128),
    # Qwen3-0.6B: D 1024 but 16 × 128 = 2048 query width, so no V1
    ("qwen3-0.6b", 40960, 2 * 8 * 128 * BF16, 28 * 40960, 1024 * 16 * 128 + 1024 * 16, None),
    # Qwen3-30B-A3B: D 2048, 32 × 128, 4 KV heads, 48 global layers
    ("qwen3-30b-a3b", 32768, 2 * 4 * 128 * BF16, 48 * 32768, 2048 * 32 * 128 + 2048 * 32, None),
    # Gemma-2-2B: 13 global layers hold all 8,192 tokens, the 13 even ones their 4,096-token window
    ("gemma-2-2b-it", 8192, 2 * 4 * 256 * BF16, 13 * 8192 + 13 * 4096, 2304 * 8 * 256 + 2304 * 8, None),
    # Gemma-2-27B: 23 global, 23 sliding; 32 × 128 = 4096 ≠ D 4608, so no V1
    ("gemma-2-27b", 8192, 2 * 16 * 128 * BF16, 23 * 8192 + 23 * 4096, 4608 * 32 * 128 + 4608 * 32, None),
    # Gemma-3-1B: one KV head (no V1: it needs an even count); layers 5, 11, 17, 23 global, 22 slide over 512
    ("gemma-3-1b-it", 32768, 2 * 1 * 256 * BF16, 4 * 32768 + 22 * 512, 1152 * 4 * 256 + 1152 * 4, None),
    # Phi-3-mini-4k: MHA, 32 × 96 = D 3072; every layer slides over 2,047 tokens
    ("phi-3-mini-4k-instruct", 4096, 2 * 32 * 96 * BF16, 32 * 2047, 3072 * 32 * 96 + 3072 * 32, 4 * 96 + 2 * 96),
]


@pytest.mark.parametrize("name, context, per_token, cached, v2_delta, v1_delta", CASES, ids=[c[0] for c in CASES])
def test_kv_cache_and_v2_delta_are_the_hand_count(name, context, per_token, cached, v2_delta, v1_delta):
    plan = plan_json(name, context)
    layers, arch = plan["layers"], plan["architecture"]
    rows = layers["variants"]
    assert layers["cached_tokens"] == cached
    assert rows["baseline"]["kv_bytes_per_token_per_layer"] == per_token
    assert rows["baseline"]["kv_bytes_at_context"] == layers["baseline_kv_bytes_at_context"] == per_token * cached
    v2 = rows["diff_v2"]
    assert v2["kv_bytes_at_context"] == per_token * cached  # V2 adds query heads, never KV heads
    assert v2["delta"]["baseline"]["attention_params_per_layer"] == v2_delta
    assert v2["delta"]["baseline"]["kv_bytes_at_context"] == 0
    assert v2["delta"]["baseline"]["model_params"] == arch["layers"] * v2_delta
    if v1_delta is None:
        assert not rows["diff_v1"]["applicable"]
    else:
        assert rows["diff_v1"]["delta"]["baseline"]["attention_params_per_layer"] == v1_delta
        # V1 caches h_kv/2 heads of 2d keys and 2d values: the same bytes as the baseline
        assert rows["diff_v1"]["kv_bytes_at_context"] == per_token * cached


def test_gemma2_slides_its_even_layers_and_flags_its_soft_cap():
    """Gemma-2-2B's config.json says only sliding_window 4096; read as 'every layer slides' its cache at 8,192 tokens
    would be 26 × 4,096 × 4,096 B = 416 MiB; with the alternation it is (13 × 8,192 + 13 × 4,096) × 4,096 B."""
    plan = plan_json("gemma-2-2b-it", 8192)
    kinds = plan["architecture"]["layer_types"]
    assert [i for i, kind in enumerate(kinds) if kind == "sliding_attention"] == list(range(0, 26, 2))
    assert plan["layers"]["baseline_kv_bytes_at_context"] == (13 * 8192 + 13 * 4096) * 4096 == 624 * 2**20
    assert plan["architecture"]["attn_softcap"] == 50.0
    capped = [r for r in plan["caveats"] if "attn_logit_softcapping 50" in r["text"]]
    assert len(capped) == 1 and capped[0]["hypothesis"] and "softcap" in plan["evidence"]
    code, markdown, _ = run_plan("gemma-2-2b-it", 8192)
    assert code == 0 and "13 of 26 layers slide over 4,096 tokens" in markdown
    assert "624.00 MiB" in markdown and "attention scores capped at 50" in markdown


def test_gemma2_in_transformers5_layout_reads_the_same(tmp_path):
    """A config saved by transformers ≥ 4.53 lists layer_types instead of leaving them to Gemma2Config."""
    raw = json.loads((FIXTURES / "gemma-2-2b-it.json").read_text())
    raw["layer_types"] = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(26)]
    (tmp_path / "config.json").write_text(json.dumps(raw))
    from diffattn.plan import hfconfig

    old = hfconfig.read_config(FIXTURES / "gemma-2-2b-it.json")
    new = hfconfig.read_config(tmp_path / "config.json")
    assert (new.layer_types, new.window, new.cached_tokens(8192)) == (old.layer_types, old.window, 159744)


def test_gemma3_keeps_one_global_layer_in_six():
    kinds = plan_json("gemma-3-1b-it", 4096)["architecture"]["layer_types"]
    assert [i for i, kind in enumerate(kinds) if kind == "full_attention"] == [5, 11, 17, 23]


def test_windows_that_do_not_bind_and_windows_on_every_layer():
    assert plan_json("qwen2.5-7b-instruct", 8192)["architecture"]["window"] is None
    phi = plan_json("phi-3-mini-4k-instruct", 4096)["architecture"]
    assert (phi["sliding_layers"], phi["window"]) == (32, 2047)
    mistral = plan_json("mistral-7b-v0.1", 2048)["layers"]
    assert mistral["cached_tokens"] == 32 * 2048  # inside the window every layer holds the whole context


# (fixture, context, D, h·d, h_kv·d, layers, experts, active, expert width, vocab, tied, total weights on the model
#  card). SwiGLU experts hold 3 · D · F weights each, the router D · experts; lesson 04's norms are 2D per layer + D.
MOE = [
    ("mixtral-8x7b-v0.1", 4096, 4096, 4096, 1024, 32, 8, 2, 14336, 32000, False, 46.7e9),  # "46.7B total"
    ("qwen3-30b-a3b", 4096, 2048, 4096, 512, 48, 128, 8, 768, 151936, False, 30.5e9),  # "30.5B in total"
]


@pytest.mark.parametrize("name, context, D, qw, kvw, L, E, k, F, V, tied, card", MOE, ids=[m[0] for m in MOE])
def test_a_mixture_of_experts_holds_every_expert_and_runs_its_active_ones(name, context, D, qw, kvw, L, E, k, F, V,
                                                                         tied, card):
    plan = plan_json(name, context)
    attention = D * qw + 2 * D * kvw + qw * D  # q, k, v, o of the baseline
    held = L * (attention + E * 3 * D * F + D * E + 2 * D) + D + V * D * (1 if tied else 2)
    run = L * (attention + k * 3 * D * F + D * E) + V * D  # matmul weights per token: active experts, router, head
    baseline = plan["layers"]["variants"]["baseline"]
    assert baseline["model_params"] == held and round(held / 1e8) == round(card / 1e8)
    assert baseline["forward_flops_per_token"]["projections"] == 2 * run
    per_token = 2 * kvw * BF16  # K and V of h_kv heads of d, per layer
    step = plan["decode"]["variants"]["baseline"]
    assert step["bytes"] == BF16 * run + L * context * per_token  # batch 1: only the active experts are read
    heads = qw // 128  # both models' head_dim
    assert plan["layers"]["variants"]["diff_v2"]["model_params"] - held == L * (D * qw + D * heads)
    checks = next(e["checks"] for e in plan["evaluation"] if e["command"].startswith("diffattn accounting"))
    # lesson 04's command counts one FFN per layer, and ties h·d to D: the plan says which of the two applies
    assert (f"the other {E - 1} experts" in checks) if qw == D else ("refuses this shape" in checks)


def test_deepseek_latent_attention_is_refused_in_one_line(tmp_path):
    out = tmp_path / "plan.md"
    code, stdout, err = run_plan("deepseek-v2-lite", 4096, "--out", str(out))
    assert code == 2 and stdout == "" and not out.exists()
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert "kv_lora_rank 512" in err and "multi-head latent attention" in err


@pytest.mark.parametrize("change, message", [
    ({"q_lora_rank": 1536}, "sets q_lora_rank 1536: multi-head latent attention"),
    ({"attention_chunk_size": 8192}, "sets attention_chunk_size 8192: chunked attention"),
    ({"model_type": "qwen2_moe", "num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408,
      "shared_expert_intermediate_size": 5632}, "shared_expert_intermediate_size 5632"),
    ({"num_local_experts": 8}, "has 8 experts but no num_experts_per_tok"),
    ({"num_local_experts": 8, "num_experts_per_tok": 9}, "num_experts_per_tok 9 exceeds the 8 experts"),
    ({"attn_logit_softcapping": "fifty"}, "attn_logit_softcapping must be a positive number or null"),
])
def test_what_the_planner_cannot_count_is_refused_naming_the_field(tmp_path, change, message):
    raw = {**json.loads((FIXTURES / "mistral-7b-v0.1.json").read_text()), **change}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["plan", "--config", str(tmp_path / "config.json"), "--context", "4096", "--hallucination",
                         "high", "--budget-tokens", "1T", "--mode", "pretrain"])
    assert code == 2 and out.getvalue() == "" and len(err.getvalue().splitlines()) == 1
    assert message in err.getvalue(), err.getvalue()


def test_partly_dense_expert_layers_count_each_layer_by_its_own_ffn(tmp_path):
    """Qwen3-MoE's mlp_only_layers and decoder_sparse_step give some layers a dense FFN of intermediate_size."""
    raw = {**json.loads((FIXTURES / "qwen3-30b-a3b.json").read_text()), "mlp_only_layers": [0, 1],
           "decoder_sparse_step": 2}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    from diffattn.plan import figures, hfconfig

    arch = hfconfig.read_config(tmp_path / "config.json")
    moe = [i for i in range(48) if i not in (0, 1) and (i + 1) % 2 == 0]  # 3, 5, ..., 47
    assert arch.moe_layers == len(moe) == 23
    D, F, Fd, E, k = 2048, 768, 6144, 128, 8
    dense = (48 - 23) * (3 * D * Fd - 3 * D * F)
    assert figures.expert_extra(arch) == (23 * ((E - 1) * 3 * D * F + D * E) + dense,
                                          23 * ((k - 1) * 3 * D * F + D * E) + dense)
