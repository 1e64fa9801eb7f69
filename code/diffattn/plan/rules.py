"""Lesson 13: the planner's decision procedure: which variant, whether to adopt it at all, its risks, a rollback rule
and an evaluation plan (stdlib only). Every rule is a `Rule(text, evidence ids)` (ids in diffattn.plan.evidence);
a rule whose only support is a HYPOTHESIS id is printed as a hypothesis.

Procedure, in order (the skill file prints it):
 1. hard rejects: an inconsistent config, attention lesson 04's accounting cannot count (DeepSeek's latent
    attention, chunked attention) or shared experts, a context past max_position_embeddings without RoPE scaling, a
    budget that is not a positive token count (hfconfig and the command raise them: exit 2, nothing written). The
    config is read as transformers reads it: which layers slide follows the family's own rule (Gemma 2 alternates,
    Gemma 3 keeps one global layer in six, Qwen's window is off unless use_sliding_window), a field the file omits
    takes its transformers default (named in the plan's notes), and a mixture-of-experts FFN counts every expert held
    and its active ones run;
 2. variant: DIFF V2 wherever the layout allows (always: it needs only h_kv | h); V1 is listed as the
    parameter-neutral alternative where its official module can be built, with its decode and kernel costs;
 3. verdict from the mode: pretrain adopts V2 (for medium/high hallucination profiles as the point of the change,
    for low as an optional loss gain; the hallucination and retrieval gains are V1's, so for V2 a hypothesis);
    uptrain and finetune are experiments behind a rollback rule: DEX reports gains from retrofitting pretrained LLMs
    with a related operator (O − λ·f(O); its tables not verified here), but no published run converts to V1 or V2 and
    reports a quality gain;
 4. caveats from the context, budget and architecture: outside the published range (below 10B tokens, above 64K,
    sliding-window layers, soft-capped attention scores) is a hypothesis.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from diffattn.pure.variants import REFERENCE, LABELS
from diffattn.plan.evidence import HYPOTHESIS
from diffattn.plan.hfconfig import Architecture

MODES = ("pretrain", "uptrain", "finetune")
PROFILES = ("low", "medium", "high")
SMALLEST_PUBLISHED_TOKENS = 10 * 10**9  # paper §3.2: the scaling runs' 10B tokens, its smallest matched comparison
LONGEST_PUBLISHED_CONTEXT = 65536  # paper §3.3-3.4: 64K, the longest context DIFF was evaluated at


class Rule(NamedTuple):
    text: str
    evidence: tuple[str, ...]


_FROM_SCRATCH = Rule("pretraining with DIFF is not a guaranteed gain: a user's from-scratch re-implementation at about "
                     "10B tokens trained worse than the Transformer; compare against a matched baseline and keep the "
                     "rollback rule", ("unilm_1663", "rollback"))


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def choose_variant(layers: dict) -> tuple[str, list[Rule]]:
    """V2, with why; V1's row says what it would cost instead (or why it cannot be built here)."""
    rows = layers["variants"]
    v2 = rows["diff_v2"]
    reasons = [
        Rule("DIFF V2 runs on the stock FlashAttention/SDPA kernel (one GQA call with 2h query heads) and keeps the "
             "baseline's KV cache; V1 needs a kernel with 2d-wide values or four calls", ("v2_code", "v2_blog", "accounting")),
        Rule(f"V2 adds {v2['delta']['baseline']['attention_params_per_layer']:,} attention weights per layer to the "
             f"baseline's and has {-v2['delta']['baseline_2h']['attention_params_per_layer']:,} fewer than the "
             "2h-head Transformer with the same query width (it keeps W_O at h·d → D)", ("accounting",)),
        Rule("V2's published results are LM loss and stability, not retrieval or hallucination: carrying the paper's "
             "V1 retrieval and hallucination gains over to V2 is a hypothesis to test", ("v2_no_evals", HYPOTHESIS)),
    ]
    v1 = rows["diff_v1"]
    if v1["applicable"]:
        reasons.append(Rule(f"DIFF V1 would add only {v1['delta']['baseline']['attention_params_per_layer']:,} weights "
                            "per layer (λ vectors and the norm), but every retrieval, hallucination and outlier result "
                            "the paper reports is V1's, and it reads its value cache twice per decoded token",
                            ("paper_eq2", "paper_t2", "accounting")))
    else:
        reasons.append(Rule("DIFF V1 cannot be built on this layout (its official module derives d = hidden / h and "
                            f"halves both head counts): {v1['why_not']}", ("paper_eq2", "accounting")))
    return "diff_v2", reasons


