"""Lessons say what the code computes.

- every lesson 01+ follows the template (CONTRIBUTING.md) and links only to files that exist;
- every tagged number and every output block agrees with outputs/numbers.json (lessontext.check_text);
- outputs/numbers.json is what the experiments compute now (re-run here), so a code change cannot leave stale numbers;
  "the same" follows each number's declared kind (diffattn.core.numberkinds), as does every check below.
  tests/test_portability.py re-runs the torch lessons under other CPU kernel paths and thread counts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from diffattn import lessons as experiments
from diffattn.cli import render_output
from diffattn.lessons import clean
from diffattn.lessons.quotes import block_diff, check_text, format_like, sync_text, tagged_keys
from diffattn.core.numberkinds import disagreements, edge_cases
from diffattn.core.results import load_numbers, numbers_path

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted(p for p in (ROOT / "lessons").glob("[0-9][0-9]-*.md") if not p.name.startswith("00"))
SECTIONS = ["What you will learn", "The problem", "The math", "Build it", "Run it", "Check yourself", "Exercises",
            "Key terms", "Further reading", "You can now"]
LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)#\s]+)")


@pytest.fixture(scope="module")
def numbers():
    return load_numbers()


def test_every_registered_lesson_has_a_lesson_file():
    written = {p.name[:2] for p in LESSONS}
    assert set(experiments.LESSONS) <= written, f"lessons without a markdown file: {set(experiments.LESSONS) - written}"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_lesson_follows_the_template(path: Path):
    sections = SECTIONS
    headings = [line[3:].strip() for line in path.read_text().splitlines() if line.startswith("## ")]
    found = [s for s in sections if any(h.startswith(s) for h in headings)]
    assert found == sections, f"{path.name}: missing or out of order: {[s for s in sections if s not in found]}"
    order = [next(i for i, h in enumerate(headings) if h.startswith(s)) for s in sections]
    assert order == sorted(order), f"{path.name}: template sections out of order"
    assert path.read_text().startswith(f"# {path.name[:2]} "), f"{path.name}: the title must start with '# {path.name[:2]} '"


LINKED = [*LESSONS, *sorted(ROOT.glob("lessons/*/[0-9][0-9].md")), *sorted(ROOT.glob("docs/*.md")), ROOT / "README.md",
          ROOT / "CONTRIBUTING.md"]


@pytest.mark.parametrize("path", LINKED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(path: Path):
    prose = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)  # templates inside code fences are not links
    missing = [target for target in LINK.findall(prose) if not (path.parent / target).exists()]
    assert not missing, f"{path.name} links to missing files: {missing}"


@pytest.mark.parametrize("path", clean.sources(ROOT) + [ROOT / "README.md"], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_lesson_numbers_match_outputs(path: Path, numbers):
    problems = check_text(path, path.read_text(), numbers, render_output, experiments.number_kinds)
    assert not problems, "\n".join(map(str, problems)) + "\n(run `make course`, review, then `make lessons-sync`)"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_lesson_quotes_its_own_numbers(path: Path):
    """A lesson with an experiment quotes at least one of its numbers and shows its command's output."""
    source = (ROOT / "lessons" / "src" / path.name).read_text()
    number = path.name[:2]
    if number not in experiments.LESSONS:
        pytest.skip("no experiment module for this lesson")
    assert any(k.startswith(f"{number}.") for k in tagged_keys(source)), f"{path.name} quotes no tagged number"
    assert f"<!-- output: lesson {number} -->" in source, f"{path.name} has no `lesson {number}` output block"


@pytest.mark.parametrize("number", sorted(experiments.LESSONS))
def test_outputs_are_fresh(number: str, numbers):
    """Re-run the lesson's experiments: outputs/numbers.json must hold what they compute today, number by number
    within the kind the lesson declares for it."""
    missing = experiments.missing_requirements(number)
    if missing:
        pytest.skip(f"needs {missing}")
    module = experiments.load(number)
    assert number in numbers, f"lesson {number} missing from {numbers_path()}: run `make course`"
    problems = disagreements(module.run(progress=False), numbers[number], experiments.number_kinds(number), number)
    assert not problems, "\n".join(problems[:20])


