"""Lesson 13: one plan, as a JSON-ready dict: the inputs, the architecture, the decision and its rules, the figures,
and the evidence every rule cites (stdlib only; diffattn.plan.markdown prints it)."""

from __future__ import annotations

from dataclasses import asdict

from diffattn.core.errors import require
from diffattn.plan import evidence, figures, rules
from diffattn.plan.hfconfig import Architecture


def measurements() -> dict:
    """The course's measurements a plan may cite, read now from outputs/ (None where a file is absent)."""
    return {"loss": evidence.measured_loss(), "ops": evidence.measured_ops(), "decode": evidence.measured_decode(),
            "warmstart": evidence.measured_warmstart()}


def measured_sources(measured: dict) -> dict[str, evidence.Source]:
    """The measurements as evidence entries, their numbers read from their files."""
    found = {}
    if measured.get("loss"):
        m = measured["loss"]
        gaps = "; ".join(f"{v} {g['mean']:+.3f} (paired range {g['min']:+.3f} to {g['max']:+.3f})"
                         for v, g in m["gap"].items())
        found["measured_loss"] = evidence.Source("measured", f"{m['file']}: {m['preset']} on {m['task']}, {m['seeds']} "
                                                             f"seeds, {m['tokens']:,} tokens per run; final validation "
                                                             f"loss minus the baseline's, paired by seed: {gaps}")
    if measured.get("ops"):
        m = measured["ops"]
        ratios = ", ".join(f"{op} {r:.2f}×" for op, r in m["ratio"].items())
        found["measured_ops"] = evidence.Source("measured", f"{m['file']}: attention forward+backward time over the "
                                                            f"baseline's on {m['device']}, {m['dtype']}, shape "
                                                            f"{m['shape']} ({m['date']}): {ratios}; CPU, attention op "
                                                            f"only: it does not carry over to a GPU")
    if measured.get("decode"):
        m = measured["decode"]
        ratios = ", ".join(f"{v} {r:.2f}×" for v, r in m["ratio"].items())
        machine = m["machine"]
        found["measured_decode"] = evidence.Source(
            "measured", f"{m['file']}: decode step time over the baseline's at batch 1, context {m['context']:,}: "
                        f"{ratios}; {machine.get('cpu', 'CPU')}, {machine.get('threads', '?')} thread(s), fp32, the "
                        f"quietest of {m['runs']} committed run(s) that pass the reliability checks (1-minute load "
                        f"average at most {m['peak_load']:.2f}; {m.get('unreliable', 0)} more left out as unreliable)")
    if measured.get("warmstart"):
        m = measured["warmstart"]
        gaps = "; ".join(f"{arm} {g['mean']:+.3f} [{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}]" for arm, g in m["gap"].items())
        found["measured_warmstart"] = evidence.Source(
            "measured", f"{m['file']}: {m['task']} on {m['preset']}, {m['seeds']} seeds, {m['steps'][0]} pretraining + "
                        f"{m['steps'][1]} continued steps; final answer loss minus the baseline trained on, t 95% over "
                        f"seeds: {gaps}; {'an' if m['beats_null'] else 'no'} arm beat the retrieval null "
                        f"({m['null'][0]} {m['null'][1]:.3f})")
    return found


def _rule(rule: rules.Rule, sources: dict) -> dict:
    unknown = [key for key in rule.evidence if key not in sources and key != evidence.HYPOTHESIS]
    require(not unknown, f"rule cites unknown evidence {unknown}: {rule.text[:60]}")
    kinds = {sources[key].kind for key in rule.evidence if key in sources}
    return {"text": rule.text, "evidence": list(rule.evidence),
            "hypothesis": evidence.HYPOTHESIS in rule.evidence or kinds <= {evidence.HYPOTHESIS}}


def make_plan(arch: Architecture, context: int, hallucination: str, budget_tokens: int, mode: str,
              machine: dict = figures.H200, measured: dict | None = None) -> dict:
    """The whole plan. `measured` defaults to what outputs/ holds now; pass {} to leave measurements out."""
    require(mode in rules.MODES, f"--mode must be one of {', '.join(rules.MODES)} (got {mode!r})")
    require(hallucination in rules.PROFILES,
            f"--hallucination must be one of {', '.join(rules.PROFILES)} (got {hallucination!r})")
    require(isinstance(budget_tokens, int) and budget_tokens > 0,
            f"--budget-tokens must be a positive number of tokens (got {budget_tokens!r})")
    arch.check_context(context)
    measured = measurements() if measured is None else measured
    layers = figures.layer_table(arch, context)
    decode = figures.decode_table(arch, context, machine)
    variant, why = rules.choose_variant(layers)
    headline, because = rules.verdict(mode, hallucination)
    sources = {**evidence.EVIDENCE, **measured_sources(measured)}
    sections = {
        "why": because + why,
        "not_adopting": rules.not_adopting(context, mode, layers, decode),
        "caveats": rules.caveats(arch, context, budget_tokens, mode),
        "lambda": rules.lambda_settings(layers),
        "throughput": rules.throughput(decode, measured),
        "risks": rules.risks(mode, measured),
        "rollback": [rules.rollback(mode)],
    }
    cited = sorted({key for items in sections.values() for r in items for key in r.evidence if key in sources})
    return {
        "inputs": {"source": arch.source, "context": context, "hallucination": hallucination,
                   "budget_tokens": budget_tokens, "mode": mode},
        "architecture": {**asdict(arch), "query_width": arch.query_width, "sliding_layers": arch.sliding_layers},
        "recommendation": {"verdict": headline, "variant": variant},
        **{name: [_rule(r, sources) for r in items] for name, items in sections.items()},
        "layers": layers,
        "decode": decode,
        "decode_measured": measured.get("decode"),
        "budget": figures.budget_cost(layers, budget_tokens),
        "evaluation": [{"command": c, "checks": what} for c, what in rules.evaluation(arch, context)],
        "evidence": {key: sources[key]._asdict() for key in cited},
    }
