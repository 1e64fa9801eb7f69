"""Lesson 13: what each of the planner's rules rests on, and the course's own measurements it reads (stdlib only).

    EVIDENCE          id -> Source(kind, citation): a paper table, the V2 blog, official code, an issue thread, a
                      course measurement (with its file) or a computation; HYPOTHESIS marks a rule nothing supports
    measured_loss     lesson 08's matched CPU comparison (outputs/compare/<run>/summary.json): final validation loss
                      of each variant minus the baseline's, paired by seed
    measured_ops      the newest committed CPU attention benchmark (ATTENTION_BENCH): each op's fwd+bwd time / baseline
    measured_decode   lesson 12's decode benchmark (outputs/bench/<run>/roofline.json): the quietest committed run
                      of those that pass diffattn.core.hardware.reliability (a plan never quotes a run marked unreliable)
    measured_warmstart  lesson 13's warm-start study (outputs/warmstart/summary.json): converted and LoRA-only arms
                      against the baseline trained on, t intervals over seeds, and whether any arm beat the null

Paper and blog numbers are cited here as published (the paper's tables and figures, the V2 blog), never recomputed.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import NamedTuple

from diffattn.pure.variants import REFERENCE
from diffattn.core.hardware import reliability
from diffattn.core.paths import outputs_dir

HYPOTHESIS = "hypothesis"


class Source(NamedTuple):
    kind: str  # paper | blog | code | issue | secondary (abstract only) | measured | computed | hypothesis
    citation: str


EVIDENCE = {
    "paper_t2": Source("paper", "Ye et al., Differential Transformer (ICLR 2025), Table 2: multi-needle retrieval at "
                                "4K context, 3B models on 350B tokens: N=6, R=2 accuracy 0.85 (DIFF V1) vs 0.55"),
    "paper_f5": Source("paper", "Ye et al., Fig. 5: 64K-context needle retrieval (N=8, R=1), 3B models extended to 64K: "
                                "DIFF V1 stable across 8K-64K, the Transformer declines"),
    "paper_t4": Source("paper", "Ye et al., Table 4: contextual hallucination (GPT-4o judge), e.g. XSum 0.53 vs 0.44, "
                                "Qasper 0.39 vs 0.28 (DIFF V1 vs Transformer, 3B, 350B tokens)"),
    "paper_t5": Source("paper", "Ye et al., Table 5: top-1 attention logit 38.8 (DIFF V1) vs 318.0; Fig. 8: DIFF keeps "
                                "HellaSwag accuracy with attention logits quantized to low bit widths (the exact width, "
                                "8 or 6 bits, depends on how the figure is read), and 4-bit DIFF is about as accurate as the 6-bit Transformer"),
    "paper_f3": Source("paper", "Ye et al., §3.2 and Fig. 3, two experiments: 830M-13.1B models on 10B tokens, where "
                                "DIFF V1 matches the Transformer with about 62% of the parameters; and 3B models trained "
                                "up to 360B tokens, where it matches it with about 64% of the tokens"),
    "paper_t6": Source("paper", "Ye et al., Table 6: λ_init constant 0.8 or 0.5 instead of the depth schedule: "
                                "validation loss 3.065 / 3.066 vs 3.062 (robust); without the per-head norm 3.122"),
    "paper_t7": Source("paper", "Ye et al., Table 7 (H100, customised FlashAttention for both): DIFF V1 trains 5.6-10.3% "
                                "slower than the Transformer (the table's -6% to -12% divide by DIFF's throughput)"),
    "paper_eq2": Source("code", "Ye et al. eq. 2 and microsoft/unilm Diff-Transformer/multihead_flashdiff_1.py: "
                                "λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init, λ_init = 0.8 − 0.6·exp(−0.3·depth), "
                                "depth 0-based; one λ per layer; per-head RMSNorm(2d), then × (1 − λ_init)"),
    "v2_code": Source("code", "microsoft/unilm Diff-Transformer/Diff-Transformer-V2/multihead_flashdiffv2.py: "
                              "q_proj D → 2h·d, o_proj h·d → D, lambda_proj D → h (no bias, default init, so σ ≈ 0.5 "
                              "at the start); attn[:, 0::2] − σ(λ)·attn[:, 1::2]; no norm, no λ_init"),
    "v2_blog": Source("blog", "Microsoft, Differential Transformer V2 (Hugging Face blog, 2026-01-20): stock "
                              "FlashAttention kernel; same KV cache as the baseline; decoding 'matches' the baseline; "
                              "LM loss 0.02-0.03 lower than the Transformer at 1T tokens; fewer loss and gradient spikes "
                              "at large learning rates; V1's per-head RMSNorm blamed for late-training instability"),
    "v2_ablation": Source("blog", "V2 blog, design ablations: pairing heads from different GQA groups gives loss spikes "
                                  "and higher loss; λ without the sigmoid is less stable; no λ gives higher loss"),
    "v2_no_evals": Source("blog", "The V2 blog publishes loss and stability only: no retrieval, hallucination or "
                                  "long-context evaluations (listed as future work)"),
    "convert_axolotl": Source("code", "axolotl-ai-cloud/diff-transformer plugin/convert.py and modeling/diff_attn.py "
                                      "(axolotl PR #2197): Llama → a changed V1 (q/k projections doubled, so not "
                                      "parameter-matched; per-head norm switchable off with `sublayer_norm`; the "
                                      "(1 − λ_init) factor commented out; the negative branch ramped in from 0 through "
                                      "`diff_attn_mix`), which preserves the output at conversion; no quality results "
                                      "published"),
    "convert_difflora": Source("paper", "DiffLoRA, arXiv 2507.23588: LoRA on both attention terms; below other PEFT "
                                        "methods on most tasks, +11 points over LoRA on HumanEval"),
    "unilm_1663": Source("issue", "microsoft/unilm issue #1663: a user's own from-scratch re-implementation of DIFF, "
                                  "pretrained on about 10B tokens, trained worse than their Transformer (pretraining, "
                                  "not a conversion)"),
    "dex": Source("secondary", "DEX, arXiv 2505.16333 (NeurIPS 2025), abstract only (its tables not verified here): "
                               "retrofitting pretrained LLMs with a related operator, O − λ·f(O) on the softmax output, "
                               "'substantially improves the pretrained LLMs across diverse benchmarks'; not V1 or V2, "
                               "code not public"),
    "claim_lora_q": Source(HYPOTHESIS, "a common claim: 'a LoRA on the Q projection can approximate DIFF' (no published "
                                       "source; lesson 13's CPU study measures one LoRA-only warm start: "
                                       "measured_warmstart)"),
    "claim_16k": Source(HYPOTHESIS, "a common claim: 'under 16k the noise floor is negligible' and 'large gains above 32k' "
                                   "come without a source; Table 2 shows gains at 4K"),
    "warm_start_v2": Source("computed", "diffattn.training.warmstart.convert (lesson 13, `diffattn convert`): both "
                                        "queries of each V2 pair copy the trained head, W_λ = 0 (σ = ½) and W_O × 2, "
                                        "so the logits are unchanged at step 0 (tests/test_13_convert.py: ≤ 1e-5 in "
                                        "fp32); a zeroed second query or an undoubled W_O fails that test"),
    "softcap": Source("code", "huggingface/transformers models/gemma2/modeling_gemma2.py, eager_attention_forward: "
                              "scores × scaling, then ÷ softcap, tanh, × softcap, before the mask and the softmax "
                              "(softcap = config.attn_logit_softcapping, 50 in Gemma 2's config.json files)"),
    "global_layers": Source(HYPOTHESIS, "a sliding layer's softmax spreads over at most its window, so its noise "
                                        "floor does not grow with the context; DIFF on global layers only is untested"),
    "accounting": Source("computed", "diffattn.pure.accounting (lesson 04): parameters, KV cache and FLOPs per variant "
                                     "against the fair baselines (h heads; 2h query heads for V2), under tests"),
    "roofline": Source("computed", "diffattn.pure.roofline (lesson 12): decode step time = max(FLOPs / peak, bytes / "
                                   "bandwidth) at the machine's ceilings, and the crossover batch B*"),
    "rule_6n": Source("computed", "training FLOPs ≈ 3 × forward FLOPs per token × tokens (backward ≈ 2 × forward, "
                                  "the convention of the 6N rule)"),
    "rollback": Source("proposal", "a decision rule this course proposes, not a published result"),
}


def measured_loss(path: Path | None = None) -> dict | None:
    """Final validation loss minus the baseline's, paired by seed: {variant: {"mean", "min", "max"}} plus the run's
    preset, task, seeds, tokens and file; None when the file is absent (a fresh clone has it: it ships)."""
    path = path or outputs_dir() / "compare" / "cpu-small-text" / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    final = {variant: {run["seed"]: run["curve"]["val_loss"][-1] for run in record["runs"]}
             for variant, record in summary["variants"].items()}
    base = final["baseline"]
    gaps = {}
    for variant, losses in final.items():
        paired = [losses[seed] - base[seed] for seed in losses if seed in base]
        if variant != REFERENCE and paired:
            gaps[variant] = {"mean": statistics.fmean(paired), "min": min(paired), "max": max(paired), "pairs": len(paired)}
    return {"file": _shown(path), "preset": summary["preset"], "task": summary["task"], "seeds": len(summary["seeds"]),
            "tokens": summary["tokens"], "gap": gaps}


# a committed one-thread `diffattn bench` run of the attention ops (2026-12-03, the Xeon)
ATTENTION_BENCH = "bench/v1-fused-intel-xeon-processor-1t-2026-12-03-run2/bench.json"


def measured_ops(path: Path | None = None) -> dict | None:
    """Each attention op's forward+backward time over the baseline's, on the benchmark's first shape (CPU)."""
    path = path or outputs_dir() / ATTENTION_BENCH
    try:
        bench = json.loads(path.read_text())
        if not reliability(bench)["reliable"]:
            return None
        rows = bench["attention_ops"]
        shape = rows[0]["shape"]
        times = {row["op"]: row["fwd_bwd_ms"] for row in rows if row["shape"] == shape and "fwd_bwd_ms" in row}
        ratios = {op: ms / times[REFERENCE] for op, ms in times.items() if op != REFERENCE}
    except (OSError, ValueError, KeyError, IndexError, TypeError, ZeroDivisionError):
        return None
    return {"file": _shown(path), "device": bench.get("device"), "dtype": bench.get("dtype"), "date": bench.get("date"),
            "shape": shape, "ratio": ratios}


