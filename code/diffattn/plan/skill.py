"""Lesson 13: outputs/skill-diff-attention-integrator.md, an Agent Skill written by the planner itself (stdlib only).

    skill_text          the whole file: YAML front matter (name, description, metadata), then inputs, the decision
                        procedure, hard rejects (the real messages), output format and worked examples, all computed
    parse_front_matter  a strict reader for the subset the file uses (PyYAML is not a dependency): `key: value`
                        lines, values plain or double-quoted (JSON escapes), one nested level under `metadata`
    check_front_matter  the Agent Skills rules (agentskills.io/specification; anthropics/skills quick_validate.py):
                        name 1-64 of a-z, 0-9 and single inner hyphens; description 1-1024 characters without < or >;
                        this course puts nothing but name and description at the top level, the rest under metadata
"""

from __future__ import annotations

import json
import re

from diffattn.core.errors import ConfigError, require
from diffattn.pure.variants import LABELS
from diffattn.plan import evidence, hfconfig, rules
from diffattn.plan.assemble import make_plan
from diffattn.plan.markdown import SECTIONS, VERDICTS, layer_rows, rule_line

NAME = "diff-attention-integrator"
DESCRIPTION = ("Plans adding differential attention (DIFF Transformer V1 or V2) to a decoder language model from its "
               "Hugging Face config.json: the variant and why, when not to adopt it, per-layer parameter, KV-cache and "
               "FLOP deltas against fair baselines, λ settings, decode cost, risks, a rollback rule and an evaluation "
               "plan, every rule with its evidence. Use when deciding whether and how to add DIFF to a pretraining run, "
               "a continued pretraining of a converted model, or a fine-tune.")
METADATA = {"generated-by": "diffattn plan --skill", "course-lesson": "13",
            "regenerate": "diffattn plan --skill; tests/test_13_skill.py fails when this file is stale"}
TOP_LEVEL = ("name", "description", "metadata")
# (example name, config or preset, context, hallucination, budget tokens, mode)
EXAMPLES = (
    ("Llama-3.1-8B, a new pretraining run", "llama-3.1-8b", 32768, "high", 10**12, "pretrain"),
    ("Qwen3-4B, a fine-tune (head_dim set apart from hidden)", "qwen3-4b", 32768, "medium", 2 * 10**9, "finetune"),
    ("Gemma-3-12B, continued pretraining at 128K (sliding-window layers)", "gemma-3-12b", 131072, "high",
     50 * 10**9, "uptrain"),
)
# Inputs that must be refused, each with the message the planner gives (computed when the file is written)
REJECTS = (
    ("heads × head_dim ≠ hidden, head_dim absent", {"hidden_size": 4100}),
    ("KV heads not dividing heads", {"num_key_value_heads": 5}),
    ("a missing field", {"intermediate_size": None}),
    ("an unknown model_type without the fields", {"model_type": "gpt2", "hidden_size": None, "n_embd": 768}),
    ("multi-head latent attention (DeepSeek-V2/V3)", {"model_type": "deepseek_v2", "kv_lora_rank": 512}),
)
BASE = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
        "intermediate_size": 14336, "num_hidden_layers": 32, "max_position_embeddings": 8192}


def _quoted(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def front_matter() -> str:
    lines = ["---", f"name: {NAME}", f"description: {_quoted(DESCRIPTION)}", "metadata:"]
    lines += [f"  {key}: {_quoted(value)}" for key, value in METADATA.items()]
    return "\n".join(lines + ["---"])


def _scalar(text: str, where: str) -> str:
    text = text.strip()
    if text.startswith('"'):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise ConfigError(f"front matter: bad double-quoted value at {where}") from None
        require(isinstance(value, str), f"front matter: {where} is not a string")
        return value
    require(bool(text) and not text.startswith(("'", "[", "{", "&", "*", "!", "|", ">", "#")),
            f"front matter: {where} must be a plain or double-quoted string (got {text[:20]!r})")
    return text


def parse_front_matter(text: str) -> dict:
    """The front matter as a dict of strings (and `metadata` as a dict of strings); ConfigError on anything else."""
    require(text.startswith("---\n"), "front matter: the file must start with a '---' line")
    end = text.find("\n---\n", 4)
    require(end > 0, "front matter: no closing '---' line")
    found: dict = {}
    nested: dict | None = None
    for number, line in enumerate(text[4:end].split("\n"), start=2):
        require("\t" not in line and line.strip(), f"front matter: line {number} is blank or has a tab")
        indented = line.startswith("  ")
        key, colon, value = line.strip().partition(":")
        require(bool(colon) and re.fullmatch(r"[a-z][a-z0-9-]*", key) is not None,
                f"front matter: line {number} is not `key: value`")
        if indented:
            require(nested is not None and not line.startswith("   "), f"front matter: line {number} is indented "
                                                                        "outside a mapping")
            require(key not in nested, f"front matter: metadata.{key} appears twice")
            nested[key] = _scalar(value, f"line {number}")
            continue
        require(key not in found, f"front matter: {key} appears twice")
        if value.strip():
            found[key], nested = _scalar(value, f"line {number}"), None
        else:
            found[key] = nested = {}
    return found


def check_front_matter(meta: dict) -> None:
    """The skill's rules, each failure one line."""
    extra = [key for key in meta if key not in TOP_LEVEL]
    require(not extra, f"front matter: top-level keys other than name, description, metadata: {', '.join(extra)}")
    name, description = meta.get("name"), meta.get("description")
    require(isinstance(name, str) and 1 <= len(name) <= 64 and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name)
            is not None, f"front matter: name must be 1-64 of a-z, 0-9 and single inner hyphens (got {name!r})")
    require(isinstance(description, str) and 1 <= len(description) <= 1024 and not set("<>") & set(description),
            "front matter: description must be 1-1024 characters without '<' or '>'")
    require(isinstance(meta.get("metadata", {}), dict), "front matter: metadata must be a mapping")


