"""`make handout DEST=dir`: the student copy of the course, without the solutions of the exercises.

From this checkout's last commit (HEAD, exported with `git archive`: edits in the working tree never reach a
handout) it builds DEST where:

* each exercises/exNN_*.py is its canonical stub, tests/grading/stubs/exNN_*.py (the one place an exercise's
  signatures and docstrings are declared: every function's body `raise NotImplementedError`), whatever exercises/
  holds: an instructor who solves the exercises in their checkout, and commits them, ships only the stubs; the build
  checks that every exercise function of the handout raises NotImplementedError, and stops with one error line
  (exit 2, nothing left in DEST) otherwise;
* every reference function an exercise re-implements (diffattn.grading.rubric REFERENCE) is replaced, through the AST, by
  the stub's signature and docstring over a call to the student's function (`calls_yours`, diffattn.core.yours), so
  that lessons, notebooks and tests run on the student's code and name the exercise they wait for;
* a lesson code block that shows a solution line is replaced by a pointer to the exercise;
* the known-wrong and the independent correct implementations and the grader's own meta-tests are left out (several
  wrong answers are one line away from the solution);
* MANIFEST.sha256 lists the grading files, so the handout's `make grade` reports an edited test instead of trusting it;
* with `--exercises` (`make handout DEST=dir EXERCISES="ex01 ex02"`, one assignment), its GitHub Classroom workflow
  grades only those exercises (diffattn.grading.assignment).

`solution_lines` is what "nothing of the solutions left" means, and tests/test_handout.py greps the handout for it.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

from diffattn.grading.manifest import write_manifest

STUBS = "tests/grading/stubs"  # the canonical stubs: exercises/ in a handout is a copy of them
LEFT_OUT = ("tests/wrong/", "tests/correct/", "tests/grading/hostile/", "tests/grading/mutation", f"{STUBS}/",
            "tests/test_graders_reject_wrong.py", "tests/test_grading_hostile.py", "tests/test_handout.py",
            "tests/test_mutation")
ANSWERS = ("lessons/answers/", "lessons/src/answers/")  # left out with --no-answers: the instructor chooses
HANDOUT_NOTE = ("**This is the student handout.** The functions the exercises ask for are yours to write, in "
                "`exercises/`: the lessons, the notebooks and `make test` run on your code, and each stops with one "
                "line naming the exercise it needs until you have written it. `make grade` grades your exercises "
                "(`make grade EX=ex01` for one).\n")
MIN_LINE = 25  # shorter solution lines (`return total`) are too generic to say anything
FENCE = re.compile(r"```[a-z]*\n.*?```", re.DOTALL)


class HandoutError(Exception):
    """The handout cannot be built as asked (one line; exit 2)."""


def export_head(repo: Path, target: Path) -> str:
    """Write `repo`'s committed tree (HEAD) into `target`; returns the commit's short hash."""
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", "HEAD"], capture_output=True,
                             check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def uncommitted(repo: Path) -> list[str]:
    """Paths whose working-tree state differs from HEAD (what a handout built from HEAD leaves out)."""
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "-z", "--untracked-files=no"],
                            capture_output=True, check=True).stdout.decode()
    return sorted(entry[3:] for entry in status.split("\0") if len(entry) > 3)


def tracked_files(root: Path) -> list[str]:
    """The committed files of a checkout (git ls-files), or every file of a tree `export_head` wrote."""
    if not (root / ".git").exists():
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True)
    return sorted(p for p in listed.stdout.decode().split("\0") if p and (root / p).is_file())


def _definition(path: Path, name: str) -> tuple[Path, ast.FunctionDef]:
    """The top-level `def name` for `name` in `path`, following `from diffattn.x import name` re-exports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return path, node
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and any(a.name == name for a in node.names):
            return _definition(_code_root(path).joinpath(*node.module.split(".")).with_suffix(".py"), name)
    raise LookupError(f"no definition of {name} in {path}")