def measured_decode(folder: Path | None = None) -> dict | None:
    """Lesson 12's measured decode steps from the runs of `bench roofline` under outputs/bench/: each <run>/roofline.json
    with a "decode" list of {"variant", "context", "batch", "ms"} rows and the run's "load_average". Runs that fail
    `diffattn.core.hardware.reliability` are left out (counted in "unreliable"). Of the readable reliable runs, the one
    whose 1-minute load average peaked lowest (ties: the first folder by name), so the choice depends on what was
    measured, not on the order the files are listed in. Returns each variant's step time over the baseline's at the
    largest context measured at batch 1, with the run's file, peak load and how many runs were readable and reliable;
    None when there is none."""
    folder = folder or outputs_dir() / "bench"
    found, unreliable = [], 0
    for path in sorted(folder.glob("*/roofline.json")):
        try:
            info = json.loads(path.read_text())
            if not reliability(info)["reliable"]:
                unreliable += 1
                continue
            rows = [r for r in info["decode"] if r["batch"] == 1 and "ms" in r]
            context = max(r["context"] for r in rows)
            steps = {r["variant"]: r["ms"] for r in rows if r["context"] == context}
            ratios = {v: ms / steps[REFERENCE] for v, ms in steps.items() if v != REFERENCE}
            load = max(x[0] for x in info["load_average"].values() if x)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ZeroDivisionError):
            continue
        found.append({"file": _shown(path), "context": context, "batch": 1, "ratio": ratios, "peak_load": load,
                      "machine": info.get("machine", {})})
    if not found:
        return None
    quietest = min(found, key=lambda run: run["peak_load"])  # min keeps the first of equals: sorted by folder name
    return {**quietest, "runs": len(found), "unreliable": unreliable}


