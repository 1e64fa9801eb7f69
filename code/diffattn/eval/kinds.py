"""Lessons 09-11's evaluations of one checkpoint, as `diffattn eval KIND` runs them (diffattn.cli.eval_command):

    retrieval     multi-needle accuracy per (N, R), context length and depth, with 95% intervals clustered by
                  example and the null models beside each (diffattn.data.nulls)
    allocation    shares of |effective attention| on the answer record and on the haystack, per layer and head
    outliers      top-1 and median |attention logit| and |hidden state| per layer, on the checkpoint's validation data
    quantize      retrieval accuracy (and validation loss) with attention logits quantized to each --bits width
    lambda-sweep  retrieval accuracy, answer share and answer loss with λ (V1) or σ(λ) (V2) changed at inference
    suite         every kind above on the `needles` checkpoints of a preset (trained when missing)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from diffattn.core.errors import ConfigError, require
from diffattn.pure.variants import EVALUATED
from diffattn.core.stats import mean_std
from diffattn.pure import variants

KINDS = ("retrieval", "allocation", "outliers", "quantize", "lambda-sweep")
SUITE_VARIANTS = EVALUATED
DEFAULT_VALUES = {"scale": "0,0.5,1,1.5,2", "fixed": None, "offset": "-4,-2,0,2,4"}
FIXED = {"per_layer": "0,0.2,0.4,0.6,0.8,1.0", "gate": "0.1,0.3,0.5,0.7,0.9"}  # by the variant's λ kind


@dataclass(frozen=True)
class EvalOptions:
    """What `diffattn eval` was asked for, as the command line gives it (lists stay comma-separated text until
    `evaluate` parses and checks them, naming the option in its error)."""

    lengths: str | None = None  # context lengths; None: max_seq_len / 2 and max_seq_len
    samples: int = 8  # examples per (layout, length, depth) cell
    seed: int = 0  # the evaluation examples' seed
    bits: str = "16,8,6,4"  # quantize
    mode: str | None = None  # lambda-sweep; None: the variant's first mode
    values: str | None = None  # lambda-sweep; None: the mode's defaults
    preset: str | None = None  # suite
    out: Path | None = None  # suite
    steps: int | None = None  # suite: training steps of missing checkpoints
    warmup_steps: int | None = None  # suite
    compile: bool | None = None  # suite
    seeds: int = 1  # suite


def _numbers(text: str, kind=float, flag: str = "") -> list:
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{flag} must be comma-separated numbers (got {text!r})") from None
    require(bool(values), f"{flag} needs at least one value")
    return values


def evaluate(kind: str, model, config: dict, opts: EvalOptions) -> dict:
    from diffattn.data import make_task
    from diffattn.eval import allocation, lambda_sweep, outliers, quantize, needle_accuracy as retrieval

    longest = model.config.max_seq_len
    lengths = _numbers(opts.lengths, int, "--lengths") if opts.lengths else sorted({longest // 2, longest})
    retrieval.check_lengths(model, lengths)
    require(opts.samples > 0, f"--samples must be > 0 (got {opts.samples})")
    variant = model.config.attention
    if kind == "retrieval":
        return retrieval.table2(model, lengths, opts.samples, opts.seed, progress=True)
    if kind == "allocation":
        return allocation.allocation(model, max(lengths), opts.samples, opts.seed)
    if kind == "outliers":
        task = make_task(config["task"]["name"], longest, config["task"].get("data"), config["task"].get("options"))
        sequences = outliers.sequences_within_budget(model, longest, wanted=16)  # 16 on CPU presets, 1 on gpu-small
        return outliers.outliers(model, task.validation(sequences, longest)[0])
    if kind == "quantize":
        bits = _numbers(opts.bits, int, "--bits")
        quantize.check_bits(bits)
        return quantize.quantized_retrieval(model, bits, lengths, opts.samples, opts.seed, progress=True)
    lambda_kind = variants.get(variant).base.lambda_kind
    require(lambda_kind in lambda_sweep.MODES, f"lambda-sweep needs a DIFF checkpoint (this one is {variant})")
    allowed = lambda_sweep.modes(variant)
    mode = opts.mode or allowed[0]
    require(mode in allowed, f"--mode for {variant} is one of {', '.join(allowed)}")
    values = _numbers(opts.values or DEFAULT_VALUES[mode] or FIXED[lambda_kind], float, "--values")
    for value in values:
        lambda_sweep.check_value(variant, value, mode)
    return sweep(model, values, mode, max(lengths), opts.samples, opts.seed)


def sweep(model, values, mode: str, length: int, samples: int, seed: int) -> dict:
    """Per setting: multi-needle accuracy and answer loss (N4R2, every depth) and the best head's answer share."""
    import torch

    from diffattn.data.retrieval import collate, examples
    from diffattn.eval import allocation, lambda_sweep, needle_accuracy as retrieval
    from diffattn.eval.probe import to_model

    items = examples("needles", samples * len(retrieval.DEPTHS), length, torch.Generator().manual_seed(seed),
                     n_needles=4, n_queries=2)

    def measure(m) -> dict:
        result = retrieval.summarise(retrieval.run_batches(m, items))
        share = allocation.shares(m, items[:samples])["answer"].mean(0)  # (layers, heads)
        return {**result, "answer_share_best_head": share[-1].max().item()}

    table = lambda_sweep.sweep_table(model, values, mode, measure)
    table["trained_lambdas"] = lambda_sweep.trained_lambdas(model, to_model(model, collate(items[:samples])[0]))
    return table


