"""A fuzz test of `diffattn`, generated from the command line's own parser.

Every subcommand and every option is found by walking `diffattn.cli.build_parser()`'s actions, so a new flag is
fuzzed without editing this file. Hypothesis draws the arguments (negatives, zero, huge and boundary numbers, NaN and
infinities, empty strings, an existing folder, an existing file, a missing path, corrupt files, real checkpoints) and
each invocation must keep the command line's contract:

- exit 0, or exactly one line starting with `error:` on stderr and exit 2;
- never a Python traceback, never a time or memory limit reached (4 GiB of address space, a wall-clock limit);
- no file created or changed outside the output paths it was given (or the outputs/ folder its defaults name, in a
  scratch root), nothing left behind when it fails, and nothing written into this repository.

Speed: importing torch costs 1-2 s per process, so a worker process imports the CLI and every module its commands
load once, then forks one child per invocation; the child sets its own limits, chdirs into a fresh scratch folder
(also $DIFFATTN_ROOT, so every default output lands there), runs `diffattn.cli.main(argv)` with stdout and stderr
captured, and exits with its status (an uncaught exception prints its traceback and exits 1, as `diffattn`
does). `test_the_worker_sees_what_python_dash_m_sees` checks that claim against real subprocesses.

Heavy valid paths (training, benchmarks, grading, a lesson's experiments, evaluation passes) are not run: the worker
replaces each function that starts such work (HEAVY) by one that raises WorkReached, a BaseException, after all of
the command's own validation has run. The child reports that as a success that stopped at the work; the work itself
is tested by each lesson's tests. Costly pure-Python paths get drawn sizes that stay cheap (CHEAP_CAP).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "code"), "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
MEMORY_LIMIT = 4 << 30  # bytes of address space per invocation (torch imported: about 0.7 GB of it)
TIME_LIMIT_S = 60.0  # per invocation; a draw that reaches no heavy work finishes in well under a second
FAST_EXAMPLES = 14  # per subcommand: 17 subcommands → about 240 invocations in `make test`
SLOW_EXAMPLES = 130  # per subcommand: about 2,200 invocations in `make test-slow`

# Functions that start a command's heavy work, after its validation (module, attribute). A missing module or
# attribute is skipped, so the worker also runs on a Python without torch (every torch command then says so).
HEAVY = [
    ("diffattn.lessons", "load"),  # lesson, course: replaced by load-then-stop (load validates the number)
    ("diffattn.perf.bench", "run"), ("diffattn.perf.suite", "run"),
    ("diffattn.grading.grader", "grade_exercises"),
    ("diffattn.training.loop", "GPT"),  # train, compare, eval suite: train() has checked everything when it builds the model
    ("diffattn.training.compare", "overhead"), ("diffattn.training.runs", "train_missing"),
    ("diffattn.training.shipped", "retrain"), ("diffattn.training.shipped", "band"),
    ("diffattn.nn.device", "device_report"),
    ("diffattn.training.warmstart.experiment", "run_all"), ("diffattn.training.warmstart.experiment", "lora_sweep"),
    ("diffattn.training.warmstart.convert", "convert"), ("diffattn.training.warmstart.hf", "require_transformers"),
    ("diffattn.eval.needle_accuracy", "table2"), ("diffattn.eval.allocation", "allocation"),
    ("diffattn.eval.outliers", "outliers"), ("diffattn.eval.quantize", "quantized_retrieval"),
    ("diffattn.eval.kinds", "sweep"),
]
PRELOAD = ["torch", "diffattn.cli", "diffattn.training.checkpoint", "diffattn.data", "diffattn.training.ablation", "diffattn.eval.study_summary",
           "diffattn.eval.sweep_report", "diffattn.lessons.quotes", "diffattn.plan.skill", "safetensors.torch"]


class WorkReached(BaseException):
    """Raised where a command's heavy work would start; BaseException, so `except Exception` cleanups let it by."""


# ---------------------------------------------------------------------------------------------- the worker


