"""What a student reads after grading: one row per exercise part, with the failure that says most about the mistake.

A part fails many tests at once for one mistake, and the first in file order is usually a bare value check
("expected -0.290462, got -0.238908") while a later one names the concept ("normalise over each head's 2d channels,
not d_model"). So graded tests mark the assertion that diagnoses a mistake: its message starts with MISTAKE
(`tests.feedback.mistake(...)`; `refuses` marks its "must raise …; nothing was raised" the same way). Under each
part's row the table shows its first marked failure, else its first failure, wrapped, never cut, and says how many
more failed; `--details` (`make grade DETAILS=1`) prints every failing test's message in full, the shown one first.

The table counts visible tests only, but its total is results.json's, hidden tests included, so that the two never
disagree (it then says that some points come from tests it does not show).
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

MISTAKE = "mistake: "
MARKED = re.compile(r"^(?:[\w.]+: )?mistake: ")  # "AssertionError: mistake: …", or the marker alone
WIDTH = 118  # characters of a wrapped line of the table
INDENT = " " * 8


def diagnosis(output: str) -> str | None:
    """The first line of a test's output that carries the MISTAKE marker (without "AssertionError: "), or None."""
    line = next((ln.strip() for ln in output.splitlines() if MARKED.match(ln.strip())), None)
    return None if line is None else line.removeprefix("AssertionError: ")


def shown_failure(failed: list[dict[str, Any]]) -> dict[str, Any]:
    """Of a part's failed tests (in file order), the one the table shows: the first whose message names the mistake,
    else the first."""
    return next((t for t in failed if diagnosis(t["output"]) is not None), failed[0])


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def wrapped(text: str) -> list[str]:
    """`text` as indented lines of at most WIDTH characters: all of it, long words broken rather than cut."""
    return textwrap.wrap(text, WIDTH, initial_indent=INDENT, subsequent_indent=INDENT, break_on_hyphens=False)


def reason(test: dict[str, Any], zeroed: bool) -> str:
    """What the table says of a failed test: a zeroed exercise's reason as it is, else the test's name and its
    diagnosis or first line."""
    if zeroed:
        return _first_line(test["output"])
    line = diagnosis(test["output"]) or _first_line(test["output"]).removeprefix("AssertionError: ")
    return f"{test['name'].split(': ', 1)[1]}: {line}"


def summary(verdicts: list[Any], tests: list[dict[str, Any]]) -> str:
    """One row per exercise part (points), its shown failure under it; then policy findings and grader errors; then
    the total of every test. Students see this (results.json's top-level `output`), so rows count visible tests only:
    a hidden test's name and message appear nowhere in it (`hidden_summary` is the instructor's line)."""
    visible = [t for t in tests if t["visibility"] == "visible"]
    rows = [f"{'part':<6}{'title':<44}{'points':>13}"]
    for verdict in verdicts:
        for part in dict.fromkeys(t["part"] for t in verdict.tests):
            mine = [t for t in visible if t["tags"] == [part, verdict.exercise]]
            if not mine:
                continue
            got, most = sum(t["score"] for t in mine), sum(t["max_score"] for t in mine)
            rows.append(f"{part:<6}{mine[0]['name'].split(': ')[0][len(part) + 1:][:43]:<44}{got:>6g} / {most:g}")
            failed = [t for t in mine if t["status"] == "failed"]
            if failed:
                rows += wrapped(reason(shown_failure(failed), bool(verdict.zero)))
                if len(failed) > 1 and not verdict.zero:
                    rows.append(f"{INDENT}(and {len(failed) - 1} more failing test{'s' * (len(failed) > 2)} in {part})")
        rows += [f"{verdict.exercise} policy: {finding}" for finding in verdict.policy]
        if verdict.error:
            rows += ["grader error:", *wrapped(_first_line(verdict.error))]
    got, most = sum(t["score"] for t in tests), sum(t["max_score"] for t in tests)
    label = "total" if len(visible) == len(tests) else "total (with tests not shown here)"
    rows.append(f"{label:<50}{got:>6g} / {most:g}")
    return "\n".join(rows)


def hidden_summary(tests: list[dict[str, Any]]) -> str | None:
    """The instructor's line about hidden tests (stdout only: on Gradescope students never see it), or None."""
    hidden = [t for t in tests if t["visibility"] != "visible"]
    if not hidden:
        return None
    failed = sum(t["status"] == "failed" for t in hidden)
    return (f"hidden tests (not in the students' output): {sum(t['score'] for t in hidden):g} / "
            f"{sum(t['max_score'] for t in hidden):g} points, {failed} of {len(hidden)} failed")


def details_text(tests: list[dict[str, Any]]) -> str:
    """--details: for each exercise part, every failing test's whole message, the one the table shows first; tests
    that failed with the same message share one block (stdout: on Gradescope only instructors read it, so hidden
    tests are included and marked)."""
    blocks = []
    for part in dict.fromkeys(t["tags"][0] for t in tests):
        failed = [t for t in tests if t["tags"][0] == part and t["status"] == "failed"]
        if not failed:
            continue
        first = shown_failure(failed)
        by_output: dict[str, list[str]] = {}
        for test in [first, *(t for t in failed if t is not first)]:
            hidden = " (hidden)" if test["visibility"] != "visible" else ""
            by_output.setdefault(test["output"], []).append(f"{test['name']}{hidden}")
        blocks += [f"--- {names[0]}" + "".join(f"\n--- {n}" for n in names[1:]) + f"\n{output}"
                   for output, names in by_output.items()]
    return "\n\n".join(blocks)
