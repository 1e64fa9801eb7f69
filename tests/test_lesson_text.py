"""The lessons read as lessons (CONTRIBUTING.md, "Lesson template"): each core within its word budget, every "Check
yourself" question answered in lessons/answers/NN.md, and no text that cites a document outside the repository or
this repository's own development."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]-*.md"))
BUDGET, LONG_BUDGET, LONG = 3000, 3500, {"03", "04", "12"}  # prose words of a core; the three whose math needs more
TOTAL_BUDGET = 36_000  # every core together, lesson 00 included
# Every lesson after the setup (00, which has no questions) is written to the template
REWRITTEN = {p.name[:2] for p in LESSONS} - {"00"}
# A document outside the repository ("seed 002", a notes file), or this repository's own issues
OUTSIDE = re.compile(r"\b[Ss]eed \d{3}\b|\bErrata\b|diff-spec|perf-notes|roofline-notes|\.\./shared|DEVELOPERS"
                     r"|(?<!#)\b[Ii]ssues? \d+\b")
QUESTION = re.compile(r"^(\d+)\. ", re.M)


def prose_words(text: str) -> int:
    """Words outside fenced code blocks and HTML comments (number tags, output markers)."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return len(re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL).split())


def section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}[^\n]*\n(.*?)(?=^## |\Z)", text, re.M | re.DOTALL)
    return match.group(1) if match else ""


def rewritten(paths: list[Path]) -> list[Path]:
    return [p for p in paths if p.name[:2] in REWRITTEN]


@pytest.mark.parametrize("path", rewritten(LESSONS), ids=lambda p: p.name)
def test_a_core_is_within_its_budget(path: Path):
    budget = LONG_BUDGET if path.name[:2] in LONG else BUDGET
    words = prose_words(path.read_text())
    assert words <= budget, f"{path.name}: {words} prose words, budget {budget}: move provenance to notes/"


def test_all_cores_together_are_within_the_course_budget():
    total = sum(prose_words(p.read_text()) for p in LESSONS)
    assert total <= TOTAL_BUDGET, f"the lessons' cores hold {total:,} prose words, the course's budget {TOTAL_BUDGET:,}"


@pytest.mark.parametrize("path", rewritten(LESSONS), ids=lambda p: p.name)
def test_every_question_has_its_answer(path: Path):
    number = path.name[:2]
    asked = QUESTION.findall(section(path.read_text(), "Check yourself"))
    answers_file = ROOT / "lessons" / "answers" / f"{number}.md"
    assert asked, f"{path.name}: no numbered question under '## Check yourself'"
    if not (ROOT / "lessons" / "answers").exists() and "answers (from your instructor)" in path.read_text():
        pytest.skip("a student handout built with NO_ANSWERS=1: the answers stay with the instructor")
    assert answers_file.is_file(), f"lessons/answers/{number}.md is missing"
    answered = QUESTION.findall(answers_file.read_text())
    assert answered == asked, f"{path.name} asks {asked}, lessons/answers/{number}.md answers {answered}"


@pytest.mark.parametrize("path", rewritten(LESSONS), ids=lambda p: p.name)
def test_a_lesson_links_its_notes_and_answers(path: Path):
    number, text = path.name[:2], path.read_text()
    answers = f"(answers/{number}.md)" in text or "answers (from your instructor)" in text  # a NO_ANSWERS handout
    assert f"(notes/{number}.md)" in text and answers, path.name


TEXT = {".md", ".py", ".ipynb", ".sh", ".toml", ".yml", ".cfg", ".html"}
FOLDERS = ("code", "tests", "lessons", "docs", "notebooks", "exercises", "scripts", "site", ".github")


def text_files() -> list[Path]:
    """Everything a reader of the course reads: lessons, notes, answers, docs, notebooks, code and its comments."""
    found = [p for p in ROOT.glob("*.md")] + [ROOT / "Makefile"]
    found += [p for folder in FOLDERS for p in (ROOT / folder).rglob("*") if p.suffix in TEXT and p.is_file()
              and "__pycache__" not in p.parts and p != Path(__file__).resolve()]
    found += [ROOT / name for name in ("pyproject.toml", "conftest.py") if (ROOT / name).is_file()]
    found += sorted((ROOT / ".ci").glob("*")) + sorted((ROOT / "outputs").glob("*.md"))
    return sorted(found)


@pytest.mark.parametrize("path", text_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_text_cites_a_document_outside_the_repository(path: Path):
    found = [m.group(0) for m in OUTSIDE.finditer(path.read_text(encoding="utf-8"))]
    assert not found, f"{path.relative_to(ROOT)} cites {found}: cite the public source (CONTRIBUTING.md)"


def test_the_checks_catch_what_they_name(tmp_path):
    assert prose_words("one two\n```python\nx = 1\n```\nthree<!--n 01.key-->") == 3
    assert [m.group(0) for m in OUTSIDE.finditer("Errata (seed 002), issue 16, diff-spec, unilm issue #1637")] == \
        ["Errata", "seed 002", "issue 16", "diff-spec"]
    text = "## Check yourself\n1. Why?\n2. How?\n## Exercises\n3. not a question\n"
    assert QUESTION.findall(section(text, "Check yourself")) == ["1", "2"]
