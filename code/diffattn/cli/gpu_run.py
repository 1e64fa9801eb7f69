"""scripts/gpu_check.sh's Python side: the machine's facts, a compile smoke test, and gpu-check.json, the one summary
rebuilt from whatever the steps have left after every step (a run cut short still reports what it finished).

    python -m diffattn.cli.gpu_run environment --out STAGE/environment.json
    python -m diffattn.cli.gpu_run smoke --device cuda --out STAGE/compile-smoke.json    exit 1 if compile does not work
    python -m diffattn.cli.gpu_run summary STAGE --out STAGE/gpu-check.json
    python -m diffattn.cli.gpu_run check-out OUT                                         exit 1 if OUT breaks a rule below

What a run may bring back (the limits scripts/gpu_check.sh is written for): at most 8 files under $OUT, each at most 16 MiB,
no deeper than $OUT/a/b/file, names of letters, digits, '.', '_' and '-' only. `out_problems` checks exactly that.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from diffattn.config import PRESETS
from diffattn.core.hardware import compile_backend, cpu_name, datasheet_peak

MAX_FILES, MAX_BYTES, MAX_FOLDERS = 8, 16 * 2**20, 2
NAME = re.compile(r"[A-Za-z0-9._-]+")
PACKAGES = ("triton", "numpy", "scipy", "safetensors", "matplotlib", "tqdm", "transformers", "flash-attn")
def out_problems(out: Path) -> list[str]:
    """Every way `out` breaks the transfer rules, one line each ([] when all of it would come back)."""
    files = sorted(p for p in out.rglob("*") if p.is_symlink() or not p.is_dir())  # a link is never sent
    problems = [f"{len(files)} files (at most {MAX_FILES} come back)"] if len(files) > MAX_FILES else []
    for path in files:
        relative = path.relative_to(out)
        if not path.is_file() or path.is_symlink():
            problems.append(f"{relative}: not a plain file")
        elif path.stat().st_size > MAX_BYTES:
            problems.append(f"{relative}: {path.stat().st_size / 2**20:.1f} MiB (at most 16 MiB)")
        if len(relative.parts) - 1 > MAX_FOLDERS:
            problems.append(f"{relative}: {len(relative.parts) - 1} folders deep (at most {MAX_FOLDERS})")
        bad = [part for part in relative.parts if not NAME.fullmatch(part)]
        if bad:
            problems.append(f"{relative}: name {bad[0]!r} has characters other than letters, digits, '.', '_', '-'")
    return problems


def environment() -> dict[str, Any]:
    """GPU, driver, torch / CUDA / cuDNN versions, the packages the course may use, CPU: what every figure ran on."""
    import importlib.metadata

    import torch

    info: dict[str, Any] = {
        "date": datetime.date.today().isoformat(), "python": platform.python_version(), "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cpu": cpu_name(), "cores": os.cpu_count()}
    info["packages"] = {}  # the GPU machine has no installs: what is there decides what can run
    for package in PACKAGES:
        try:
            info["packages"][package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            info["packages"][package] = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info |= {"gpu": props.name, "capability": f"sm_{props.major}{props.minor}",
                 "gpu_memory_GiB": round(props.total_memory / 2**30, 1), "gpus": torch.cuda.device_count()}
    if shutil.which("nvidia-smi"):
        query = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=20)
        lines = query.stdout.strip().splitlines() if query.returncode == 0 else []
        info["driver"] = lines[0] if lines else None
    return info


def compile_smoke(device: str) -> dict[str, Any]:
    """torch.compile with the training's backend (Inductor: Triton on CUDA) on a linear layer, SiLU and a loss,
    forward and backward under bf16 autocast, for two batches: a few seconds that say whether the compiled training
    can work at all. ok: both ran, and the compiled gradient matches eager within bf16 rounding."""
    import torch

    started, backend = time.perf_counter(), compile_backend()
    try:
        torch.manual_seed(0)
        weight = torch.randn(256, 256, device=device, requires_grad=True)

        def loss(x):
            with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
                return torch.nn.functional.silu(x @ weight).float().square().mean()

        compiled = torch.compile(loss, backend=backend)
        for batch in range(2):
            x = torch.randn(64, 256, device=device) + batch
            eager_grad = torch.autograd.grad(loss(x), weight)[0]
            compiled_grad = torch.autograd.grad(compiled(x), weight)[0]
            error = ((compiled_grad - eager_grad).abs().max() / eager_grad.abs().max()).item()
            if not error <= 2e-2:  # bf16 keeps 8 bits: a few units of 2^-8 between differently fused kernels
                return {"ok": False, "device": device, "backend": backend, "seconds": time.perf_counter() - started,
                        "error": f"compiled gradient differs from eager by {error:.2e} (relative max)"}
    except Exception as exc:  # noqa: BLE001  the answer is the report: training then runs with --no-compile
        from diffattn.core.errors import one_line

        return {"ok": False, "device": device, "backend": backend, "seconds": time.perf_counter() - started,
                "error": one_line(exc)}
    return {"ok": True, "device": device, "backend": backend, "seconds": time.perf_counter() - started}


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def training_rows(compare: dict[str, Any], peak_measured: float | None, peak_datasheet: float | None) -> dict:
    """Per variant: tokens/s, FLOPs/token and MFU against the measured and the datasheet bf16 peak."""
    rows = {}
    for variant, r in compare.get("variants", {}).items():
        achieved = r["flops_per_token"] * r["tokens_per_s"]  # useful FLOP/s (lesson 04's count, forward + backward)
        rows[variant] = {"tokens_per_s": r["tokens_per_s"], "flops_per_token": r["flops_per_token"],
                         "achieved_tflops": achieved / 1e12, "val_loss": r["val_loss_mean"], "params": r["params"],
                         "mfu_vs_measured_peak": achieved / peak_measured if peak_measured else None,
                         "mfu_vs_datasheet_peak": achieved / peak_datasheet if peak_datasheet else None}
    return rows


# The GPU figures the course targets: (name, what is compared, bound, ">=" or "<="); each is `met` True/False, or None with `missing`
# saying why where the run did not produce it (a step that failed, a preset narrower than the target's width).
TARGETS = (
    ("v2_tokens_vs_baseline_2h", "DIFF V2 training tokens/s / the same-query-width baseline's (2h heads)", 0.97, ">="),
    ("v2_mfu_vs_baseline", "DIFF V2 MFU / the same-heads baseline's MFU (training)", 0.95, ">="),
    ("v1_tokens_vs_baseline", "DIFF V1 training tokens/s / the baseline's", 0.90, ">="),
    ("baseline_mfu", "baseline training MFU against the measured bf16 GEMM peak (preset d_model >= 768)", 0.35, ">="),
    ("v2_decode_vs_baseline", "DIFF V2 decode step time / the baseline's, median over the decode grid", 1.05, "<="),
    ("decode_bandwidth", "decode bytes/s / the run's STREAM copy median, median over every variant's points at "
                         "batch >= 8 and the grid's longest context", 0.60, ">="),
)
TARGET_WIDTH = 768


def target_values(train: dict[str, Any], d_model: int | None, decode: dict[str, Any] | None) -> dict[str, Any]:
    """Each target's value from the training rows (`training_rows`) and `bench decode`'s JSON, or why it is missing."""
    import statistics

    def ratio(a: str, b: str, key: str) -> float | str:
        if a not in train or b not in train or not train[a].get(key) or not train[b].get(key):
            return f"no {key} for {a} and {b} (training did not finish?)"
        return train[a][key] / train[b][key]

    values: dict[str, Any] = {"v2_tokens_vs_baseline_2h": ratio("diff_v2", "baseline_2h", "tokens_per_s"),
                              "v2_mfu_vs_baseline": ratio("diff_v2", "baseline", "mfu_vs_measured_peak"),
                              "v1_tokens_vs_baseline": ratio("diff_v1", "baseline", "tokens_per_s")}
    mfu = train.get("baseline", {}).get("mfu_vs_measured_peak")
    values["baseline_mfu"] = (f"d_model {d_model} is below {TARGET_WIDTH}" if (d_model or 0) < TARGET_WIDTH
                              else mfu if mfu else "no baseline MFU (training or the GEMM peak missing)")
    rows = [r for r in (decode or {}).get("decode", []) if "ms" in r]
    ratios = [r["time_ratio"] for r in (decode or {}).get("decode_ratios", []) if r["variant"] == "diff_v2"]
    values["v2_decode_vs_baseline"] = statistics.median(ratios) if ratios else "no decode ratios (decode step missing)"
    wide = [r for r in rows if r["batch"] >= 8 and r["context"] == max(x["context"] for x in rows)] if rows else []
    copy = (decode or {}).get("roofline", {}).get("bandwidth_GBps")
    values["decode_bandwidth"] = (statistics.median(r["achieved_GBps"] for r in wide) / copy if wide and copy
                                  else "no decode point at batch >= 8 (decode step missing or grid too small)")
    return values


def targets(train: dict[str, Any], d_model: int | None, decode: dict[str, Any] | None) -> list[dict[str, Any]]:
    values = target_values(train, d_model, decode)
    out = []
    for name, rule, bound, op in TARGETS:
        value = values[name]
        row = {"target": name, "rule": f"{rule} {op} {bound}", "bound": bound, "op": op}
        if isinstance(value, str):
            out.append(row | {"value": None, "met": None, "missing": value})
        else:
            out.append(row | {"value": value, "met": value >= bound if op == ">=" else value <= bound})
    return out


def summary(stage: Path) -> dict[str, Any]:
    """gpu-check.json from what `stage` holds now: steps, machine, compile, kernels, benchmark, training, evaluation."""
    steps = [json.loads(line) for line in (stage / "steps.jsonl").read_text().splitlines()] \
        if (stage / "steps.jsonl").is_file() else []
    machine = _read(stage / "environment.json") or {}
    out: dict[str, Any] = {"steps": steps, "complete": bool(steps) and all(s["status"] == "ok" for s in steps),
                           "machine": machine, "compile": _read(stage / "compile-smoke.json"),
                           "training_compile_backend": compile_backend()}
    kernels = _read(stage / "kernels.json")
    if kernels:
        out["kernels"] = {key: kernels.get(key) for key in ("agreement_ok", "available", "auto_bf16",
                                                             "sdpa_default_bf16", "sdpa_kernels_bf16",
                                                             "modules_bf16_relative_error")}
    bench = _read(stage / "bench.json") or {}
    calibration = bench.get("calibration", {})
    measured = calibration.get("gemm_tflops", 0) * 1e12 or None
    datasheet = datasheet_peak(machine.get("gpu"))
    out["peaks"] = {"measured_gemm_tflops": measured and measured / 1e12, "measured_gemm": calibration.get("gemm"),
                    "measured_copy_GBps": calibration.get("copy_GBps"),
                    "datasheet_bf16_tflops": datasheet and datasheet / 1e12}
    out["attention_ops"] = [{key: r.get(key) for key in ("shape", "op", "kernel", "fwd_ms", "fwd_bwd_ms", "fwd_tflops",
                                                         "fwd_bwd_tflops", "error") if key in r}
                            for r in bench.get("attention_ops", [])]
    for folder in sorted(stage.glob("compare-*")):
        compare = _read(folder / "summary.json") or _read(folder / "partial.json") or {}
        out[folder.name] = {"complete": (folder / "summary.json").is_file() and "failed" not in compare,
                            "train": compare.get("train"), "settings": compare.get("settings"),
                            "variants": training_rows(compare, measured, datasheet),
                            "failed": compare.get("failed", {})}
    decode = _read(stage / "decode" / "decode.json")
    if decode:
        out["decode"] = {"machine": decode.get("machine"), "roofline": decode.get("roofline"),
                         "points": [{k: r.get(k) for k in ("variant", "batch", "context", "ms", "achieved_GBps",
                                                           "of_roofline", "kernel", "error") if k in r}
                                    for r in decode.get("decode", [])]}
    compares = sorted(stage.glob("compare-*"))
    preset = compares[0].name.removeprefix("compare-") if compares else None
    width = PRESETS[preset].model.d_model if preset in PRESETS else None
    out["targets"] = targets(out[compares[0].name]["variants"] if compares else {}, width, decode)
    for folder in sorted(stage.glob("eval-*")):
        suite = _read(folder / "summary.json") or {}
        out[folder.name] = {"complete": suite.get("complete", False), "failed": suite.get("failed", {}),
                            "many_needles": {v: r["many_needles_mean"] for v, r in suite.get("variants", {}).items()},
                            "files": sorted(str(p.relative_to(folder)) for p in folder.rglob("*.json"))}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m diffattn.cli.gpu_run", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["environment", "smoke", "summary", "check-out"])
    parser.add_argument("folder", nargs="?", type=Path, help="summary: the stage folder; check-out: $OUT")
    parser.add_argument("--device", default="cuda", help="smoke: cuda or cpu (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=None, help="where the JSON goes (default: stdout only)")
    args = parser.parse_args(argv)
    if args.action in ("summary", "check-out") and args.folder is None:
        parser.error(f"{args.action} needs a folder")
    if args.action == "check-out":
        problems = out_problems(args.folder)
        print("\n".join(problems) or f"{args.folder}: every file would come back")
        return 1 if problems else 0
    result = {"environment": environment, "smoke": lambda: compile_smoke(args.device),
              "summary": lambda: summary(args.folder)}[args.action]()
    text = json.dumps(result, indent=1)
    if args.out:
        from diffattn.core.results import write_json_atomic

        write_json_atomic(args.out, result)
    print(text if args.action != "summary" else f"summary of {len(result['steps'])} step(s) written")
    return 0 if result.get("ok", True) else 1


if __name__ == "__main__":
    sys.exit(main())