def summary(kind: str, results: dict) -> str:
    """A few readable lines; --json has everything."""
    if kind in ("retrieval", "quantize"):
        rows = results["layouts"] if kind == "retrieval" else {k: v for k, v in results.items()}
        return "\n".join(f"  {name:<12} {accuracy_line(r)}" for name, r in rows.items())
    if kind == "allocation":
        b = results["best_head"]
        return (f"  layer {b['layer']} head {b['head']}: answer share {b['answer']:.3f}, haystack share "
                f"{b['haystack']:.3f}\n" + "\n".join(
                    f"  layer {i} mean over heads: answer {a:.3f}, haystack {h:.3f}" for i, (a, h) in
                    enumerate(zip(results["layer_mean"]["answer"], results["layer_mean"]["haystack"]))))
    if kind == "outliers":
        return "\n".join(f"  layer {i}: |logit| top-1 {lg['top1']:.2f} median {lg['median']:.3f};  |hidden| top-1 "
                         f"{h['top1']:.2f} median {h['median']:.3f}"
                         for i, (lg, h) in enumerate(zip(results["logits"], results["hidden"])))
    return "\n".join(f"  {'trained' if r['value'] is None else r['value']!s:<8} {accuracy_line(r)}  "
                     f"answer loss {r['answer_loss']:.3f}  answer share {r['answer_share_best_head']:.3f}"
                     for r in results["rows"])


def accuracy_line(r: dict) -> str:
    """'accuracy 0.420 [0.380, 0.460] (147/350); null 0.470 (copy_any): − null −0.050 [−0.090, −0.010] (margin
    0.265)', then `retrieves` where the criterion holds (diffattn.eval.criterion: an effect of a declared size)."""
    test = r["vs_null"]
    return (f"accuracy {r['accuracy']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}] ({r['answered']}/{r['asked']}); "
            f"null {r['null_best']:.3f} ({r['null_rule']}): − null {test['difference']:+.3f} "
            f"[{test['ci95'][0]:+.3f}, {test['ci95'][1]:+.3f}] (margin {r['margin']:.3f})"
            + ("  retrieves" if r["retrieves"] else ""))


MANY_NEEDLES = ("N4R2", "N6R2")  # the paper's hard end of Table 2: 4 and 6 needles, 2 keys asked


def many_needles(table: dict) -> dict:
    """Accuracy over every key asked in the 4- and 6-needle layouts together, with its null (table2 keeps them)."""
    return table["many_needles"]


