"""Graded feedback says what is wrong: every graded assertion carries a message, the helpers that write them fail
exactly when they should, and the grader keeps the message while dropping pytest's and Hypothesis' noise.

The known-wrong implementations check the same from the other side: every failure they cause reads as a message
(tests/test_graders_reject_wrong.py, `test_wrong_implementation_loses_points`).
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest

from diffattn.grading.child import WIDTH, compact
from diffattn.grading.report import details_text, diagnosis, shown_failure, summary
from tests.feedback import expect_close, first_difference, mistake, refuses, show

TESTS = Path(__file__).resolve().parent
UNEXPLAINED = re.compile(r"^(AssertionError: )?assert |^AssertionError$|DID NOT RAISE")  # see the last test


def is_graded(function: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Call) and ast.unparse(d.func).endswith("mark.grade") for d in function.decorator_list)


def graded_code(tree: ast.Module) -> list[ast.FunctionDef]:
    """The graded test functions of a module and the module-level helpers they call, directly or through others."""
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    functions.update({n.name: n for c in tree.body if isinstance(c, ast.ClassDef)
                      for n in c.body if isinstance(n, ast.FunctionDef)})
    reached = [f for f in functions.values() if is_graded(f)]
    for function in reached:  # grows while it is walked
        for call in ast.walk(function):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in functions:
                helper = functions[call.func.id]
                if helper not in reached and not helper.name.startswith("test_"):
                    reached.append(helper)
    return reached


def unexplained_checks(source: str) -> list[str]:
    """`line: what` for each assert without a message and each pytest.raises in graded code."""
    found = []
    for function in graded_code(ast.parse(source)):
        for node in ast.walk(function):
            if isinstance(node, ast.Assert) and node.msg is None:
                found.append(f"{node.lineno}: assert without a message in {function.name}")
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "pytest.raises":
                found.append(f"{node.lineno}: pytest.raises in {function.name} (use tests.feedback.refuses)")
    return found


GRADED_FILES = sorted(p for p in TESTS.glob("test_*.py") if "mark.grade(" in p.read_text())


def test_the_graded_files_are_found():
    lessons = {p.name[5:7] for p in GRADED_FILES}
    assert lessons >= {"01", "02", "03", "04", "05", "07", "11"}, sorted(lessons)


@pytest.mark.parametrize("path", GRADED_FILES, ids=lambda p: p.name)
def test_every_graded_check_carries_a_message(path):
    problems = unexplained_checks(path.read_text())
    assert not problems, f"{path.name}: " + "; ".join(problems)


def test_the_message_check_sees_what_it_must():
    source = '''
import pytest
@pytest.mark.grade("01.1", points=1)
def test_graded(impl):
    assert impl.f() == 1, "f() must be 1"
    assert helper(impl)
    with pytest.raises(ValueError):
        impl.f(-1)
def helper(impl):
    assert impl.g()
    return deeper()
def deeper():
    assert True
def test_not_graded():
    assert 1
'''
    problems = unexplained_checks(source)
    assert [p.split(":")[0] for p in problems] == ["6", "7", "10", "13"], problems


# ---------------------------------------------------------------- the helpers


def test_first_difference_names_the_first_differing_entry_by_its_axes():
    want = [[0.25, 0.75], [0.5, 0.5]]
    assert first_difference([[0.25, 0.75], [0.5, 0.5]], want) is None
    assert first_difference([[0.25, 0.75], [0.5, 0.5 + 1e-13]], want, tol=1e-12) is None
    message = first_difference([[0.25, 0.75], [0.4, 0.6]], want, tol=1e-12, axes=("query", "key"))
    assert message == "query 1, key 0: expected 0.5, got 0.4 (difference 0.1 > tolerance 1e-12)", message
    assert "expected shape (2, 2), got shape (2,)" in first_difference([0.25, 0.75], want)
    assert "shape (1, 2)" in first_difference([[0.25, 0.75]], want)


def test_first_difference_treats_nan_and_infinity_exactly():
    assert first_difference([math.nan, math.inf], [math.nan, math.inf], tol=1.0) is None
    assert first_difference([0.0], [math.nan], tol=1.0) == "index 0: expected nan, got 0"
    assert first_difference([math.nan], [0.0], tol=1.0) == "index 0: expected 0, got nan"
    assert first_difference([1e308], [math.inf], tol=1e300) == "index 0: expected inf, got 1e+308"
    assert first_difference([-math.inf], [math.inf]) == "index 0: expected inf, got -inf"


def test_first_difference_relative_tolerance():
    assert first_difference([1000.5], [1000.0], tol=0.0, rel=1e-3) is None
    assert "+ 0.0001·|expected|" in first_difference([1000.5], [1000.0], tol=0.0, rel=1e-4)


def test_first_difference_compares_tensors():
    torch = pytest.importorskip("torch")
    want = torch.zeros(2, 3, dtype=torch.float64)
    got = want.clone()
    assert first_difference(got, want) is None
    got[1, 2] = 0.5
    assert first_difference(got, want, axes=("row", "column")).startswith("row 1, column 2: expected 0, got 0.5")
    assert "expected shape (2, 3), got shape (3, 2)" in first_difference(want.T, want)


def test_expect_close_fails_with_the_quantity_named():
    expect_close([1.0], [1.0], "weights")
    with pytest.raises(AssertionError, match=r"^V1 weights \(λ=0.8\): key 0: expected 1, got 2 "):
        expect_close([2.0], [1.0], "V1 weights (λ=0.8)", axes=("key",))


def test_refuses_passes_only_when_the_error_is_raised():
    with refuses(ValueError, "f(-1)"):
        raise ValueError("negative")
    with pytest.raises(AssertionError, match=r"^mistake: f\(-1\): must raise ValueError; nothing was raised$"):
        with refuses(ValueError, "f(-1)"):
            pass
    with pytest.raises(TypeError, match="its own message"):  # another error reaches the student unchanged
        with refuses(ValueError, "f(-1)"):
            raise TypeError("its own message")
    with refuses(ValueError, "f(-1)", mentioning="negative"):
        raise ValueError("n is negative")
    with pytest.raises(AssertionError, match="must say 'negative'; it said 'bad'"):
        with refuses(ValueError, "f(-1)", mentioning="negative"):
            raise ValueError("bad")


def test_show_is_compact():
    assert show(0.1 + 0.2) == "0.3"
    assert show([1.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0]) == "[1, 2.5, 3, 4, 5, 6, …]"
    assert show((1.0, [0.125])) == "(1, [0.125])"
    assert show(True) == "True" and show(3) == "3"


# ---------------------------------------------------------------- what the grader keeps of a failure


def test_compact_keeps_the_message_and_drops_pytests_reevaluation():
    lines = ["AssertionError: V2: query 0 must sum to 0.5, got 1", "assert 0.5 <= 1e-12",
             "+  where 0.5 = abs((1.0 - 0.5))"]
    assert compact(lines) == "AssertionError: V2: query 0 must sum to 0.5, got 1"


def test_compact_keeps_a_bare_asserts_explanation():
    lines = ["AssertionError: assert False", "+  where False = close([[0.1]], [[0.2]])"]
    assert compact(lines) == "\n".join(lines)


def test_compact_puts_hypothesis_case_on_one_line_without_the_implementation():
    lines = ["AssertionError: rows must sum to 1", "assert 2 <= 1e-12", "Failing test case: test_rows(",
             "impl=Implementation('exercises'),", "seed=944,", "n_q=1,", ")",
             "You can reproduce this example by temporarily adding @reproduce_failure('6.1', b'AA') as a decorator",
             "Explanation: use Verbosity.verbose to view"]
    assert compact(lines) == "AssertionError: rows must sum to 1\nfailing case: seed=944, n_q=1"
    assert compact(lines[:5]) == "AssertionError: rows must sum to 1\nfailing case: seed=944"  # cut before ")"
    explicit = ["AssertionError: m", "Failing explicit example: test_rows(", "impl=Implementation('exercises'),",
                "logits=[700.0],", ")"]
    assert compact(explicit) == "AssertionError: m\nfailing case: logits=[700.0]"


def test_compact_cuts_long_lines():
    (line,) = compact(["ValueError: " + "x" * 1000]).splitlines()
    assert len(line) == WIDTH and line.endswith("…")


def test_unexplained_failures_are_recognised():
    """The pattern test_graders_reject_wrong.py uses to find a failure that is no sentence."""
    for raw in ("AssertionError: assert False", "assert 3 == 4", "Failed: DID NOT RAISE <class 'ValueError'>",
                "AssertionError"):
        assert UNEXPLAINED.search(raw), raw
    for explained in ("AssertionError: V1 weights: query 0, key 1: expected 0, got 0.1",
                      "TypeError: softmax returned tuple; its docstring promises list[float]",
                      "AssertionError: mistake: f(-1): must raise ValueError; nothing was raised"):
        assert not UNEXPLAINED.search(explained), explained


# ---------------------------------------------------------------- what the table shows of a part's failures


def failure(name: str, output: str, status: str = "failed", visibility: str = "visible", part: str = "05.3") -> dict:
    return {"name": f"{part} norm: {name}", "status": status, "output": output, "tags": [part, "ex05"], "part": part,
            "visibility": visibility, "score": 0.0 if status == "failed" else 1.0, "max_score": 1.0}


class Verdict:  # what report.summary reads of the grader's
    exercise, zero, policy, error = "ex05", None, [], None

    def __init__(self, tests: list[dict]):
        self.tests = [{"part": t["part"]} for t in tests]


def unwrapped(table: str) -> str:
    return " ".join(line.strip() for line in table.splitlines())


def test_the_marked_failure_is_shown_before_the_first_one():
    """The known case: a norm over d_model fails a value check first, the head-separation check names it."""
    value = "AssertionError: RMSNorm(x)·weight·(1 − λ_init) per head: expected -0.290462, got -0.238908"
    long = "normalise over each head's 2d channels, not d_model; head 1, " + "channel 0 differs " * 12
    concept = "AssertionError: " + mistake(long)
    tests = [failure("test_values", value), failure("test_heads", concept), failure("test_ok", "", "passed")]
    assert diagnosis(concept).startswith("mistake: normalise over") and diagnosis(value) is None
    assert shown_failure([t for t in tests if t["status"] == "failed"])["name"].endswith("test_heads")
    table = summary([Verdict(tests)], tests)
    assert "expected -0.290462" not in table and "(and 1 more failing test in 05.3)" in table
    assert f"test_heads: mistake: {long.strip()}" in unwrapped(table)
    assert max(map(len, table.splitlines())) <= 118  # wrapped, not cut
    assert shown_failure(tests[:1])["name"].endswith("test_values")  # nothing marked: the first failure


def test_a_refusal_that_did_not_happen_is_marked():
    with pytest.raises(AssertionError) as info:
        with refuses(ValueError, "softmax([])"):
            pass
    assert diagnosis(f"AssertionError: {info.value}") == "mistake: softmax([]): must raise ValueError; nothing was raised"


def test_the_total_is_the_whole_grade_hidden_tests_included():
    tests = [failure("test_a", "", "passed"), failure("test_secret", "boom", visibility="hidden")]
    table = summary([Verdict(tests)], tests)
    assert "secret" not in table and "boom" not in table
    assert table.splitlines()[-1].split() == ["total", "(with", "tests", "not", "shown", "here)", "1", "/", "2"]
    assert summary([Verdict(tests[:1])], tests[:1]).splitlines()[-1].split() == ["total", "1", "/", "1"]


def test_details_print_every_failure_the_shown_one_first_and_repeats_once():
    tests = [failure("test_values", "AssertionError: expected 1, got 2"),
             failure("test_heads", "AssertionError: mistake: per head"),
             failure("test_x", "NotImplementedError: exercise 05.3"), failure("test_y", "NotImplementedError: exercise 05.3"),
             failure("test_hidden", "hidden message", visibility="hidden"), failure("test_ok", "", "passed")]
    assert details_text(tests) == (
        "--- 05.3 norm: test_heads\nAssertionError: mistake: per head\n\n"
        "--- 05.3 norm: test_values\nAssertionError: expected 1, got 2\n\n"
        "--- 05.3 norm: test_x\n--- 05.3 norm: test_y\nNotImplementedError: exercise 05.3\n\n"
        "--- 05.3 norm: test_hidden (hidden)\nhidden message")
    assert details_text(tests[-1:]) == ""
