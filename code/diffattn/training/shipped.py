"""Lessons 09-11: the trained checkpoints that ship with the course, how they are checked, and how to remake them.

Lessons 09-11 quote scores of trained models. A tiny model retrained on another CPU can be another model: one kernel's
last bit differs at the first step, training can amplify it, and accuracies then move by up to 0.1. So these lessons evaluate fixed
weights that ship in the repository, and evaluating fixed weights is portable (losses agree to float rounding,
decisions keep their margins):

    outputs/models/MANIFEST.json                  the command, machine and torch that made them; each file's sha256
    outputs/models/<preset>/<task>/<variant>/     model.safetensors, config.json, metrics.jsonl (diffattn.training.checkpoint)

    diffattn models verify              check every shipped file against MANIFEST.json
    diffattn models retrain             retrain them here (runs/models-retrained/) and print how far each
                                                  final loss lands from the shipped one, with a verdict against the
                                                  measured band (exit 1 if one lands outside)
    diffattn models retrain --replace   maintainers: make freshly trained weights the shipped ones
    diffattn models band                retrain under every kernel path this CPU offers, 1 and 2 threads,
                                                  and write the spread to outputs/models/band.json

A missing, truncated or altered file is a one-line ConfigError naming it and how to restore it; nothing here retrains
silently.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from diffattn.training import checkpoint
from diffattn.nn import cpu
from diffattn.core.errors import ConfigError, require
from diffattn.pure.variants import EVALUATED
from diffattn.core.paths import outputs_dir, repo_root

# What lessons 09-11 evaluate: lesson 08's trainer, seed 0, one thread.
SHIPPED = {"cpu-tiny": {"text": EVALUATED, "needles": EVALUATED}}
SEED, THREADS = 0, 1
FILES = (checkpoint.WEIGHTS_FILE, checkpoint.CONFIG_FILE, checkpoint.METRICS_FILE)
MANIFEST = "MANIFEST.json"
BAND = "band.json"
RESTORE = "git checkout -- outputs/models"
REMAKE = "diffattn models retrain --replace"  # maintainers, on the shipping machine (CONTRIBUTING.md)
# A retrained loss may land this many times the widest spread `models band` measured for its task.
BAND_MARGIN = 2.0
X86_ORDER = {path: i for i, path in enumerate(cpu.X86_PATHS)}


def root() -> Path:
    return outputs_dir() / "models"


def retrained_root() -> Path:
    return repo_root() / "runs" / "models-retrained"


def entries() -> list[tuple[str, str, str]]:
    """(preset, task, variant) of every shipped checkpoint, in a fixed order."""
    return [(p, t, v) for p, tasks in SHIPPED.items() for t, variants in tasks.items() for v in variants]


def name(preset: str, task: str, variant: str) -> str:
    return f"{preset}/{task}/{variant}"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_shipped_json(*parts: str) -> dict[str, Any]:
    """outputs/models/<parts…> (MANIFEST.json, band.json, cpu-recall/mqar/MANIFEST.json); a one-line ConfigError
    saying how to restore it."""
    path = root().joinpath(*parts)
    require(path.is_file(), f"{path} is missing: restore it with `{RESTORE}`")
    try:
        return json.loads(path.read_text())
    except ValueError:
        raise ConfigError(f"{path} is not valid JSON: restore it with `{RESTORE}`") from None


def read_manifest() -> dict[str, Any]:
    return read_shipped_json(MANIFEST)


def verify(directory: Path, manifest: dict[str, Any], base: Path | None = None) -> None:
    """ConfigError unless every shipped file of `directory` exists with the size and sha256 its manifest records
    (MANIFEST.json in `base`, by default outputs/models/)."""
    base = base or root()
    for filename in FILES:
        path = directory / filename
        key = path.relative_to(base).as_posix()
        expected = manifest["files"].get(key)
        fix = f"restore it with `git checkout -- {path.relative_to(repo_root())}`"
        require(expected is not None, f"{key} is not listed in {base / MANIFEST}: {fix}")
        require(path.is_file(), f"shipped checkpoint file {path} is missing: {fix}")
        size = path.stat().st_size
        require(size >= expected["bytes"] or size == 0 and expected["bytes"] == 0,
                f"shipped checkpoint file {path} is truncated ({size:,} of {expected['bytes']:,} bytes): {fix}")
        require(sha256(path) == expected["sha256"],
                f"shipped checkpoint file {path} does not match its sha256 in {MANIFEST}: {fix}")


def checkpoints(preset: str, task: str, variants: tuple[str, ...]) -> dict[str, Path]:
    """{variant: directory} of shipped checkpoints, each verified against MANIFEST.json; load with
    `diffattn.training.checkpoint.load_model`."""
    require(preset in SHIPPED and task in SHIPPED[preset],
            f"no shipped checkpoints for preset {preset!r}, task {task!r} (shipped: "
            + ", ".join(name(p, t, "*") for p, tasks in SHIPPED.items() for t in tasks) + ")")
    manifest = read_manifest()
    dirs = {}
    for variant in variants:
        require(variant in SHIPPED[preset][task], f"no shipped {variant} checkpoint for {preset}/{task}")
        dirs[variant] = root() / preset / task / variant
        verify(dirs[variant], manifest)
    return dirs


# ---------------------------------------------------------------------------------- lesson 09's recall checkpoints
# One run per variant of the recall sweep (diffattn.eval.sweep), copied as weights, config and metrics into
# outputs/models/cpu-recall/mqar/<variant>/ with a manifest of their own, MANIFEST.json beside them, that names the
# sweep cell and seed each came from. `diffattn sweep` retrains them; `models verify` checks them.
RECALL = ("cpu-recall", "mqar")


def recall_root() -> Path:
    return root().joinpath(*RECALL)


def recall_manifest() -> dict[str, Any]:
    return read_shipped_json(*RECALL, MANIFEST)


def recall_checkpoints(names: tuple[str, ...] | None = None) -> dict[str, Path]:
    """{variant name: directory} of the shipped recall checkpoints (all of them by default), each verified."""
    manifest = recall_manifest()
    dirs = {}
    for n in names or tuple(manifest["runs"]):
        require(n in manifest["runs"], f"no shipped recall checkpoint {n!r} (shipped: {', '.join(manifest['runs'])})")
        dirs[n] = recall_root() / n
        verify(dirs[n], manifest, recall_root())
    return dirs


def ship_recall(sources: dict[str, Path], runs: dict[str, dict[str, Any]], command: str) -> Path:
    """Make the finished runs `sources` ({variant name: run folder}) the shipped recall checkpoints; `runs` records
    where each came from (cell, seed)."""
    from diffattn.training.compare import machine

    files = {}
    shutil.rmtree(recall_root(), ignore_errors=True)
    for n, source in sources.items():
        model, config = checkpoint.load_model(source)
        target = recall_root() / n
        checkpoint.save_weights(target, model, config)
        (target / checkpoint.SUMS_FILE).unlink()  # the manifest is the shipped files' one record, as for cpu-tiny
        shutil.copyfile(source / checkpoint.METRICS_FILE, target / checkpoint.METRICS_FILE)
        for filename in FILES:
            path = target / filename
            files[path.relative_to(recall_root()).as_posix()] = {"bytes": path.stat().st_size, "sha256": sha256(path)}
    manifest = {"command": command, "machine": machine() | {"kernel_path": cpu.native_path()}, "runs": runs,
                "files": files}
    checkpoint._write_atomic(recall_root() / MANIFEST, lambda f: f.write(json.dumps(manifest, indent=1) + "\n"),
                             mode="w")
    return recall_root()


def final_loss(directory: Path) -> float:
    """The last validation loss a run logged (the task's loss: all bytes for text, the answers for needles)."""
    return [r for r in checkpoint.read_metrics(directory) if "val_loss" in r][-1]["val_loss"]


# ---------------------------------------------------------------------------------------------------- remaking


def retrain(out: Path, threads: int = THREADS, only: tuple[str, ...] | None = None, progress: bool = True,
            compare_with_shipped: bool = True) -> dict[str, Any]:
    """Train every shipped checkpoint's run (or those named in `only`, e.g. "cpu-tiny/needles/diff_v1") afresh into
    out/<preset>/<task>/<variant>/ (full checkpoints) with the shipped configs; compare each final loss with the
    shipped one."""
    from diffattn.config import build_configs
    from diffattn.training.runs import train_fresh

    if compare_with_shipped:  # the comparison is only as good as what it compares with
        manifest = read_manifest()
        for preset, task, variant in entries():
            verify(root() / preset / task / variant, manifest)
    rows = {}
    with cpu.threads(threads):
        for preset, task, variant in entries():
            if only is not None and name(preset, task, variant) not in only:
                continue
            model, c = build_configs(preset, variant, task=task, seed=SEED)
            directory = out / preset / task / variant
            train_fresh(preset, model, c, directory, progress=progress)
            rows[name(preset, task, variant)] = {"retrained": final_loss(directory)}
    have_band = (root() / BAND).is_file()  # absent only while `band` measures it for the first time
    for key, row in rows.items() if compare_with_shipped else ():
        row["shipped"] = final_loss(root() / key)
        row["delta"] = row["retrained"] - row["shipped"]
        if have_band:
            row["allowed"] = tolerance(key)
            row["within"] = abs(row["delta"]) <= row["allowed"]
    return {"kernel_path": cpu.native_path(), "threads": threads, "out": str(out), "rows": rows}


def replace(retrained: Path, command: str) -> Path:
    """Make the weights of `retrained` (a `retrain` output folder) the shipped checkpoints and rewrite MANIFEST.json."""
    from diffattn.training.compare import machine

    files = {}
    for preset, task, variant in entries():
        source, target = retrained / preset / task / variant, root() / preset / task / variant
        model, config = checkpoint.load_model(source)
        shutil.rmtree(target, ignore_errors=True)
        checkpoint.save_weights(target, model, config)
        # MANIFEST.json is the shipped files' record: the weights' own SHA256SUMS would be a second one it does not list
        (target / checkpoint.SUMS_FILE).unlink()
        shutil.copyfile(source / checkpoint.METRICS_FILE, target / checkpoint.METRICS_FILE)
        for filename in FILES:
            path = target / filename
            files[path.relative_to(root()).as_posix()] = {"bytes": path.stat().st_size, "sha256": sha256(path)}
    manifest = {"command": command, "machine": machine() | {"kernel_path": cpu.native_path(), "torch_threads": THREADS},
                "seed": SEED, "files": files}
    checkpoint._write_atomic(root() / MANIFEST, lambda f: f.write(json.dumps(manifest, indent=1) + "\n"), mode="w")
    return root()


def band(threads: tuple[int, ...] = (1, 2), progress: bool = True) -> dict[str, Any]:
    """Retrain every shipped run under each kernel path this CPU offers and each thread count, one fresh process per
    path (torch reads ATEN_CPU_CAPABILITY once), each into its own folder; the spread of each final loss around the
    shipped one. Written to outputs/models/band.json."""
    from diffattn.training.compare import machine

    runs = []
    for path in cpu.kernel_paths():
        for n in threads:
            out = retrained_root() / f"band-{path}-{n}threads"
            env = {**os.environ, **cpu.kernel_path_env(path), "PYTHONPATH": str(repo_root() / "code")}
            done = subprocess.run([sys.executable, "-m", "diffattn", "models", "retrain", "--threads", str(n),
                                   "--out", str(out), "--json"], env=env, capture_output=True, text=True)
            # exit 1 only says a loss left the old band, which is what `band` is here to measure again
            require(done.returncode in (0, 1), f"retraining under {path}, {n} thread(s) failed: {done.stderr[-400:]}")
            runs.append({k: v for k, v in json.loads(done.stdout).items() if k != "out"})  # a path of this machine
            if progress:
                print(f"  {path}, {n} thread(s): done", file=sys.stderr)
    widest = {key: max(abs(r["rows"][key]["delta"]) for r in runs) for key in runs[0]["rows"]}
    result = {"machine": machine(), "runs": runs, "max_abs_delta": widest, "margin": BAND_MARGIN}
    checkpoint._write_atomic(root() / BAND, lambda f: f.write(json.dumps(result, indent=1) + "\n"), mode="w")
    return result


def tolerance(key: str) -> float:
    """How far a retrained final loss may land from the shipped one: BAND_MARGIN × the widest spread `band` measured
    for any checkpoint of the same task. Per task, not per checkpoint: whether training amplifies a last-bit difference
    is chance (at cpu-tiny one run in six moved by 1e-2, its neighbours by 1e-6), so a run that barely moved on our CPU
    may move as much as the worst one on yours."""
    return BAND_MARGIN * summary()["task_band"][key.split("/")[1]]


def summary() -> dict[str, Any]:
    """What lesson 08 says about the shipped checkpoints: where they were made, and the band, per task and variant
    (read from MANIFEST.json and band.json, so exact)."""
    manifest, measured = read_manifest(), read_shipped_json(BAND)
    widest: dict[str, dict[str, float]] = {}
    for key, value in measured["max_abs_delta"].items():
        _, task, variant = key.split("/")
        widest.setdefault(task, {})[variant] = value
    # the retrain on the path and thread count the checkpoints were made with: 0 where the code still does the same sums
    shipping = [r for r in measured["runs"] if (r["kernel_path"], r["threads"]) == (manifest["machine"]["kernel_path"],
                                                                                    manifest["machine"]["torch_threads"])]
    on_shipping_path: dict[str, dict[str, float]] = {}
    for key, row in (shipping[0]["rows"] if shipping else {}).items():
        _, task, variant = key.split("/")
        on_shipping_path.setdefault(task, {})[variant] = row["delta"]
    return {"preset": entries()[0][0], "machine": manifest["machine"], "seed": manifest["seed"],
            "on_shipping_path": on_shipping_path,
            "kernel_paths": sorted({r["kernel_path"] for r in measured["runs"]}, key=X86_ORDER.get),
            "threads": sorted({r["threads"] for r in measured["runs"]}), "margin": measured["margin"],
            "widest": widest, "task_band": {task: max(v.values()) for task, v in widest.items()}}


def report(result: dict[str, Any]) -> str:
    """The retrain table: final validation loss retrained vs shipped, the allowance and a verdict per run."""
    m = read_manifest()["machine"]
    lines = [f"retrained here (kernel path {result['kernel_path']}, {result['threads']} thread(s)) into "
             f"{result['out']}; final validation loss, retrained vs shipped",
             f"  allowed: {BAND_MARGIN:g} × the widest move `models band` measured for the task (outputs/models/{BAND};"
             f" lesson 08, \"Checkpoints that ship\"); the checkpoints were made on kernel path {m['kernel_path']}, "
             f"{m['torch_threads']} thread",
             f"  {'checkpoint':<26}{'retrained':>11}{'shipped':>11}{'difference':>13}{'allowed':>10}  verdict"]
    for key, row in result["rows"].items():
        verdict = "–" if "within" not in row else "same bits" if row["delta"] == 0 else "within" if row["within"] \
            else "OUTSIDE the band"
        allowed = f"{row['allowed']:.4f}" if "allowed" in row else "–"
        lines.append(f"  {key:<26}{row['retrained']:>11.4f}{row['shipped']:>11.4f}{row['delta']:>+13.2e}{allowed:>10}"
                     f"  {verdict}")
    outside = [k for k, r in result["rows"].items() if r.get("within") is False]
    lines.append(f"  {len(outside)} of {len(result['rows'])} outside the band" + (f": {', '.join(outside)}" if outside
                                                                                else ""))
    return "\n".join(lines)