def verdict(mode: str, hallucination: str) -> tuple[str, list[Rule]]:
    """The headline: adopt, adopt-optional, or experiment-with-rollback; and the rules behind it."""
    if mode == "pretrain":
        if hallucination == "low":
            return "optional", [Rule("with a low hallucination profile the expected gain is LM loss (V1: about 62% of "
                                     "the parameters for the same loss at 10B tokens, or 64% of the tokens at 3B; V2: "
                                     "0.02-0.03 lower loss at 1T tokens); adopt only if the extra compute below is worth "
                                     "that", ("paper_f3", "v2_blog")), _FROM_SCRATCH]
        return "adopt", [
            Rule("differential attention was built for this profile: the paper's matched 3B V1 models hallucinate less "
                 "in summarisation and QA and retrieve multiple needles better; V2 publishes no such evaluation, so "
                 "its hallucination benefit is untested for V2", ("paper_t4", "paper_t2", "paper_f5", HYPOTHESIS)),
            Rule("the same V1 models have far smaller attention-logit outliers and keep their accuracy with attention "
                 "logits quantized to low bit widths (8 or 6 bits, depending on how the paper's Fig. 8 is read), which matters if the model "
                 "will be served quantized; untested for V2", ("paper_t5", HYPOTHESIS)),
            Rule("before pretraining the switch discards no trained weights; no published run converts a trained "
                 "model to V1 or V2 and reports a quality gain", ("convert_axolotl", "dex")),
            _FROM_SCRATCH,
        ]
    if mode == "uptrain":
        return "experiment", [
            Rule("converting a trained Transformer can keep its output at step 0 (the course's `convert` for V2; "
                 "axolotl's converter only by changing V1), but no published run converts to V1 or V2 and reports "
                 "a quality gain", ("convert_axolotl", "warm_start_v2")),
            Rule("DEX reports gains from retrofitting pretrained LLMs with a related operator (O − λ·f(O); its "
                 "tables not verified here): evidence that a retrofit can pay, not that a V1 or V2 conversion does",
                 ("dex",)),
        ]
    return "experiment", [
        Rule("a fine-tune cannot be expected to install DIFF's benefit: DiffLoRA trails other PEFT methods on most tasks, "
             "and the plain converters (axolotl's) publish no quality results", ("convert_difflora", "convert_axolotl")),
        Rule("the claim that 'a LoRA on the Q projection approximates DIFF' has no published support (the course's one "
             "CPU measurement is under the risks): treat a LoRA-only DIFF as an experiment", ("claim_lora_q",)),
    ]