def _stop_at(name: str, real=None):
    def stop(*args, **kwargs):
        if real is not None:
            real(*args, **kwargs)
        raise WorkReached(name)
    return stop


def _install_stops() -> list[str]:
    installed = []
    for module_name, attribute in HEAVY:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, attribute):
            real = getattr(module, attribute) if attribute == "load" else None
            setattr(module, attribute, _stop_at(f"{module_name}.{attribute}", real))
            installed.append(f"{module_name}.{attribute}")
    return installed


WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
WRITE_EVENTS = {"os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "os.symlink", "os.link", "os.truncate",
                "os.chmod", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move", "shutil.copytree"}


def _child(request: dict, capture: Path) -> None:
    """In the forked child: limits, scratch folder, captured output, the CLI; never returns."""
    code, reached, writes = 1, None, []
    try:
        os.setpgrp()  # the worker kills the whole group at the time limit (a command's own children included)
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        os.chdir(request["cwd"])
        os.environ["DIFFATTN_ROOT"] = request["cwd"]
        for fd, name, flags in ((0, os.devnull, os.O_RDONLY), (1, capture / "stdout", os.O_WRONLY | os.O_CREAT),
                                (2, capture / "stderr", os.O_WRONLY | os.O_CREAT)):
            os.dup2(os.open(name, flags, 0o644), fd)
        repo = str(ROOT) + os.sep

        def audit(event: str, args: tuple) -> None:  # every write this process makes, by path
            if event == "open":
                path, mode, flags = args
                if not (isinstance(mode, str) and any(c in mode for c in "wax+")) and not (flags or 0) & WRITE_FLAGS:
                    return
                paths = [path] if isinstance(path, (str, bytes, os.PathLike)) else []  # not an fd
            elif event in WRITE_EVENTS:
                paths = [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
            else:
                return
            for p in paths:
                full = os.path.realpath(os.fsdecode(p))  # a scratch link into the checkout is the checkout
                if full.startswith(repo):
                    writes.append(f"{event} {full}")

        sys.addaudithook(audit)
        from diffattn import cli

        try:
            code = cli.main(request["argv"])
        except WorkReached as stop:
            code, reached = 0, str(stop)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except BaseException:  # what the interpreter does with an uncaught exception
            traceback.print_exc()
            code = 1
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            (capture / "meta").write_text(json.dumps({"reached": reached, "writes": writes[:20]}))
        finally:
            os._exit(code if isinstance(code, int) else 1)


def _ends(text: str, keep: int = 12000) -> str:
    return text if len(text) <= 2 * keep else text[:keep] + "\n[...]\n" + text[-keep:]


def serve() -> None:
    """The worker: one JSON request per line on stdin ({"argv", "cwd", "capture"}), one JSON answer per line."""
    sys.dont_write_bytecode = True
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    installed = _install_stops()
    if "torch" in sys.modules:  # a model built on the meta device (compare counts parameters so) imports torch._refs
        import torch            # once per process: 1.2 s that every child would pay again

        with torch.device("meta"):
            torch.nn.init.normal_(torch.nn.Embedding(2, 2).weight)
    answer = sys.stdout
    answer.write(json.dumps({"ready": installed}) + "\n")
    answer.flush()
    for line in sys.stdin:
        request = json.loads(line)
        capture = Path(request["capture"])
        started = time.time()
        pid = os.fork()
        if pid == 0:
            _child(request, capture)
        deadline, timed_out = time.monotonic() + request.get("timeout", TIME_LIMIT_S), False
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                timed_out = True
                os.killpg(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.002)
        try:
            os.killpg(pid, signal.SIGKILL)  # anything the command left running
        except (ProcessLookupError, PermissionError):
            pass
        meta_path = capture / "meta"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"reached": None, "writes": []}
        answer.write(json.dumps({"rc": os.waitstatus_to_exitcode(status), "timed_out": timed_out,
                                 "stdout": _ends((capture / "stdout").read_text(errors="replace")),
                                 "stderr": _ends((capture / "stderr").read_text(errors="replace")),
                                 "started": started, "ended": time.time(), **meta}) + "\n")
        answer.flush()


if __name__ == "__main__" and sys.argv[1:] == ["--serve"]:
    serve()
    raise SystemExit(0)


# ------------------------------------------------------------------------------------------- the harness

from hypothesis import HealthCheck, given, settings  # noqa: E402  (the worker above needs neither)
from hypothesis import strategies as st  # noqa: E402

from diffattn.cli import build_parser  # noqa: E402


class Worker:
    def __init__(self, scratch: Path):
        self.scratch = scratch
        self.log = open(scratch / "worker.log", "w")
        self.process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve"], cwd=scratch,
                                        env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                        text=True)
        hello = self.process.stdout.readline()
        assert hello, f"the fuzz worker did not start: {(scratch / 'worker.log').read_text()[-3000:]}"
        self.stops = json.loads(hello)["ready"]

    def run(self, argv: list[str], cwd: Path) -> dict:
        capture = self.scratch / "capture"
        shutil.rmtree(capture, ignore_errors=True)
        capture.mkdir()
        self.process.stdin.write(json.dumps({"argv": argv, "cwd": str(cwd), "capture": str(capture)}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the fuzz worker died on {argv}: {(self.scratch / 'worker.log').read_text()[-3000:]}"
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.log.close()


# The scratch folder every invocation starts from: one of each kind of path an argument can name
def make_template(folder: Path) -> None:
    folder.mkdir()
    (folder / "dir").mkdir()
    (folder / "dir" / "keep.txt").write_text("kept\n")
    (folder / "empty").mkdir()
    (folder / "file.txt").write_text("hello\n")
    (folder / "corrupt.json").write_text('{"hidden_size": 4096, "num_att')
    (folder / "list.json").write_text("[1, 2, 3]\n")
    (folder / "corrupt.pt").write_bytes(b"PK\x03\x04 not a zip archive" * 3)
    (folder / "badckpt").mkdir()
    (folder / "badckpt" / "checkpoint.pt").write_bytes(b"\x80\x02garbage")
    (folder / "badweights").mkdir()
    (folder / "badweights" / "model.safetensors").write_bytes(b"\xff" * 64)
    (folder / "badweights" / "config.json").write_text('{"model": {"attention": "baseline"}}')
    shutil.copy(ROOT / "code" / "diffattn" / "plan" / "configs" / "llama-3.2-1b.json", folder / "llama.json")
    models = ROOT / "outputs" / "models" / "cpu-tiny"
    for name, source in (("base", models / "needles" / "baseline"), ("v1", models / "text" / "diff_v1")):
        if source.is_dir():
            shutil.copytree(source, folder / name)


# What a subcommand's scratch root holds besides, so that its valid paths are reachable: the grading tree (links
# into the checkout: the grader only reads it before its work, and the audit follows links) and a copy of the
# shipped checkpoints to verify
LINKS = {"grade": ["code", "tests", "exercises", "conftest.py", "pyproject.toml"]}
COPIES = {"models": ["outputs/models"]}


def template_for(state: dict, command: str) -> Path:
    folder = state["scratch"] / f"template-{command}"
    if command not in state["templates"]:
        shutil.copytree(state["scratch"] / "template", folder, symlinks=True)
        for extra in LINKS.get(command, []):
            (folder / extra).symlink_to(ROOT / extra)
        for extra in COPIES.get(command, []):
            shutil.copytree(ROOT / extra, folder / extra, ignore=shutil.ignore_patterns("__pycache__"))
        state["templates"][command] = snapshot(folder)
    return folder


def snapshot(folder: Path) -> dict[str, tuple]:
    """relative path → (kind, size, content hash) for everything under `folder`; links are not followed."""
    found = {}
    for where, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(where, name)
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                found[rel] = ("dir",)
            else:
                found[rel] = ("file", path.stat().st_size, hashlib.sha1(path.read_bytes()).hexdigest())
    return found


def changes(before: dict, after: dict) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


INTS = ["0", "1", "2", "3", "-1", "-7", "8", "64", "1000", "4096", "65536", "1048577", "100000000000",
        "1" + "0" * 30, "9" * 5000, "-0", "1e3", "nan", "inf", "", " 5", "0x10", "1_000", "abc"]
FLOATS = ["0", "-0.0", "1", "-1", "0.5", "0.9", "1e-320", "1e308", "1e309", "-1e309", "nan", "inf", "-inf", "", "abc",
          "1e3", "2", "700", "-700"]
PATHS = ["dir", "empty", "file.txt", "missing", "missing/deeper/out.json", "corrupt.json", "list.json", "corrupt.pt",
         "badckpt", "badweights", "base", "v1", "llama.json", "file.txt/sub", "", ".", "new.json", "newdir",
         "dir/keep.txt"]
WORDS = ["", "abc", "0", "-1", "1e9", "10B", "-1T", "0.5T", "nan", "inf", "1,2,3", ",", "é∂ß", "a b", "-", "1.5T",
         "cpu", "cuda", "cuda:7", "auto", "text", "needles", "mqar", "baseline", "diff_v1", "diff_v2", "cpu-tiny",
         "gpu-small", "llama-3.1-8b", "schedule,0.8", "value_len=3", "pad=end", "x=y=z",
         "n_needles=1000000000", "n_pairs=-1", "value_len=0", "key_len=100000", "01", "13", "99", "ex01",
         "reference", "tests.wrong.w01_softmax_in_place", "text,init", "16,8", "2,1", "scale", "fixed", "offset"]

# Drawn values that would be valid and slow (pure-Python work grows with them) stay under this cap.
CHEAP_CAP = {("snr", "--n"): 4096, ("snr", "--trials"): 8}
# A valid, cheap starting point per subcommand, so that draws also get past the first check; every option is still
# drawn from the pools above, and options not listed here are drawn from them only.
BASE = {
    "lesson": {"number": "01"},
    "course": {"--lessons": "01"},
    "accounting": {"--hidden": "4096", "--heads": "32", "--head-dim": "128", "--layers": "32"},
    "snr": {"--n": "64", "--trials": "2"},
    "lessons": {"action": "check"},
    "bench": {"--quick": True, "--device": "cpu"},
    "grade": {"--only": ["ex01"], "--impl": "reference"},
    "train": {"--preset": "cpu-tiny", "--variant": "baseline", "--steps": "2", "--device": "cpu"},
    "compare": {"--preset": "cpu-tiny", "--steps": "2", "--device": "cpu"},
    "eval": {"kind": "retrieval", "--ckpt": "base"},
    "plan": {"--preset": "llama-3.1-8b", "--context": "8192", "--hallucination": "high", "--budget-tokens": "1B",
             "--mode": "uptrain"},
    "convert": {"src": "base"},
    "warmstart": {},
    "study": {},
    "sweep": {},
    "models": {"action": "verify"},
    "gpu-check": {"--device": "cpu"},
}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def number_kind(action: argparse.Action):
    kind = getattr(action.type, "kind", action.type)  # a bounded type keeps its base type as .kind
    return kind if kind in (int, float) else None


def pool(command: str, action: argparse.Action) -> list[str]:
    name = action.option_strings[0] if action.option_strings else action.dest
    if action.choices is not None:
        values = [str(c) for c in action.choices] * 3 + ["", "nope", "-1"]
    elif number_kind(action) is int:
        high = getattr(action.type, "high", None)
        values = INTS + ([str(high), str(high + 1), str(-high)] if high is not None else [])
        cap = CHEAP_CAP.get((command, name))
        if cap is not None:
            values = [v for v in values if not _int_between(v, cap, high)]
    elif number_kind(action) is float:
        high = getattr(action.type, "high", None)
        values = FLOATS + ([repr(high), repr(high * 1.001)] if high is not None else [])
    elif action.type is Path or (action.type is None and name in ("--out", "--json", "--data", "--config", "src")):
        values = PATHS
    else:
        values = WORDS + PATHS
    return values


def _int_between(text: str, low: int, high: int | None) -> bool:
    try:
        value = int(text)
    except ValueError:
        return False
    return value > low and (high is None or value <= high)


@st.composite
def invocation(draw, command: str, parser: argparse.ArgumentParser) -> list[str]:
    """argv for one run of `command`: positionals first, then options in a drawn order. A draw is clean (BASE values
    only), changes one argument (so each check is reached with everything else valid), or is wild (any argument may
    be absent, BASE or drawn from its pool)."""
    base = BASE.get(command, {})
    actions = [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    style = draw(st.sampled_from(["clean", "one", "one", "one", "wild", "wild"]))
    changed = draw(st.integers(0, len(actions) - 1)) if style == "one" else None
    argv, options = [command], []
    for index, action in enumerate(actions):
        name = action.option_strings[0] if action.option_strings else action.dest
        if style == "wild":
            choice = draw(st.sampled_from(["base", "base", "fuzz", "fuzz", "absent"] if name in base else
                                          ["fuzz", "absent", "absent"]))
        elif index == changed:
            choice = draw(st.sampled_from(["fuzz", "fuzz", "fuzz", "absent"]))
        else:
            choice = "base" if name in base else "absent"
        if not action.option_strings:  # a positional: absent only when optional or by a small chance
            if choice == "absent" and action.nargs not in ("?", "*") and draw(st.integers(0, 9)):
                choice = "fuzz"
            if choice == "absent":
                continue
            argv.append(base[name] if choice == "base" else draw(st.sampled_from(pool(command, action))))
            continue
        if choice == "absent" or (choice == "base" and base[name] is False):
            continue
        flag = draw(st.sampled_from(action.option_strings))
        if action.nargs == 0:
            options.append([flag])
            continue
        if choice == "base":
            values = base[name] if isinstance(base[name], list) else [base[name]]
        else:
            count = draw(st.integers(1, 3)) if action.nargs in ("+", "*") else 1
            values = [draw(st.sampled_from(pool(command, action))) for _ in range(count)]
        repeats = draw(st.integers(1, 2)) if isinstance(action, argparse._AppendAction) else 1
        for _ in range(repeats):
            if len(values) == 1 and draw(st.booleans()):
                options.append([f"{flag}={values[0]}"])
            else:
                options.append([flag, *values])
    options = draw(st.permutations(options))
    argv += [token for option in options for token in option]
    extra = draw(st.sampled_from([None] * 12 + ["--bogus", "extra", "-h", "--", "-1"])) if style == "wild" else None
    return argv + ([extra] if extra else [])


def output_roots(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """The paths given to this invocation's output options (a Path-typed --out or --json), relative to its scratch
    folder; "" or "." is the folder itself."""
    flags = [flag for action in parser._actions for flag in action.option_strings
             if action.dest in ("out", "json") and action.type is Path]
    roots = []
    for i, token in enumerate(argv[1:], 1):
        flag, sep, value = token.partition("=")
        matches = [f for f in flags if f == flag or (flag.startswith("--") and len(flag) > 2 and f.startswith(flag))]
        if matches:
            given = value if sep else (argv[i + 1] if i + 1 < len(argv) else "")
            roots.append(os.path.normpath(given) if given else ".")
    return roots


def default_output(command: str, argv: list[str], path: str) -> bool:
    """Whether a file this run created is one of its default outputs: under outputs/ (where every default goes),
    grade's results.json, or convert's folder beside SRC (SRC-to-TARGET, SRC-from-hf)."""
    if path == "outputs" or path.startswith("outputs/") or (command == "grade" and path == "results.json"):
        return True
    sources = [os.path.normpath(t) for t in argv[1:] if not t.startswith("-")] if command == "convert" else []
    return any(path.split("/")[0].startswith(f"{src}-") for src in sources if "/" not in src)


def under(path: str, roots: list[str]) -> bool:
    return any(root == "." or path == root or path.startswith(root + "/") for root in roots)


def contract_violations(command: str, parser, argv: list[str], answer: dict, before: dict, after: dict) -> list[str]:
    problems = []
    rc, err = answer["rc"], answer["stderr"]
    if answer["timed_out"]:
        problems.append(f"ran past the {TIME_LIMIT_S:g} s limit")
    if "Traceback (most recent call last)" in err:
        problems.append("a Python traceback")
    if rc == 2:
        lines = err.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("error:"):
            problems.append("exit 2 without exactly one `error:` line on stderr")
    elif rc != 0:
        problems.append(f"exit status {rc} (the contract: 0, or 2 with one `error:` line)")
    changed = changes(before, after)
    if rc != 0 and changed:
        problems.append(f"it failed and left files behind or changed: {changed[:8]}")
    roots = output_roots(parser, argv)
    # A file that was there may change only where an output path was given; a new one also where a default goes
    stray = [c for c in changed if not under(c, roots) and (c in before or not default_output(command, argv, c))
             and not (after.get(c) == ("dir",) and any(r.startswith(c + "/") for r in roots))]  # a given path's parents
    if rc == 0 and stray:
        problems.append(f"files changed outside its output paths {roots}: {stray[:8]}")
    if answer["writes"]:
        problems.append(f"writes into the repository: {answer['writes'][:5]}")
    return problems


def repo_files() -> dict[str, int]:
    skip = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", "build", "node_modules"}
    found = {}
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in files:
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):  # a file another process removed meanwhile
                found[os.path.relpath(path, ROOT)] = os.stat(path).st_mtime_ns
    return found


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory):
    """The worker, the scratch template, and afterwards the check that the repository is untouched."""
    scratch = tmp_path_factory.mktemp("cli-fuzz")
    make_template(scratch / "template")
    repo_before = repo_files()
    worker = Worker(scratch)
    state = {"worker": worker, "scratch": scratch, "templates": {}, "history": [], "outcomes": {}}
    yield state
    if os.environ.get("CLI_FUZZ_REPORT"):  # outcomes, and seconds inside the children, per subcommand
        seconds = {}
        for command, _, started, ended in state["history"]:
            seconds[command] = round(seconds.get(command, 0) + ended - started, 2)
        print(json.dumps({"outcomes": state["outcomes"], "seconds": seconds}, indent=1, sort_keys=True))
    suspects = repo_changes_during(state, repo_before)
    confirmed = {}
    for index, paths in suspects.items():  # others may edit this checkout meanwhile: a suspect must do it again
        argv = state["history"][index][1]
        for _ in range(3):  # each time the command runs, and never in as long a pause after it
            watched = {p: _mtime(ROOT / p) for p in paths}
            check_one(state, argv[0], COMMANDS[argv[0]], argv)
            paths = [p for p in paths if _mtime(ROOT / p) != watched[p]]
            quiet = {p: _mtime(ROOT / p) for p in paths}
            time.sleep(max(0.2, state["history"][-1][3] - state["history"][-1][2]))
            paths = [p for p in paths if _mtime(ROOT / p) == quiet[p]]
        confirmed.update({p: argv for p in paths})
    worker.close()
    assert not confirmed, f"fuzzed commands changed the repository: {confirmed}"


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def repo_changes_during(state: dict, before: dict[str, int]) -> dict[int, list[str]]:
    """Files of the repository created or changed while an invocation ran, by the invocation's index."""
    suspects: dict[int, list[str]] = {}
    for path, mtime in repo_files().items():
        if before.get(path) == mtime:
            continue
        for index, (_, _, started, ended) in enumerate(state["history"]):
            if started - 0.05 <= mtime / 1e9 <= ended + 0.05:
                suspects.setdefault(index, []).append(path)
                break
    return suspects


def check_one(state: dict, command: str, parser, argv: list[str]) -> None:
    worker, scratch = state["worker"], state["scratch"]
    cwd = scratch / "run"
    shutil.rmtree(cwd, ignore_errors=True)
    template = template_for(state, command)
    shutil.copytree(template, cwd, symlinks=True)
    answer = worker.run(argv, cwd)
    state["history"].append((command, argv, answer["started"], answer["ended"]))
    after = snapshot(cwd)
    outcome = "stopped at " + answer["reached"] if answer["reached"] else f"exit {answer['rc']}"
    counts = state["outcomes"].setdefault(command, {})
    counts[outcome] = counts.get(outcome, 0) + 1
    problems = contract_violations(command, parser, argv, answer, state["templates"][command], after)
    assert not problems, (f"diffattn {' '.join(map(repr, argv))}:\n  " + "\n  ".join(problems)
                          + f"\n--- exit {answer['rc']}; stderr:\n{answer['stderr'][-2500:]}"
                          + f"\n--- stdout:\n{answer['stdout'][-800:]}")


COMMANDS = subcommands()


def fuzz_settings(examples: int) -> settings:
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None, print_blob=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.filter_too_much, HealthCheck.data_too_large])


