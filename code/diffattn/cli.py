"""`python -m diffattn ...`: reproduce every lesson's numbers and write outputs/.

Bad input (sizes <= 0 or past their bound, heads that do not divide, an output path of the wrong kind, ...) prints one
line `error: <constraint>` and exits with code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Sequence

from diffattn import train_options
from diffattn.errors import ConfigError, interrupt_as_exception
from diffattn.eval import command as eval_command
from diffattn.eval import sweep as sweep_command
from diffattn.numberkinds import keep_saved_if_agreeing
from diffattn.plan import command as plan_command
from diffattn.warmstart import command as warmstart_command
from diffattn.paths import lessons_dir, outputs_dir
from diffattn.results import load_numbers, save_lesson_numbers, write_json_atomic
from diffattn.train_options import OneLineErrorParser


# The packages pyproject.toml installs (the stdlib track needs none of them)
THIRD_PARTY = {"torch", "numpy", "scipy", "safetensors", "matplotlib", "tqdm", "nbclient", "nbformat", "transformers",
               "flash_attn"}


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m diffattn", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)

    lesson = sub.add_parser("lesson", help="run one lesson's experiments and print its results")
    lesson.add_argument("number", help="lesson number, e.g. 01")
    lesson.add_argument("--json", action="store_true", help="print the numbers as JSON instead of the report")

    course = sub.add_parser("course", help="run every lesson, write outputs/numbers.json and outputs/figures/")
    course.add_argument("--lessons", default=None, help="comma-separated lesson numbers (default: every lesson)")
    course.add_argument("--no-figures", action="store_true", help="skip the PNG figures (no matplotlib needed)")

    acc = sub.add_parser("accounting", help="parameters, KV cache and FLOPs of baseline / DIFF V1 / DIFF V2 (lesson 04)")
    acc.add_argument("--hidden", type=int, required=True, help="d_model")
    acc.add_argument("--heads", type=int, required=True, help="baseline query heads h_base")
    acc.add_argument("--head-dim", type=int, required=True, help="d, the query/key head width")
    acc.add_argument("--layers", type=int, required=True, help="number of transformer layers L")
    acc.add_argument("--kv-heads", type=int, default=None, help="baseline KV heads (default: = heads, i.e. MHA)")
    acc.add_argument("--ffn", type=int, default=None, help="SwiGLU hidden width (default: 8/3·hidden rounded up to a multiple of 256, as LLaMA)")
    acc.add_argument("--vocab", type=int, default=None, help="vocabulary size for whole-model counts (default: none)")
    acc.add_argument("--context", type=int, default=131072, help="context length for KV-cache and FLOP columns")
    acc.add_argument("--bytes", type=int, default=2, help="bytes per cached value (2 = bf16)")
    acc.add_argument("--json", action="store_true", help="print the table as JSON instead of text")

    snr = sub.add_parser("snr", help="softmax vs DIFF on lesson 03's model at a setting of your choice (stdlib)",
                         description="Softmax vs DIFF on lesson 03's synthetic row: one signal token, N − 1 noise "
                                     "tokens, medians over seeded trials.")
    snr.add_argument("--n", type=int, default=1024, help="context length N, >= 2 (default: %(default)s)")
    snr.add_argument("--signal", type=float, default=8.0,
                     help="μ, the signal's logit above the noise mean; finite, and within about 700 of the noise "
                          "logits so that float64 softmax resolves it (default: %(default)s)")
    snr.add_argument("--noise", type=float, default=1.5,
                     help="τ, the noise std: spread of the irrelevant logits, finite and >= 0 (default: %(default)s)")
    snr.add_argument("--rho", type=float, default=0.9,
                     help="ρ, correlation of the two maps' noise, in [-1, 1] (default: %(default)s)")
    snr.add_argument("--lam", type=float, default=0.8,
                     help="V1: λ, any finite number; V2: the coefficient σ(λ_t) (σ = sigmoid), strictly in (0, 1) "
                          "(default: %(default)s)")
    snr.add_argument("--variant", choices=["v1", "v2"], default="v1",
                     help="v1: W = A1 − λ·A2; v2: W = A1 − σ(λ_t)·A2 (default: %(default)s)")
    snr.add_argument("--trials", type=int, default=16, help="seeded trials, >= 1 (default: %(default)s)")
    snr.add_argument("--json", action="store_true", help="print the result as JSON instead of the table")

    lessons = sub.add_parser("lessons", help="check or rewrite the numbers quoted in lessons/*.md and README.md")
    lessons.add_argument("action", choices=["check", "sync"])

    bench = sub.add_parser("bench", help="attention: time attention ops (our V1 vs HF DiffLlama on CPU); decode, train, "
                           "roofline: this machine's ceilings and each variant against them (lesson 12); needs torch")
    bench.add_argument("what", nargs="?", default="attention", choices=["attention", "decode", "train", "roofline"])
    bench.add_argument("--device", default="auto", help="auto (cuda when present), cpu or cuda")
    bench.add_argument("--quick", action="store_true", help="small sizes, few repeats (seconds)")
    bench.add_argument("--no-hf", action="store_true", help="leave transformers' DiffLlama out of the V1 module comparison")
    bench.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own count)")
    bench.add_argument("--no-figures", action="store_true", help="decode|train|roofline: skip the PNG figures")
    bench.add_argument("--out", type=Path, default=None, help="attention: JSON file; others: folder (default "
                       "outputs/bench/<what>-<cpu>-<threads>t-<date>/)")

    grade = sub.add_parser("grade", help="grade the exercises, each in its own child process; write results.json",
                           description="Grade every exercise (exercises/exNN_*.py) in its own child process and write "
                                       "a Gradescope results.json. Exit 0 when grading completed, whatever the score.")
    grade.add_argument("--impl", default="exercises",
                       help="exercises (default), reference, or a known-wrong module such as tests.wrong.w01_softmax_in_place")
    grade.add_argument("--only", nargs="+", default=[], metavar="EX",
                       help="grade only these exercises, e.g. ex03 ex05 or ex03,ex05")
    grade.add_argument("--tests", nargs="+", type=Path, default=[], metavar="DIR",
                       help="extra graded test folders (hidden tests: visibility hidden in results.json)")
    grade.add_argument("--submission", type=Path, default=None, metavar="DIR",
                       help="folder with the student's exNN_*.py files (default: exercises/ of this checkout)")
    grade.add_argument("--json", type=Path, default=Path("results.json"), metavar="PATH",
                       help="where to write results.json (default: %(default)s)")
    grade.add_argument("--timeout", type=float, default=60.0, metavar="S",
                       help="wall-clock seconds per exercise (default: %(default)g)")
    grade.add_argument("--memory", type=int, default=3072, metavar="MB",
                       help="address-space limit per exercise in MiB; PyTorch needs about 1 GiB (default: %(default)s)")
    grade.add_argument("--jobs", type=int, default=None, metavar="N",
                       help="exercises graded side by side, each in its own child with its own limits "
                            "(default: the number of cores)")
    grade.add_argument("--forbid-reference-imports", action="store_true",
                       help="an exercise file that uses its reference solution scores 0 (default: reported only)")
    grade.add_argument("--fail-below-full", action="store_true",
                       help="exit 3 unless every graded test passed (for GitHub Classroom's command grader)")
    grade.add_argument("--details", action="store_true", help="also print each exercise part's first failure in full")

    train = sub.add_parser("train", help="train one variant on one task (lesson 08); works under torchrun")
    train_options.add_train_arguments(train)
    compare = sub.add_parser("compare", help="train every variant with matched data and budget, tabulate and plot")
    train_options.add_compare_arguments(compare)
    eval_command.add_parser(sub)
    plan_command.add_parser(sub)
    warmstart_command.add_parsers(sub)
    study = sub.add_parser("study", help="lessons 08-11's CPU study (make train-small): train what is missing, "
                                         "then write outputs/study/")
    train_options.add_study_arguments(study)
    sweep_command.add_parser(sub)

    models = sub.add_parser("models", help="the trained checkpoints lessons 09-11 ship with: verify, retrain, band",
                            description="verify: check the shipped checkpoints (outputs/models/) against their "
                                        "MANIFEST.json. retrain: train them again here and print how far each final "
                                        "loss lands from the shipped one (--replace ships the new weights). band: "
                                        "retrain under every CPU kernel path and 1 and 2 threads, write band.json.")
    models.add_argument("action", choices=["verify", "retrain", "band"])
    models.add_argument("--threads", type=int, default=1, help="retrain: torch threads (default: %(default)s, as shipped)")
    models.add_argument("--out", type=Path, default=None, help="retrain: folder for the retrained runs "
                                                                "(default: runs/models-retrained/latest)")
    models.add_argument("--replace", action="store_true", help="retrain: make the retrained weights the shipped ones")
    models.add_argument("--json", action="store_true", help="retrain: print the comparison as JSON")

    gpu = sub.add_parser("gpu-check", help="CUDA backend agreement and kernel report (scripts/gpu_check.sh); needs torch")
    gpu.add_argument("--out", type=Path, default=None, help="also write the report as JSON here")
    gpu.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                     help="cpu: the same report on CPU, for gpu_check.sh's rehearsal (default: %(default)s)")
    train_options.bound(parser)  # every number an option takes has an upper bound, quoted in its --help
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help (0), or a bad argument whose one `error:` line is written (2)
        return stop.code if isinstance(stop.code, int) else 2
    try:
        with interrupt_as_exception():  # a time limit's SIGTERM: every command's KeyboardInterrupt path runs
            train_options.check_outputs(args)
            status = COMMANDS[args.command](args)
        sys.stdout.flush()  # inside the try: a reader that already left must not fail the flush at exit
        return status
    except ConfigError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except ModuleNotFoundError as exc:  # a third-party package this command needs (the stdlib track needs none)
        package = (exc.name or "").split(".")[0]
        if package not in THIRD_PARTY:
            raise
        sys.stderr.write(f"error: {args.command} needs {package}, which this Python cannot import: run `make course` "
                         f"(it installs everything; lesson 00 says how to choose a CPU or CUDA build of torch)\n")
        return 2
    except NotImplementedError as exc:  # the student handout: a lesson ran into an exercise not written yet
        message = str(exc)
        if not message.startswith("exercise "):
            raise
        number = message.split(":")[0].removeprefix("exercise ")
        what = f"lesson {args.number}" if args.command == "lesson" else args.command
        sys.stderr.write(f"error: {what} runs on your exercise {number}, which is not written yet ({message});"
                         f" write it in exercises/, then check it with `make grade EX=ex{number[:2]}`\n")
        return 2
    except KeyboardInterrupt:  # a command with no work of its own to keep (training and compare handle theirs)
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:  # `... --json | head -1`: the reader left; not an error of ours, and no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's recipe: no second error at exit
        return 0


def cmd_lesson(args: argparse.Namespace) -> int:
    from diffattn import experiments

    module = experiments.load(args.number)
    results = module.run(progress=not args.json)
    print(json.dumps(results, indent=1) if args.json else module.report(results))
    return 0


def cmd_course(args: argparse.Namespace) -> int:
    from diffattn import experiments

    lessons = ",".join(experiments.LESSONS) if args.lessons is None else args.lessons
    wanted = [experiments.normalise(n.strip()) for n in lessons.split(",") if n.strip()]
    if not wanted:
        raise ConfigError(f"--lessons needs at least one lesson number, e.g. 01,02 (got {lessons!r})")
    figures_dir = outputs_dir() / "figures"
    saved = load_numbers()
    summary = []
    for number in wanted:
        missing = experiments.missing_requirements(number)
        if missing:
            summary.append(f"  {number}  lesson {number} skipped (needs {', '.join(missing)})")
            continue
        module = experiments.load(number)
        print(f"lesson {number}: {module.TITLE}", file=sys.stderr)
        started = time.perf_counter()
        results = keep_saved_if_agreeing(module.run(progress=True), saved.get(number), experiments.number_kinds(number))
        save_lesson_numbers(number, results)  # saved before figures: a plotting failure loses no numbers
        made = [] if args.no_figures else experiments.figures(module, results, figures_dir)
        summary.append(f"  {number}  {module.TITLE:<52} {time.perf_counter() - started:5.1f} s  {len(made)} figure(s)")
    print("course summary (outputs/numbers.json, outputs/figures/):")
    print("\n".join(summary))
    print(experiments.device_note(wanted))
    stale = _lesson_mismatches(wanted)
    if stale:
        print(f"note: {len(stale)} quoted number(s) in lessons/ differ from outputs; review, then `make lessons-sync`:")
        print("\n".join(f"  {m}" for m in stale[:10]))
    return 0


def cmd_snr(args: argparse.Namespace) -> int:
    from diffattn.pure.trials import format_setting, try_setting

    result = try_setting(args.n, args.signal, args.noise, args.rho, args.lam, args.variant, args.trials)
    print(json.dumps(result, indent=1) if args.json else format_setting(result))
    return 0


def cmd_accounting(args: argparse.Namespace) -> int:
    from diffattn.pure import accounting

    config = accounting.ModelConfig(
        hidden=args.hidden,
        heads=args.heads,
        head_dim=args.head_dim,
        layers=args.layers,
        kv_heads=args.kv_heads,
        ffn=args.ffn,
        vocab=args.vocab,
    )
    table = accounting.accounting_table(config, context=args.context, bytes_per_value=args.bytes)
    print(json.dumps(table, indent=1) if args.json else accounting.format_table(table))
    return 0


def render_output(command: str) -> str:
    """What `python -m diffattn <command>` prints; `lesson NN` is rebuilt from outputs/numbers.json."""
    from diffattn import experiments

    argv = shlex.split(command)
    if argv[:1] == ["lesson"] and len(argv) == 2:
        number = experiments.normalise(argv[1])
        return experiments.load(number).report(load_numbers()[number])
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        main(argv)
    return buffer.getvalue()


def quoting_files() -> list[Path]:
    """Every markdown file that may quote outputs: the lessons and the README."""
    readme = lessons_dir().parent / "README.md"
    return sorted(lessons_dir().glob("*.md")) + ([readme] if readme.exists() else [])


def _lesson_mismatches(lessons: Sequence[str] | None = None) -> list:
    """Quoted numbers that disagree with outputs/; with `lessons`, only in those lessons' files."""
    from diffattn import experiments
    from diffattn.lessontext import check_text

    numbers = load_numbers()
    problems = []
    files = quoting_files() if lessons is None else [p for p in quoting_files() if p.name[:2] in lessons]
    for path in files:
        try:
            problems += check_text(path, path.read_text(), numbers, render_output, experiments.number_kinds)
        except ConfigError as exc:  # e.g. a torch lesson's output block on a stdlib-only Python
            print(f"skipped {path.name}: {exc}", file=sys.stderr)
    return problems