def not_adopting(context: int, mode: str, layers: dict, decode: dict) -> list[Rule]:
    """When not to adopt DIFF for this model, each with its evidence."""
    excess = layers["variants"]["diff_v2"]["delta"]["baseline"]["forward_flops_ratio"] - 1
    rules = [
        Rule(f"compute is the binding constraint: V2 costs {_pct(excess)} forward FLOPs per token at context "
             f"{context:,} for this model", ("accounting", "rule_6n")),
        Rule("you serve a trained dense model whose long-context evaluations are already stable: replacing its "
             "attention means retraining, and no published run converts to V1 or V2 and reports a quality gain",
             ("convert_axolotl", "dex")),
    ]
    if mode != "pretrain":
        rules.append(Rule("your evaluations show no context-interference failures (wrong citations, lost needles): "
                          "those are the failures the documented benefits address", ("paper_t2", "paper_t4")))
    v1 = decode["variants"].get("diff_v1")
    if v1:
        rules.append(Rule(f"(V1 only) decode latency matters: V1's roofline step at batch 1 is "
                          f"{v1['seconds_vs_baseline']:.3f}× the baseline's here, V2's "
                          f"{decode['variants']['diff_v2']['seconds_vs_baseline']:.3f}×", ("roofline", "v2_blog")))
    rules.append(Rule("a short context alone is not a reason to refuse: the paper's multi-needle gains are measured at "
                      "4K; the common '16K/32K' thresholds have no source", ("paper_t2", "claim_16k")))
    return rules


def caveats(arch: Architecture, context: int, budget: int, mode: str) -> list[Rule]:
    """Where this plan leaves the published range."""
    rules = []
    if mode == "pretrain" and budget < SMALLEST_PUBLISHED_TOKENS:
        rules.append(Rule(f"a {budget:,}-token budget is below the paper's smallest matched comparison (10B tokens): "
                          "the gain at this budget is a hypothesis (the course's CPU runs, far smaller, are in the "
                          "evidence)", ("paper_f3", HYPOTHESIS)))
    if context > LONGEST_PUBLISHED_CONTEXT:
        rules.append(Rule(f"context {context:,} is past the 64K the paper evaluated: DIFF's behaviour there is a "
                          "hypothesis", ("paper_f5", HYPOTHESIS)))
    if context > arch.max_positions:
        rules.append(Rule(f"context {context:,} is past max_position_embeddings {arch.max_positions:,}; the config's "
                          f"RoPE scaling ({arch.rope['scaling']}) is extrapolated further", (HYPOTHESIS,)))
    if arch.sliding_layers:
        rules.append(Rule(f"{arch.sliding_layers} of {arch.layers} layers slide over {arch.window:,} tokens: the plan "
                          "converts every layer, as every published DIFF model is all-global; DIFF on the global layers "
                          "alone is untested", ("global_layers",)))
    if arch.attn_softcap:
        cap = f"{arch.attn_softcap:g}"
        rules.append(Rule(f"attn_logit_softcapping {cap}: this model caps every attention score as {cap}·tanh(s/{cap}) "
                          "before its softmax. A DIFF conversion must cap both maps' scores the same way; the official "
                          "DIFF code and every published DIFF run have no cap, so how a cap interacts with subtracting "
                          "two maps is untested; and V2's single kernel call needs a kernel that applies the cap "
                          "(PyTorch's scaled_dot_product_attention has no cap argument)",
                          ("softcap", "v2_code", HYPOTHESIS)))
    return rules


def lambda_settings(layers: dict) -> list[Rule]:
    rules = [Rule("V2: λ_{t,i} = σ(W_λ x_t)_i per token t and output head i, W_λ a bias-free D → h projection at "
                  "PyTorch's default init (σ ≈ 0.5 at the start); pairs are query heads (2i, 2i+1), interleaved, so "
                  "both read the same KV head; no λ_init schedule, no exp re-parameterisation, no per-head norm",
                  ("v2_code", "v2_ablation"))]
    v1 = layers["variants"]["diff_v1"]
    if v1["applicable"]:
        schedule = v1["lambda_init"]
        rules.append(Rule(f"V1 only: λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init with λ_init = 0.8 − 0.6·exp(−0.3·depth), "
                          f"0-based depth: {schedule[0]:.4f} at layer 0, {schedule[len(schedule) // 2]:.4f} at layer "
                          f"{len(schedule) // 2}, {schedule[-1]:.4f} at layer {len(schedule) - 1}; one λ per layer, "
                          "λ vectors drawn from N(0, 0.1²); per-head RMSNorm over 2d, then × (1 − λ_init). A constant "
                          "0.8 or 0.5 works as well", ("paper_eq2", "paper_t6")))
    return rules