def suite(opts: EvalOptions) -> int:
    """Per seed and variant: train the needles checkpoint when missing, evaluate it, write its JSON and summary.json
    (so a time limit keeps every variant that finished; `complete` says whether all did). A variant whose training
    or evaluation raises (a compile failure, out of memory) is listed under "failed" and the others go on."""
    import time

    from diffattn.training.checkpoint import load_model, read_metrics
    from diffattn.training.compare import machine
    from diffattn.core.errors import one_line
    from diffattn.core.paths import outputs_dir
    from diffattn.core.results import write_json_atomic
    from diffattn.training.runs import ensure_checkpoints
    from diffattn.training.loop import TrainingDiverged

    require(opts.preset is not None, "eval suite needs --preset (e.g. cpu-small)")
    require(opts.seeds > 0, f"--seeds must be > 0 (got {opts.seeds})")
    out = opts.out or outputs_dir() / "eval" / opts.preset
    device = "cuda" if opts.preset.startswith("gpu") else "cpu"
    settings = {key: value for key, value in (("steps", opts.steps), ("warmup_steps", opts.warmup_steps),
                                              ("compile", opts.compile)) if value is not None}
    started = time.perf_counter()
    runs: dict[str, list[dict]] = {variant: [] for variant in SUITE_VARIANTS}
    failed: dict[str, str] = {}

    def write_summary(complete: bool) -> dict:
        spread = {variant: {"runs": r, **dict(zip(("many_needles_mean", "many_needles_std"),
                                                  mean_std(x["many_needles"]["accuracy"] for x in r)))}
                  for variant, r in runs.items() if r}
        write_json_atomic(out / "summary.json", {
            "preset": opts.preset, "seeds": opts.seeds, "samples_per_cell": opts.samples, "eval_seed": opts.seed,
            "many_needles_layouts": list(MANY_NEEDLES), "variants": spread, **({"settings": settings} if settings else {}),
            **({"failed": failed} if failed else {}), "complete": complete,
            "wall_s": time.perf_counter() - started, "machine": machine()})
        return spread

    try:
        for seed in range(opts.seeds):
            for variant in SUITE_VARIANTS:
                try:
                    directory = ensure_checkpoints(opts.preset, "needles", (variant,), progress=True, seed=seed,
                                                   settings=settings)[variant]
                    model, config = load_model(directory, device)
                    with_lambda = KINDS if variants.get(variant).base.lambda_kind else KINDS[:-1]  # lambda-sweep needs a λ
                    kinds = ("retrieval",) if seed else with_lambda
                    for kind in kinds:
                        results = evaluate(kind, model, config, opts)
                        print(f"{kind} on {directory} ({variant}):\n{summary(kind, results)}")
                        where = out / variant if seed == 0 else out / variant / f"seed{seed}"
                        write_json_atomic(where / f"{kind.replace('-', '_')}.json", results)
                        if kind == "retrieval":
                            runs[variant].append({"seed": seed, "val_loss": read_metrics(directory)[-1]["val_loss"],
                                                  "overall": results["overall"], "many_needles": many_needles(results)})
                except (KeyboardInterrupt, ConfigError) as exc:
                    if not isinstance(exc, TrainingDiverged):  # bad input or an interrupt stops the suite; a NaN
                        raise                                   # in one run says nothing about the next
                    failed[f"{variant} seed {seed}"] = one_line(exc)
                except Exception as exc:  # noqa: BLE001  named in the summary; the next variant still runs
                    failed[f"{variant} seed {seed}"] = one_line(exc)
                if f"{variant} seed {seed}" in failed:
                    print(f"error: {variant} seed {seed} failed: {failed[f'{variant} seed {seed}']}")
                write_summary(complete=False)
    except KeyboardInterrupt:
        write_summary(complete=False)
        print(f"interrupted: the variants finished so far are in {out / 'summary.json'}")
        return 130
    spread = write_summary(complete=not failed)
    for variant, r in spread.items():
        print(f"{variant}: 4-6 needles accuracy per seed "
              + ", ".join(f"{x['many_needles']['accuracy']:.3f}" for x in r["runs"])
              + f"; mean {r['many_needles_mean']:.3f} ± {r['many_needles_std']:.3f}")
    print(f"written to {out}")
    return 1 if failed else 0

