"""`make mutation LESSON=NN`: how strong are lesson NN's graded tests? Mutation-test (mutmut) the reference functions
its exercises re-implement, and the functions of the same module they call, through the graded tests only.

mutmut wants its package under src/, so this lays out a work folder (a copy of code/diffattn as src/diffattn, the
lesson's test files, the adapters and plugins, pyproject.toml plus a [tool.mutmut] section), runs `mutmut run` there
on the mutants of those functions, and prints per exercise part: mutants, killed, score, and the diff of every
survivor (each survivor is listed, with why it is equivalent, in tests/grading/README.md).

    python -m tests.grading.mutation 03 [--keep DIR]
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "code"), str(ROOT)]

from diffattn import lessons as experiments  # noqa: E402
from diffattn.grading.rubric import EXERCISES, REFERENCE  # noqa: E402

TORCH_LESSONS = {n for n, needs in experiments.REQUIRES.items() if "torch" in needs}  # read from the lessons
STRING = re.compile(r"[rbfuRBFU]{0,2}(\"[^\"]*\"|'[^']*')")
MUTANT = re.compile(r"^\s*(?P<name>(?P<module>[\w.]+)\.x_(?P<function>\w+?)__mutmut_\d+): (?P<status>.+)$")


def defining_module(name: str) -> str:
    """The module that defines `name`'s reference (diffattn.nn.functional re-exports lambda_init, say)."""
    module = REFERENCE[name].split(":")[0]
    tree = ast.parse(module_file(module).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            return node.module
    return module


def module_file(module: str) -> Path:
    return ROOT / "code" / Path(*module.split(".")).with_suffix(".py")


def given(stub_module: str) -> set[str]:
    """Library functions the exercise's stub hands to students ("You may use torch, `diffattn.nn.kernels.attention`
    and ...;" in its docstring): they call them, they do not re-implement them, so mutants of them (and of what only
    they call) say nothing about the exercise's tests."""
    text = ast.get_docstring(ast.parse((ROOT / "exercises" / f"{stub_module}.py").read_text(encoding="utf-8"))) or ""
    allowed = re.search(r"You may use(.*?);", text, re.DOTALL)
    return {n.rsplit(".", 1)[-1] for n in re.findall(r"`(diffattn\.[\w.]+)`", allowed.group(1))} if allowed else set()


def reachable(module: str, start: str, stop: set[str] = frozenset()) -> set[str]:
    """`start` and every top-level function of `module` it calls, directly or through another one, except the
    functions in `stop` (and what only they call)."""
    tree = ast.parse(module_file(module).read_text(encoding="utf-8"))
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen or name not in defs or (name in stop and name != start):
            continue
        seen.add(name)
        todo += [c.func.id for c in ast.walk(defs[name]) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)]
    return seen


def targets(lesson: str) -> dict[str, dict[str, set[str]]]:
    """part -> {module: functions whose mutants count for it}."""
    found: dict[str, dict[str, set[str]]] = {}
    for part, (_, stub_module, functions) in EXERCISES.items():
        if part.startswith(f"{lesson}."):
            for name in functions:
                module = defining_module(name)
                found.setdefault(part, defaultdict(set))[module] |= reachable(module, name, given(stub_module))
    return found


def lay_out(work: Path, lesson: str, modules: set[str]) -> list[str]:
    shutil.copytree(ROOT / "code" / "diffattn", work / "src" / "diffattn", ignore=shutil.ignore_patterns("__pycache__"))
    (work / "tests").mkdir()
    for name in ("__init__.py", "adapters.py", "conftest.py", "feedback.py"):
        shutil.copy(ROOT / "tests" / name, work / "tests" / name)
    tests = sorted(p.name for p in (ROOT / "tests").glob(f"test_{lesson}_*.py"))
    for name in tests:
        shutil.copy(ROOT / "tests" / name, work / "tests" / name)
    shutil.copy(ROOT / "conftest.py", work / "conftest.py")
    only = [f"src/{m.replace('.', '/')}.py" for m in sorted(modules)]
    config = (ROOT / "pyproject.toml").read_text() + f"""
[tool.mutmut]
source_paths = ["src"]
also_copy = ["conftest.py"]
only_mutate = {only!r}
pytest_add_cli_args = ["-m", "graded and ex{lesson}", "--impl=reference", "-p", "no:cacheprovider", "-q"]
pytest_add_cli_args_test_selection = {[f"tests/{t}" for t in tests]!r}
process_isolation = "{'forkserver' if lesson in TORCH_LESSONS else 'fork'}"
"""
    (work / "pyproject.toml").write_text(config)
    return tests