def _code_root(path: Path) -> Path:
    """The folder that holds the `diffattn` package (code/)."""
    return next(p for p in path.parents if (p / "diffattn").is_dir())


def _span(node: ast.FunctionDef) -> tuple[int, int]:
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return first - 1, node.end_lineno


def _adapters(root: Path) -> tuple[dict, dict]:
    """EXERCISES and REFERENCE of `root`'s rubric (diffattn/grading/rubric.py, loaded from that file, whatever is on
    sys.path)."""
    spec = importlib.util.spec_from_file_location("_handout_rubric", root / "code" / "diffattn" / "grading" / "rubric.py")
    rubric = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rubric)
    return rubric.EXERCISES, rubric.REFERENCE


def definitions(root: Path, stubs: str = STUBS) -> dict[str, tuple[Path, ast.FunctionDef, Path, ast.FunctionDef]]:
    """name -> (reference file, reference def, stub file, stub def) for every exercised function; the stubs are read
    from `root`/`stubs` (the canonical ones; a handout's are in exercises/)."""
    exercises, references = _adapters(root)
    found = {}
    for _, module, functions in exercises.values():
        stub_path = root / stubs / f"{module}.py"
        if not stub_path.is_file():
            raise HandoutError(f"exercise {module} has no canonical stub {stubs}/{module}.py (its signatures and "
                               f"docstrings over `raise NotImplementedError`): add it")
        for name in functions:
            dotted, _ = references[name].split(":")
            ref_file, ref_node = _definition(root / "code" / Path(*dotted.split(".")).with_suffix(".py"), name)
            stub_file, stub_node = _definition(stub_path, name)
            found[name] = (ref_file, ref_node, stub_file, stub_node)
    return found


def raises_not_implemented(function: ast.FunctionDef) -> bool:
    """The body of a stub: an optional docstring, then only `raise NotImplementedError(...)`."""
    body = function.body[1:] if ast.get_docstring(function) is not None else function.body
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    raised = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"


def unsolved(root: Path) -> list[str]:
    """Each exercise function of `root`'s exercises/ whose body is not a stub's (empty for a correct handout)."""
    exercises, _ = _adapters(root)
    problems = []
    for _, module, functions in exercises.values():
        path = root / "exercises" / f"{module}.py"
        tree = ast.parse(path.read_text(encoding="utf-8")) if path.is_file() else ast.Module(body=[], type_ignores=[])
        defined = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        problems += [f"exercises/{module}.py: {name} " + ("is missing" if name not in defined else
                     "does not raise NotImplementedError (its body is not the stub's)")
                     for name in functions if name not in defined or not raises_not_implemented(defined[name])]
    return problems


def _normal(line: str) -> str:
    return line.split("  #")[0].strip()


def solution_lines(root: Path) -> dict[str, set[str]]:
    """function name -> the distinctive lines of its reference body: at least MIN_LINE characters (comments and
    indentation aside) and found in no other Python file of the handout, nor elsewhere in its own file."""
    counts: Counter[str] = Counter()
    for path in tracked_files(root):  # exercises/ too is replaced (by the stubs)
        if path.endswith(".py") and not path.startswith((*LEFT_OUT, "exercises/")):
            counts.update(map(_normal, (root / path).read_text(encoding="utf-8").splitlines()))
    lines = {}
    for name, (ref_file, ref_node, _, _) in definitions(root).items():
        source = ref_file.read_text(encoding="utf-8").splitlines()
        body = ref_node.body[1:] if isinstance(ref_node.body[0], ast.Expr) else ref_node.body
        own = Counter(map(_normal, source[body[0].lineno - 1: ref_node.end_lineno]))
        lines[name] = {line for line, n in own.items() if len(line) >= MIN_LINE and counts[line] == n}
    return lines