@pytest.mark.parametrize("examples", [FAST_EXAMPLES, pytest.param(SLOW_EXAMPLES, marks=pytest.mark.slow)],
                         ids=["make-test", "make-test-slow"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_subcommand_keeps_the_contract(fuzz, command, examples):
    @fuzz_settings(examples)
    @given(argv=invocation(command, COMMANDS[command]))
    def one(argv):
        check_one(fuzz, command, COMMANDS[command], argv)

    one()


def test_every_heavy_entry_point_is_stopped(fuzz):
    """A renamed function in HEAVY would let the fuzz run real training or benchmarks (each a time-limit failure);
    this names it instead. Without torch the torch commands stop at their one-line error, before any of them."""
    pytest.importorskip("torch")
    missing = [f"{m}.{a}" for m, a in HEAVY if f"{m}.{a}" not in fuzz["worker"].stops]
    assert not missing, f"HEAVY names functions the worker could not replace: {missing}"


PARITY = [["snr", "--n", "0"], ["snr", "--n", "64", "--trials", "2", "--json"], ["snr", "--n", "100000000000"],
          ["accounting", "--hidden", "4096", "--heads", "32", "--head-dim", "128", "--layers", "32", "--json"],
          ["plan", "--preset", "llama-3.2-1b", "--context", "8192", "--hallucination", "low", "--budget-tokens",
           "-1T", "--mode", "finetune"],
          ["plan", "--config", "corrupt.json", "--context", "8192", "--hallucination", "low", "--budget-tokens", "1B",
           "--mode", "finetune"], ["lessons", "nope"]]


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@pytest.mark.parametrize("argv", PARITY, ids=lambda a: " ".join(a[:3]))
def test_the_worker_sees_what_python_dash_m_sees(fuzz, argv):
    """The forked worker stands in for `diffattn`: on commands that import no torch (so a real process is
    cheap), the same exit status, stdout and stderr, and the same files."""
    worker_run = fuzz["scratch"] / "run"
    check_one(fuzz, argv[0], COMMANDS[argv[0]], argv)
    answer = fuzz["worker"].run(argv, _fresh(fuzz, argv[0], worker_run))
    real_run = _fresh(fuzz, argv[0], fuzz["scratch"] / "real")
    done = subprocess.run([sys.executable, "-m", "diffattn", *argv], cwd=real_run, capture_output=True, text=True,
                          env={**ENV, "DIFFATTN_ROOT": str(real_run)}, timeout=TIME_LIMIT_S, preexec_fn=_limited)
    assert (answer["rc"], answer["stdout"], answer["stderr"]) == (done.returncode, done.stdout, done.stderr)
    assert snapshot(worker_run) == snapshot(real_run)


def _fresh(state: dict, command: str, folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(template_for(state, command), folder, symlinks=True)
    return folder