@pytest.mark.parametrize("number", sorted(experiments.LESSONS))
def test_report_reads_the_same_anywhere_in_the_declared_kinds(number: str, numbers):
    """Move every non-exact number to the edges its kind allows: the printed report (what lessons quote in their
    output blocks) must not change, so it prints no digit that another CPU could change."""
    if experiments.missing_requirements(number):
        pytest.skip("needs torch")
    module, kinds = experiments.load(number), experiments.number_kinds(number)
    expected = module.report(numbers[number])
    for moved in edge_cases(numbers[number], kinds):
        shown = module.report(moved)
        assert shown == expected, (f"lesson {number}'s report prints digits its NUMBER_KINDS let move:\n"
                                   + block_diff(expected, shown, f"lesson {number}"))


@pytest.mark.parametrize(
    "text, unit, value, expected",
    [("0.853", "", 0.85312, "0.853"), ("4,194,688", "", 4194688, "4,194,688"), ("58.9", "M", 58_851_328, "58.9"),
     ("128", "%", 1.27999, "128"), ("−0.50", "", -0.5, "−0.50"), ("0.0", "", -0.00001, "0.0"),
     ("2.5", "GiB", 2.5 * 2**30, "2.5"), ("1.1e-15", "", 1.1102e-15, "1.1e-15"), ("7.2e-07", "", 7.15e-7, "7.2e-07")],
)
def test_number_formats_follow_the_text(text, unit, value, expected):
    assert format_like(text, unit, value) == expected


def test_check_catches_a_stale_number_and_sync_fixes_it():
    numbers = {"01": {"mass": 0.25, "nested": {"list": [1.5, 2.5]}}}
    source = "mass 0.30<!--n 01.mass--> and 2.50<!--n 01.nested.list.1-->, 12.3 %<!--n 01.mass-->\n"
    problems = check_text(Path("x.md"), source, numbers, lambda args: "")
    assert [p.found for p in problems] == ["0.30", "12.3"]
    fixed = sync_text(source, numbers, lambda args: "")
    assert fixed == "mass 0.25<!--n 01.mass--> and 2.50<!--n 01.nested.list.1-->, 25.0 %<!--n 01.mass-->\n"
    assert not check_text(Path("x.md"), fixed, numbers, lambda args: "")


def test_check_reports_unknown_keys_and_stale_output_blocks():
    source = "x 1.0<!--n 02.nope-->\n<!-- output: lesson 01 -->\n```text\nold\n```\n"
    problems = check_text(Path("x.md"), source, {"01": {}}, lambda args: "new\n")
    assert {p.expected for p in problems} == {"<missing key>", "<differs>"}
    block = next(str(p) for p in problems if p.expected == "<differs>")
    assert "x.md:2: output of `lesson 01`" in block and "\n-old" in block and "\n+new" in block  # says which line


def test_ci_runs_exactly_the_readme_test_command():
    """The course's rule: CI (.ci/run) runs the README's test command and nothing else, so a learner's `make test`
    is what CI proved."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Two commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    test_command = next(line.split("#")[0].strip() for line in block.splitlines() if line.startswith("make test"))
    ci = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()
          if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert ci == [test_command]


def test_the_clean_lessons_are_their_sources_without_tags():
    """lessons/ and docs/ are what a reader opens: the tagged sources under src/ with the tags taken out, never stale."""
    from diffattn.lessons import clean

    assert clean.sources(ROOT), "no tagged sources under lessons/src/ or docs/src/"
    assert not clean.stale(ROOT), f"stale renderings (run `make lessons-sync`): {clean.stale(ROOT)}"
    for source in clean.sources(ROOT):
        text = clean.rendered(source).read_text()
        assert "<!--n " not in text and "<!-- output:" not in text and "<!-- source:" not in text, source.name


def test_the_clean_text_keeps_every_number_and_drops_only_markers():
    from diffattn.lessons.clean import clean

    tagged = ("DIFF trains 5.6%<!--n 06.a--> slower, 1,024<!--n 03.b--> tokens\n"
              "<!-- output: lesson 03 -->\n```text\nout\n```\n<!-- source: code/x.py:f -->\n```python\nx\n```\n")
    assert clean(tagged) == "DIFF trains 5.6% slower, 1,024 tokens\n```text\nout\n```\n```python\nx\n```\n"