def message_only(diff: str) -> bool:
    """A mutant whose only change is inside string literals, or string literals replaced by None: an error message's
    wording (the exception, its type and when it is raised, are what the specs promise)."""
    removed = " ".join(line[1:] for line in diff.splitlines() if line.startswith("-") and not line.startswith("---"))
    added = " ".join(line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++"))

    def shape(text: str, literal: str) -> str:  # adjacent literals (implicit concatenation) count as one
        return re.sub(r"\s+", "", re.sub(rf"({STRING.pattern}\s*)+", literal, text))

    return bool(removed) and STRING.search(removed) is not None and (
        shape(removed, '""') == shape(added, '""') or shape(removed, "None") == shape(added, "None"))


def run(lesson: str, keep: Path | None) -> int:
    if not any(part.startswith(f"{lesson}.") for part in EXERCISES):
        sys.stderr.write(f"error: lesson {lesson} has no graded exercise (known: "
                         f"{', '.join(sorted({p[:2] for p in EXERCISES}))})\n")
        return 2
    by_part = targets(lesson)
    modules = {m for per in by_part.values() for m in per}
    work = keep or Path(tempfile.mkdtemp(prefix=f"mutation-{lesson}-"))
    if keep and keep.exists():
        shutil.rmtree(keep)
    work.mkdir(parents=True, exist_ok=True)
    lay_out(work, lesson, modules)
    patterns = [f"{m}.x_{f}__mutmut_*" for per in by_part.values() for m, fs in per.items() for f in sorted(fs)]
    started = time.monotonic()
    mutmut = [sys.executable, "-m", "mutmut"]
    done = subprocess.run([*mutmut, "run", *sorted(set(patterns))], cwd=work, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        return 1
    listing = subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, capture_output=True, text=True).stdout
    status = {m["name"]: (m["module"], m["function"], m["status"].strip()) for m in map(MUTANT.match, listing.splitlines()) if m}
    print(f"lesson {lesson}: mutmut on {', '.join(sorted(modules))} through {len(status)} mutants, "
          f"{time.monotonic() - started:.0f} s")
    counted_functions = {(m, f) for per in by_part.values() for m, fs in per.items() for f in fs}
    status = {n: v for n, v in status.items() if v[:2] in counted_functions}
    diffs = {n: subprocess.run([*mutmut, "show", n], cwd=work, capture_output=True, text=True).stdout
             for n, (_, _, s) in status.items() if s not in ("killed", "timeout")}
    wording = {n for n, diff in diffs.items() if message_only(diff)}
    print(f"{'part':<6}{'mutants':>8}{'wording':>8}{'killed':>8}{'score':>8}   functions")
    for part, per in sorted(by_part.items()):
        mine = {n: s for n, (m, f, s) in status.items() if f in per.get(m, set())}
        counted = [s for n, s in mine.items() if n not in wording]
        killed = sum(s in ("killed", "timeout") for s in counted)
        names = ", ".join(sorted(f for fs in per.values() for f in fs))
        print(f"{part:<6}{len(mine):>8}{len(mine) - len(counted):>8}{killed:>8}"
              f"{100 * killed / max(len(counted), 1):>7.1f}%   {names}")
    print(f"\n{len(wording)} surviving mutant(s) only reword an error message (the spec names the exception, not its "
          "words): not counted")
    for name in sorted(set(diffs) - wording):
        print(f"\nsurvived: {name} ({status[name][2]})\n{diffs[name].strip()}")
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lesson", help="lesson number, e.g. 03")
    parser.add_argument("--keep", type=Path, default=None, help="keep mutmut's work folder here (to browse it)")
    arguments = parser.parse_args()
    raise SystemExit(run(arguments.lesson.zfill(2), arguments.keep))
