"""Lesson 13: outputs/skill-diff-attention-integrator.md is what `diffattn plan --skill` writes today, and
its front matter is a valid Agent Skill (name and description at the top level, everything else under metadata),
checked by a strict reader that refuses what it does not understand."""

from __future__ import annotations

import pytest

from diffattn import cli
from diffattn.core.errors import ConfigError
from diffattn.core.paths import outputs_dir
from diffattn.plan import skill

COMMITTED = outputs_dir() / "skill-diff-attention-integrator.md"


def test_the_committed_skill_is_what_the_planner_writes_now():
    assert COMMITTED.read_text(encoding="utf-8") == skill.skill_text(), \
        "stale: run `diffattn plan --skill` and commit outputs/skill-diff-attention-integrator.md"


def test_the_writer_writes_that_file(tmp_path, capsys):
    assert cli.main(["plan", "--skill", "--out", str(tmp_path / "skill.md")]) == 0
    assert (tmp_path / "skill.md").read_text(encoding="utf-8") == skill.skill_text()


def test_the_front_matter_is_a_valid_skill():
    meta = skill.parse_front_matter(COMMITTED.read_text(encoding="utf-8"))
    skill.check_front_matter(meta)
    assert list(meta) == ["name", "description", "metadata"]
    assert meta["name"] == "diff-attention-integrator" and meta["description"] == skill.DESCRIPTION
    assert meta["metadata"] == skill.METADATA


def test_the_body_holds_the_computed_figures_and_real_messages():
    text = COMMITTED.read_text(encoding="utf-8")
    for heading in ("## Inputs", "## Decision procedure", "## Hard rejects", "## Output format", "## Worked examples"):
        assert heading in text
    assert "| DIFF V2 | 4096 → 8192 | 4096 → 1024 | 4096 → 4096 | 4096 → 32 | 58,851,328 | +16,908,288 |" in text
    assert "`error: num_key_value_heads 5 does not divide num_attention_heads 32 in config.json`" in text
    assert text.count("diffattn plan --preset") == len(skill.EXAMPLES)


GOOD = "---\nname: a-skill\ndescription: \"Does a thing. Use when needed.\"\nmetadata:\n  k: \"v\"\n---\nbody\n"


@pytest.mark.parametrize("text, problem", [
    (GOOD.replace("metadata:\n  k: \"v\"\n", "version: \"1.0\"\n"), "top-level keys other than"),  # the public skill's
    (GOOD.replace("metadata:\n  k: \"v\"\n", "tags:\n  k: \"v\"\n"), "top-level keys other than"),
    (GOOD.replace("a-skill", "A-Skill"), "name must be"),
    (GOOD.replace("a-skill", "a--skill"), "name must be"),
    (GOOD.replace("a-skill", "-skill"), "name must be"),
    (GOOD.replace("a-skill", "x" * 65), "name must be"),
    (GOOD.replace("Does a thing.", "Does <b>a</b> thing."), "description must be"),
    (GOOD.replace("Does a thing.", "x" * 1025), "description must be"),
    (GOOD.replace("name: a-skill\n", ""), "name must be"),
])
def test_invalid_front_matter_is_refused(text, problem):
    with pytest.raises(ConfigError, match=problem):
        skill.check_front_matter(skill.parse_front_matter(text))


@pytest.mark.parametrize("text, problem", [
    ("name: x\n---\n", "must start with"),
    ("---\nname: x\n", "no closing"),
    (GOOD.replace("name: a-skill", "name:\ta-skill"), "tab"),
    (GOOD.replace("\"Does a thing. Use when needed.\"", "'single quoted'"), "plain or double-quoted"),
    (GOOD.replace("\"Does a thing. Use when needed.\"", "[a, list]"), "plain or double-quoted"),
    (GOOD.replace("\"Does a thing. Use when needed.\"", "\"unterminated"), "bad double-quoted"),
    (GOOD.replace("  k: \"v\"", "  k: \"v\"\n  k: \"w\""), "appears twice"),
    (GOOD.replace("  k: \"v\"", "    k: \"v\""), "indented outside a mapping"),
    (GOOD.replace("name: a-skill\n", "  name: a-skill\n"), "indented outside a mapping"),
    (GOOD.replace("name: a-skill\n", "name: a-skill\nname: b\n"), "appears twice"),
    (GOOD.replace("metadata:\n", "metadata:\n\n"), "blank"),
])
def test_the_reader_refuses_what_it_does_not_understand(text, problem):
    with pytest.raises(ConfigError, match=problem):
        skill.parse_front_matter(text)


def test_the_reader_reads_plain_and_quoted_values_alike():
    assert skill.parse_front_matter(GOOD) == {"name": "a-skill", "description": "Does a thing. Use when needed.",
                                              "metadata": {"k": "v"}}
    assert skill.parse_front_matter(GOOD.replace("\"Does a thing. Use when needed.\"", "Does a thing"))["description"] \
        == "Does a thing"