def cmd_lessons(args: argparse.Namespace) -> int:
    from diffattn import experiments
    from diffattn.lessontext import sync_text

    if args.action == "check":
        problems = _lesson_mismatches()
        for p in problems:
            print(p)
        print(f"{len(problems)} mismatch(es)")
        return 1 if problems else 0
    numbers = load_numbers()
    for path in quoting_files():
        source = path.read_text()
        updated = sync_text(source, numbers, render_output, experiments.number_kinds)
        if updated != source:
            path.write_text(updated)
            print(f"updated {path}")
    return 0


def _require_torch(what: str):
    try:
        import torch
    except ImportError:
        raise ConfigError(f"{what} needs PyTorch: run `make course` (installs it; lesson 00 says how to choose a CPU or CUDA build)") from None
    return torch


def cmd_bench(args: argparse.Namespace) -> int:
    _require_torch("bench")
    if args.what != "attention":
        from diffattn.perf import suite

        return suite.main(args)
    from diffattn import bench

    return bench.main(args)


def cmd_grade(args: argparse.Namespace) -> int:
    from diffattn.grading import grader
    from diffattn.paths import repo_root

    options = grader.Options(root=repo_root(), impl=args.impl, only=args.only, tests=args.tests,
                             submission=args.submission, json_path=args.json, timeout=args.timeout,
                             memory_mb=args.memory, forbid_reference_imports=args.forbid_reference_imports,
                             fail_below_full=args.fail_below_full, **({} if args.jobs is None else {"jobs": args.jobs}))
    return grader.main(options, details=args.details)