def _procedure() -> list[str]:
    """The numbered procedure of diffattn.plan.rules, from its docstring (one source for both)."""
    doc = (rules.__doc__ or "").split("Procedure, in order (the skill file prints it):\n", 1)[1]
    items: list[str] = []
    for line in doc.strip().splitlines():
        if re.match(r"\s*\d+\. ", line):
            items.append(line.strip())
        elif items:
            items[-1] += " " + line.strip()
    return items


def _rejects() -> list[str]:
    lines = []
    for what, change in REJECTS:
        raw = {k: v for k, v in {**BASE, **change}.items() if v is not None}
        try:
            hfconfig.from_dict(raw, "config.json")
        except ConfigError as exc:
            lines.append(f"- {what}: `error: {exc}`")
        else:
            raise AssertionError(f"the planner accepted {what}")  # the skill would document a reject that is not one
    arch = hfconfig.from_dict(BASE, "config.json")
    try:
        arch.check_context(16384)
    except ConfigError as exc:
        lines.append(f"- a context past max_position_embeddings without RoPE scaling: `error: {exc}`")
    return lines


def _example(title: str, preset: str, context: int, hallucination: str, budget: int, mode: str) -> list[str]:
    plan = make_plan(hfconfig.from_preset(preset), context, hallucination, budget, mode, measured={})
    command = (f"diffattn plan --preset {preset} --context {context} --hallucination {hallucination} "
               f"--budget-tokens {budget} --mode {mode}")
    rec = plan["recommendation"]
    decode = next(r for r in plan["throughput"] if r["evidence"][0] == "roofline" and "ridge" in r["text"])
    return [f"### {title}", "", f"`{command}`", "",
            f"Verdict: {VERDICTS[rec['verdict']].format(variant=LABELS[rec['variant']])}.", "", *layer_rows(plan), "",
            f"Decode: {decode['text']} [{', '.join(decode['evidence'])}].", "",
            *([*map(rule_line, plan["caveats"]), ""] if plan["caveats"] else [])]


def skill_text() -> str:
    out = [front_matter(), "", "# DIFF attention integrator", "",
           "Generated by `diffattn plan --skill` from the planner's own code: every number below is "
           "computed by it, and the full plan for any model is one command away. Measurements read from the course's "
           "outputs/ (CPU runs, benchmarks) appear in live plans only, so this file does not change with them.", "",
           "## Inputs", "",
           "- `--config config.json` (a Hugging Face config; `text_config` is read for multimodal ones) or `--preset "
           f"NAME` ({', '.join((*hfconfig.PRESETS, *hfconfig.EXAMPLES))})",
           "- `--context N`: the target context in tokens",
           f"- `--hallucination {'|'.join(rules.PROFILES)}`: how much contextual hallucination and retrieval failure matter",
           "- `--budget-tokens T`: training tokens of the run (2e9, 10B, 1T)",
           f"- `--mode {'|'.join(rules.MODES)}`: a new run, continued pretraining of a converted model, or a fine-tune",
           "- `--json` for the machine-readable plan; `--peak-tflops`/`--bandwidth-tbs` for another machine's roofline", "",
           "## Decision procedure", "", *_procedure(), "",
           "## Hard rejects", "", "One `error:` line, exit code 2, nothing written:", "", *_rejects(), "",
           "## Output format", "",
           "A Markdown plan with these sections, in order (`--json`: the same content as one object, each rule "
           "`{text, evidence, hypothesis}`): " + ", ".join(title for _, title in SECTIONS) + ". Every rule ends with "
           "the ids of its evidence; a rule resting only on a hypothesis starts with *Hypothesis:*.", "",
           "## Worked examples", ""]
    for example in EXAMPLES:
        out += _example(*example)
    out += ["## Evidence", "", "| id | kind | source |", "|---|---|---|"]
    out += [f"| {key} | {s.kind} | {s.citation} |" for key, s in evidence.EVIDENCE.items()]
    return "\n".join(out).rstrip() + "\n"