def _batch(b: float | None) -> str:
    return "none (memory-bound at every batch)" if b is None else f"{math.ceil(b):,}"


def throughput(decode: dict, measured: dict) -> list[Rule]:
    """Decode from lesson 12's measurement when one exists, else from the roofline with its assumptions; training
    throughput from the paper and the blog; the CPU attention benchmark for what it is."""
    rows, machine = decode["variants"], decode["machine"]
    ratios = ", ".join(f"{LABELS[v]} {r['seconds_vs_baseline']:.3f}×" for v, r in rows.items() if v != REFERENCE)
    measured_decode = measured.get("decode")
    if measured_decode:
        shown = ", ".join(f"{v} {r:.2f}×" for v, r in measured_decode["ratio"].items())
        out = [Rule(f"measured decode step over the baseline's (batch 1, context {measured_decode['context']:,}, "
                    f"{measured_decode['file']}, the quietest committed run; a CPU in fp32, not your GPU): {shown}",
                    ("measured_decode",))]
    else:
        out = [Rule("no measured decode benchmark under outputs/bench/ yet (lesson 12), so decode comes from the "
                    "roofline, assuming the step runs at the machine's ceilings", ("roofline",))]
    out.append(Rule(f"roofline on {machine['name']} ({machine['peak_flops'] / 1e12:,.0f} TFLOP/s, "
                    f"{machine['bandwidth'] / 1e12:,.2f} TB/s, ridge {decode['ridge']:.0f} FLOP/byte), batch 1, "
                    f"{decode['mean_cached_tokens']:,} cached tokens per layer, bf16 weights and cache: decode step "
                    f"{rows['baseline']['seconds'] * 1e3:.3f} ms for the baseline; over it: {ratios}. Crossover batch B* "
                    f"(decode turns compute-bound): baseline {_batch(rows['baseline']['crossover_batch'])}, V2 "
                    f"{_batch(rows['diff_v2']['crossover_batch'])}", ("roofline", "accounting")))
    out.append(Rule("training throughput: V1 trained 5.6-10.3% slower than the Transformer on H100; the V2 blog "
                    "claims a negligible loss with modern FlashAttention but gives no figures", ("paper_t7", "v2_blog")))
    if measured.get("ops"):
        out.append(Rule("the course's CPU benchmark of the attention op (forward + backward) is in the evidence table: "
                        "a CPU figure for the op alone, not a GPU throughput", ("measured_ops",)))
    return out


def risks(mode: str, measured: dict) -> list[Rule]:
    rules = [
        Rule("pairing query heads from different GQA groups (chunk(2) or first/second half instead of 0::2 / 1::2) "
             "trains unstably", ("v2_ablation",)),
        Rule("dropping the sigmoid on λ, or λ itself, raises the loss", ("v2_ablation",)),
        Rule("V1's per-head RMSNorm rescales diffuse heads by up to √n and is blamed for late-training instability at "
             "large learning rates", ("v2_blog",)),
    ]
    loss = measured.get("loss")
    if loss and {"diff_v1", "diff_v2"} <= set(loss["gap"]):
        v1, v2 = loss["gap"]["diff_v1"]["mean"], loss["gap"]["diff_v2"]["mean"]
        rules.append(Rule(f"at small scale the V1 initialisation can lose: in the course's matched CPU runs "
                          f"({loss['preset']}, {loss['task']}, {loss['seeds']} seeds) V1's final validation loss was "
                          f"{v1:+.3f} against the baseline, V2's {v2:+.3f}", ("measured_loss",)))
    if mode != "pretrain":
        rules.append(Rule("a converted model must start as the trained one: a zeroed second query is not neutral for V2 "
                          "(σ(0) = 0.5 subtracts half of a causal mean of V); copy the trained W_Q into both queries of "
                          "each pair, set W_λ = 0 and double W_O (`diffattn convert`)", ("warm_start_v2",)))
    warm = measured.get("warmstart")
    if mode != "pretrain" and warm and {"diff_v2", "lora"} <= set(warm["gap"]):
        v2, lora = warm["gap"]["diff_v2"], warm["gap"]["lora"]
        rules.append(Rule(f"in the course's CPU warm-start study ({warm['task']}, {warm['preset']}, {warm['seeds']} "
                          f"seeds) a V2 conversion trained on ended {v2['mean']:+.3f} [{v2['ci95'][0]:+.3f}, "
                          f"{v2['ci95'][1]:+.3f}] in answer loss against the baseline trained on, a LoRA-only V2 "
                          f"branch {lora['mean']:+.3f} [{lora['ci95'][0]:+.3f}, {lora['ci95'][1]:+.3f}] "
                          "(that branch barely moved the loss from its own step 0 and its learning rate was not tuned, "
                          "so this does not say whether a LoRA can approximate DIFF)"
                          + ("" if warm["beats_null"] else "; no arm beat the retrieval null, so retrieval is untested "
                                                           "at that scale"), ("measured_warmstart",)))
    return rules


