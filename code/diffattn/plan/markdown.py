"""Lesson 13: a plan (diffattn.plan.assemble) as Markdown: the sections in SECTIONS order, every rule followed by
the ids of its evidence, hypotheses marked as such, and the evidence table at the end (stdlib only)."""

from __future__ import annotations

from diffattn.pure.variants import LABELS
from diffattn.pure.accounting import human_bytes

SECTIONS = (
    ("recommendation", "Recommendation"),
    ("not_adopting", "When not to adopt DIFF"),
    ("caveats", "Outside the published range"),
    ("layers", "Per-layer changes"),
    ("lambda", "λ settings"),
    ("throughput", "Throughput and decode cost"),
    ("budget", "Training budget"),
    ("risks", "Risks"),
    ("rollback", "Rollback criterion"),
    ("evaluation", "Evaluation plan"),
    ("evidence", "Evidence"),
)
VERDICTS = {
    "adopt": "adopt {variant}",
    "optional": "optional: adopt {variant} only for its loss gain, if the extra compute is acceptable",
    "experiment": "do not adopt by default: run {variant} as an experiment behind the rollback rule below",
}


def rule_line(rule: dict) -> str:
    tag = "*Hypothesis:* " if rule["hypothesis"] else ""
    cited = ", ".join(key for key in rule["evidence"] if key != "hypothesis")
    return f"- {tag}{rule['text']}" + (f" [{cited}]" if cited else "")


def _rules(plan: dict, key: str) -> list[str]:
    return [rule_line(r) for r in plan[key]] or ["- none"]


def architecture_line(plan: dict) -> str:
    a = plan["architecture"]
    rope = a["rope"]
    scaling = f", scaling {rope['scaling'].get('rope_type', rope['scaling'].get('type'))}" if rope["scaling"] else ""
    sliding = f"; {a['sliding_layers']} of {a['layers']} layers slide over {a['window']:,} tokens" if a["window"] else ""
    ffn = (f"{a['experts']} experts of FFN {a['ffn']} in {a['moe_layers']} layers, {a['active_experts']} per token"
           if a["experts"] > 1 else f"FFN {a['ffn']}")
    cap = f"; attention scores capped at {a['attn_softcap']:g}" if a["attn_softcap"] else ""
    return (f"{a['model_type']}: hidden {a['hidden']}, {a['heads']} heads × d {a['head_dim']} (query width "
            f"{a['query_width']}), {a['kv_heads']} KV heads, {a['layers']} layers, {ffn}, vocab "
            f"{a['vocab'] or 'n/a'}, max positions {a['max_positions']:,}, RoPE θ {rope['theta']}{scaling}{sliding}{cap}")


def layer_rows(plan: dict) -> list[str]:
    """The per-layer table: shapes, weights, deltas, KV cache and forward FLOPs of each variant."""
    layers = plan["layers"]
    head = ("| variant | q_proj | k_proj, v_proj | o_proj | λ | attention weights / layer | Δ vs baseline | Δ vs 2h "
            f"heads | KV cache at {layers['context']:,} | forward FLOPs / token vs baseline |")
    lines = [head, "|" + "---|" * 10]
    for variant, row in layers["variants"].items():
        if not row["applicable"]:
            lines.append(f"| {LABELS[variant]} | not applicable: {row['why_not']} |" + " |" * 8)
            continue
        s, c, delta = row["shapes"], row["components"], row.get("delta", {})
        lam = s.get("lambda_proj") or (f"{c['lambda_vectors']} + norm {c['subln']}" if c["lambda_vectors"] else "-")
        ratio = delta.get("baseline", {}).get("forward_flops_ratio", 1.0)
        lines.append(f"| {LABELS[variant]} | {s['q_proj']} | {s['k_proj']} | {s['o_proj']} | {lam} | "
                     f"{row['attention_per_layer']:,} | {_signed(delta, 'baseline')} | {_signed(delta, 'baseline_2h')} | "
                     f"{human_bytes(row['kv_bytes_at_context'])} | {ratio:.3f}× |")
    lines.append("")
    lines.append(f"KV cache at {layers['context']:,} tokens counts {layers['cached_tokens']:,} cached layer-tokens "
                 f"(a sliding layer keeps its window), {layers['bytes_per_value']} bytes per value. Forward FLOPs: "
                 "projections (2 per weight) plus the attention core of a causal prefill [accounting].")
    return lines


def _signed(delta: dict, peer: str) -> str:
    return f"{delta[peer]['attention_params_per_layer']:+,}" if peer in delta else "-"


def budget_lines(plan: dict) -> list[str]:
    b = plan["budget"]
    lines = [f"- training FLOPs over {b['tokens']:,} tokens (≈ 3 × forward per token) [rule_6n]: "
             + ", ".join(f"{LABELS[v]} {f:.3g}" for v, f in b["training_flops"].items())]
    lines += [f"- {LABELS[v]} costs {x:+.2%} over the baseline" for v, x in b["excess_vs_baseline"].items()]
    return lines


def format_plan(plan: dict) -> str:
    i, rec = plan["inputs"], plan["recommendation"]
    out = [f"# Plan: differential attention for {i['source']}", "",
           f"Inputs: context {i['context']:,}, hallucination profile {i['hallucination']}, budget "
           f"{i['budget_tokens']:,} tokens, mode {i['mode']}.", "", architecture_line(plan), ""]
    out += [f"Note: {note}." for note in plan["architecture"]["notes"]] + ([""] if plan["architecture"]["notes"] else [])
    for key, title in SECTIONS:
        out += [f"## {title}", ""]
        if key == "recommendation":
            out.append(f"**Verdict: {VERDICTS[rec['verdict']].format(variant=LABELS[rec['variant']])}.**")
            out += ["", *_rules(plan, "why")]
        elif key == "layers":
            out += layer_rows(plan)
        elif key == "budget":
            out += budget_lines(plan)
        elif key == "evaluation":
            out.append("Rehearse the decision on the course's presets, then apply the same protocol (paired seeds, "
                       "nulls beside every accuracy) to your model:")
            out += [f"- `{e['command']}`: {e['checks']}" for e in plan["evaluation"]]
        elif key == "evidence":
            out += ["| id | kind | source |", "|---|---|---|"]
            out += [f"| {k} | {v['kind']} | {v['citation']} |" for k, v in plan["evidence"].items()]
        else:
            out += _rules(plan, key)
        out.append("")
    return "\n".join(out).rstrip() + "\n"