def cmd_gpu_check(args: argparse.Namespace) -> int:
    torch = _require_torch("gpu-check")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("gpu-check needs a CUDA GPU (none is visible); the CPU checks run in `make test`")
    from diffattn.nn.device import device_report

    report = device_report(args.device)
    print(json.dumps(report, indent=1))
    if args.out:
        write_json_atomic(args.out, report)
    return 0 if report["agreement_ok"] else 1


def cmd_training(args: argparse.Namespace) -> int:
    """`train` and `compare` (lesson 08): diffattn.train.main, diffattn.compare.main; `compare --lambda-init` is
    lesson 11's ablation, diffattn.ablation.main."""
    _require_torch(args.command)
    module = "ablation" if getattr(args, "lambda_init", None) and args.command == "compare" else args.command
    return importlib.import_module(f"diffattn.{module}").main(args)


def cmd_study(args: argparse.Namespace) -> int:
    _require_torch("study")
    from diffattn.eval import study

    return study.main(args)


def cmd_sweep(args: argparse.Namespace) -> int:
    _require_torch("sweep")
    from diffattn.eval import sweep_report

    return sweep_report.main(args)


def cmd_models(args: argparse.Namespace) -> int:
    _require_torch("models")
    from diffattn import experiments

    if experiments.missing_requirements("09"):  # the shipped checkpoints are safetensors files
        raise ConfigError("models needs safetensors: run `make course` (installs it)")
    from diffattn import shipped

    return shipped.main(args)


COMMANDS = {"lesson": cmd_lesson, "course": cmd_course, "accounting": cmd_accounting, "snr": cmd_snr, "lessons": cmd_lessons,
            "bench": cmd_bench, "gpu-check": cmd_gpu_check, "grade": cmd_grade, "train": cmd_training,
            "compare": cmd_training, "eval": lambda args: eval_command.main(args),
            "models": cmd_models, "study": cmd_study, "sweep": cmd_sweep, "plan": plan_command.main,
            "convert": warmstart_command.convert_main, "warmstart": warmstart_command.warmstart_main}