def rollback(mode: str) -> Rule:
    checkpoint = "after 10% of the budget and at the end" if mode == "pretrain" else "at each evaluation of the run"
    return Rule(f"roll back to the baseline if, {checkpoint}, DIFF's validation loss minus the baseline's (same data "
                "order and tokens, paired over ≥ 3 seeds or a paired interval) is above 0 with its interval excluding "
                "0; or its retrieval accuracy minus its null is below the baseline's; or its loss/gradient spikes "
                "outnumber the baseline's. Expect small gaps: 0.02-0.03 at 1T tokens is the published size",
                ("rollback", "v2_blog"))


def evaluation(arch: Architecture, context: int) -> list[tuple[str, str]]:
    """(command, what it checks): the course's own commands, rehearsed on its presets before the real model."""
    shape = (f"diffattn accounting --hidden {arch.hidden} --heads {arch.heads} --head-dim {arch.head_dim} "
             f"--layers {arch.layers} --kv-heads {arch.kv_heads} --ffn {arch.ffn}"
             f"{f' --vocab {arch.vocab}' if arch.vocab else ''} --context {context}")
    if arch.query_width != arch.hidden:
        recompute = ("refuses this shape (lesson 04 ties h·d to hidden; the plan's rows come from the same functions "
                     "with head_dim free)")
    elif arch.experts > 1:
        recompute = (f"recomputes the attention-weight and KV-cache rows above; its whole-model parameters and FLOPs "
                     f"count one FFN of width {arch.ffn} per layer, where the plan's add the other "
                     f"{arch.experts - 1} experts and the routers")
    else:
        recompute = "recomputes the parameter, KV-cache and FLOP rows above"
    return [
        (shape, recompute),
        ("diffattn compare --preset cpu-small --task needles --seeds 3",
         "the matched variants trained with the same data and budget, paired by seed (lesson 08)"),
        ("diffattn eval retrieval --ckpt DIR", "multi-needle accuracy per (N, R), length and depth, each beside "
                                                         "its null model (lesson 09)"),
        ("diffattn eval allocation --ckpt DIR", "share of |attention| on the answer vs the haystack (Table 3's "
                                                          "measure, lesson 09)"),
        ("diffattn eval outliers --ckpt DIR", "top-1 and median |attention logit| and |hidden state| "
                                                        "(Table 5's measure, lesson 10)"),
        ("diffattn eval quantize --ckpt DIR --bits 16,8,6,4", "retrieval with attention logits quantized "
                                                                         "(Fig. 8's measure, lesson 10)"),
        ("diffattn eval lambda-sweep --ckpt DIR", "how much the trained model relies on λ (lesson 11)"),
        ("diffattn eval suite --preset cpu-small --seeds 3", "all of the above on every variant at once"),
    ]