def _strip_lesson(text: str, solutions: dict[str, set[str]], exercise_of: dict[str, str]) -> str:
    def replace(block: re.Match) -> str:
        shown = {_normal(line) for line in block.group(0).splitlines()}
        names = [n for n, lines in solutions.items() if lines & shown]
        if not names:
            return block.group(0)
        return f"*(This handout leaves out the code of `{names[0]}`: it is exercise {exercise_of[names[0]]}.)*"
    return FENCE.sub(replace, text)


def _unlink_left_out(text: str, folder: Path) -> str:
    """A link into a path the handout leaves out (known-wrong answers, the grader's kit) becomes its plain text."""
    def replace(link: re.Match) -> str:
        target = os.path.normpath(folder / link.group(2)).replace(os.sep, "/")
        return link.group(1) if target.startswith(LEFT_OUT) or target.rstrip("/") + "/" in LEFT_OUT else link.group(0)
    return re.sub(r"\[([^\]]*)\]\((?!https?://)([^)\s#]+)\)", replace, text)


def calls_yours(stub_file: Path, stub: ast.FunctionDef) -> list[str]:
    """The stub's signature and docstring over a body that calls the student's function of the same name (the
    handout's lessons then run on the student's code; diffattn.core.yours). Arguments pass as they came."""
    source = stub_file.read_text(encoding="utf-8").splitlines()
    start, _ = _span(stub)
    docstring = stub.body[0]
    a = stub.args
    passed = ([p.arg for p in a.posonlyargs] + [p.arg for p in a.args] + ([f"*{a.vararg.arg}"] if a.vararg else [])
              + [f"{p.arg}={p.arg}" for p in a.kwonlyargs] + ([f"**{a.kwarg.arg}"] if a.kwarg else []))
    indent = " " * docstring.col_offset
    return source[start:docstring.end_lineno] + [
        f"{indent}from diffattn.core.yours import solution  # the handout runs your exercises/{stub_file.name}",
        "",
        f"{indent}return solution({stub_file.stem!r}, {stub.name!r})({', '.join(passed)})"]


def build(root: Path, dest: Path, assignment: list[str] | None = None, answers: bool = True) -> list[str]:
    """Write the handout to `dest` (which must not exist); returns the functions replaced by their stubs. With
    `assignment` (exercise names such as "ex01"), its Classroom workflow grades only those; without `answers`, the
    answers to the lessons' questions (lessons/answers/) stay with the instructor. HandoutError, and nothing in
    `dest`, when an exercise function of the result would not raise NotImplementedError."""
    if dest.exists():
        raise FileExistsError(f"{dest} exists: choose a new folder")
    try:
        return _build(root, dest, assignment, answers)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise


def _build(root: Path, dest: Path, assignment: list[str] | None, answers: bool) -> list[str]:
    from diffattn.grading.assignment import WORKFLOW, classroom_workflow, exercise_names

    exercises, _ = _adapters(root)
    chosen = exercise_names(assignment, sorted({f"ex{part[:2]}" for part in exercises})) if assignment else None
    solutions = solution_lines(root)
    exercise_of = {fn: part for part, (_, _, fns) in exercises.items() for fn in fns}
    found = definitions(root)
    modules = sorted({module for _, module, _ in exercises.values()})
    stray = [p for p in tracked_files(root) if re.match(r"^exercises/ex\d\d_\w+\.py$", p) and p[10:-3] not in modules]
    if stray:  # not in the rubric, so not replaced by a stub: it could be anything, a solution too
        raise HandoutError(f"{stray[0]} is no exercise of diffattn/grading/rubric.py: add it there (and its stub to "
                           f"{STUBS}/) or remove it")
    for path in tracked_files(root):
        if path.startswith(LEFT_OUT) or (not answers and path.startswith(ANSWERS)):
            continue
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / path, target)
    for module in modules:  # whatever exercises/ holds, the student gets the stub
        (dest / "exercises").mkdir(exist_ok=True)
        shutil.copyfile(root / STUBS / f"{module}.py", dest / "exercises" / f"{module}.py")
    by_file: dict[Path, list[tuple[int, int, list[str]]]] = {}
    for name, (ref_file, ref_node, stub_file, stub_node) in found.items():
        by_file.setdefault(dest / ref_file.relative_to(root), []).append(
            (*_span(ref_node), calls_yours(stub_file, stub_node)))
    for path, edits in by_file.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        for start, end, stub in sorted(edits, reverse=True):
            lines[start:end] = stub
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    texts = sorted((dest / "lessons").rglob("*.md")) + sorted((dest / "docs").rglob("*.md")) + [dest / "README.md"]
    for lesson in texts:  # the clean text and its source
        text = _strip_lesson(lesson.read_text(encoding="utf-8"), solutions, exercise_of)
        if not answers:  # the link to the answers becomes words: "answers (from your instructor)"
            text = re.sub(r"\[([^\]]*)\]\(answers/\d\d\.md\)", r"answers (from your instructor)", text)
        folder = Path(*[part for part in lesson.parent.relative_to(dest).parts if part != "src"])  # a source's links
        lesson.write_text(_unlink_left_out(text, folder), encoding="utf-8")  # are written as its clean copy sees them
    readme = dest / "README.md"
    title, _, rest = readme.read_text(encoding="utf-8").partition("\n")
    readme.write_text(f"{title}\n\n{HANDOUT_NOTE}\n{rest}", encoding="utf-8")
    if chosen:
        workflow = dest / WORKFLOW
        workflow.write_text(classroom_workflow(workflow.read_text(encoding="utf-8"), chosen), encoding="utf-8")
    problems = unsolved(dest)
    if problems:
        raise HandoutError(f"the handout would ship a solution: {problems[0]}"
                           + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    write_manifest(dest)
    return sorted(found)


def build_from_head(repo: Path, dest: Path, assignment: list[str] | None = None,
                    answers: bool = True) -> tuple[str, list[str], list[str]]:
    """`build` on `repo`'s HEAD; returns the commit, the functions replaced by their stubs and the exercise files
    whose committed version is not their stub (solved, say: the handout has the stub)."""
    if dest.exists():
        raise FileExistsError(f"{dest} exists: choose a new folder")
    with tempfile.TemporaryDirectory(prefix="diffattn-handout-") as scratch:
        commit = export_head(repo, Path(scratch))
        replaced = build(Path(scratch), dest, assignment, answers)
        differ = sorted(p.relative_to(dest).as_posix() for p in (dest / "exercises").glob("ex*.py")
                        if (Path(scratch) / p.relative_to(dest)).read_bytes() != p.read_bytes())
        return commit, replaced, differ


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m diffattn.grading.handout", description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="the folder to write (must not exist)")
    parser.add_argument("--exercises", nargs="*", default=[], help="one assignment: its Classroom workflow grades only "
                                                                   "these (ex01 ex02, or 01,02)")
    parser.add_argument("--no-answers", action="store_true", help="leave the answers to the lessons' questions "
                                                                  "(lessons/answers/) out of the handout")
    args = parser.parse_args(argv)
    repo = Path(__file__).resolve().parents[3]
    try:
        commit, replaced, differ = build_from_head(repo, args.dest, args.exercises or None, not args.no_answers)
    except (FileExistsError, LookupError, HandoutError, ValueError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    print(f"wrote the handout to {args.dest} from commit {commit}: {len(replaced)} reference functions replaced by "
          f"their stubs, exercises/ from {STUBS}/")
    if differ:
        print(f"exercises/ at {commit} differs from the stubs in {', '.join(differ)}: the handout has the stubs")
    if args.exercises:
        print(f"its Classroom workflow grades {' '.join(args.exercises)} only")
    left_out = uncommitted(repo)
    if left_out:
        print(f"not in it: {len(left_out)} uncommitted change(s), e.g. {', '.join(left_out[:3])} (commit them to ship "
              f"them; exercises you did here stay here)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