def measured_warmstart(path: Path | None = None) -> dict | None:
    """Lesson 13's study: each arm's final answer loss minus the baseline's (mean and t 95% over seeds), the design,
    and whether any arm's accuracy beat the null in any seed; None when the file is absent or unreadable."""
    path = path or outputs_dir() / "warmstart" / "summary.json"
    try:
        summary = json.loads(path.read_text())
        design, arms = summary["design"], summary["arms"]
        gaps = {arm: {"mean": a["loss_minus_baseline"]["mean"], "ci95": a["loss_minus_baseline"]["ci95"]}
                for arm, a in arms.items() if arm != REFERENCE}  # the arm that trained the baseline on
        beat = any(s["minus_null"]["above"] for a in arms.values() for s in a["seeds"])
        return {"file": _shown(path), "task": design["task"], "preset": design["preset"], "seeds": len(design["seeds"]),
                "steps": (design["pretrain_steps"], design["continue_steps"]), "gap": gaps, "beats_null": beat,
                "null": (summary["null"]["rule"], summary["null"]["value"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _shown(path: Path) -> str:
    """The path relative to the repository when it lies inside it (what a plan quotes), else as given."""
    try:
        return str(path.resolve().relative_to(outputs_dir().parent))
    except ValueError:
        return str(path)
