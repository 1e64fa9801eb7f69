#!/usr/bin/env bash
# The prepared GPU run: every GPU check, benchmark and a short training run, within a 330 s deadline (about 6 minutes
# on an H200), leaving whatever it finished even when a step fails or runs out of time.
#
#   bash scripts/gpu_check.sh [OUT_DIR]          on a CUDA machine: PYTHONPATH=code, its own python3, no installs
#   bash scripts/gpu_check.sh --cpu [OUT_DIR]    the dress rehearsal: the same steps at CPU sizes
#                                                (make gpu-rehearsal; tests/test_gpu_script.py in make test)
#
# OUT_DIR defaults to outputs/gpu/local (--cpu: outputs/gpu/rehearsal, git-ignored); without the argument the
# environment variable OUT, where set, names it instead. It ends up holding three files, each replaced whole after
# every step, and nothing else:
#   gpu-check.json   the summary: steps (status, seconds), GPU, driver, torch/CUDA/cuDNN/Triton, compile smoke test,
#                    kernel agreement and the SDPA kernel SDPA picks, measured GEMM TFLOP/s and copy GB/s, attention
#                    ops with the kernel that ran, decode points, per variant tokens/s and MFU against the measured
#                    and the datasheet peak, the throughput and decode `targets` with met flags, evaluation status
#                    (diffattn/cli/gpu_run.py builds it from whatever the steps left)
#   gpu-results.tgz  every step's full results and log (compare-*/summary.json, table.txt, compare.png, eval-*/...)
#   last-step.log    the log of the step that ran last
# Afterwards: unpack into outputs/gpu/<gpu>-<date>/ and commit (README, "GPU track").
#
# Steps, each under `timeout` with a kill-after, all under one deadline (GPU_CHECK_BUDGET, default 330 s: a step
# gets at most what is left; one that cannot get GPU_MIN_STEP seconds is skipped and says so). The 15 s between
# a step's SIGTERM and its SIGKILL (GPU_GRACE) come out of that budget, so the script ends within 330 s plus the
# packing after each step (a second each). Estimates for an H200 (an earlier measurement there: bf16 GEMM about
# 790 TFLOP/s, copy about 4.3 TB/s), from FLOPs and start-up costs; not yet measured by this script:
#   environment   nvidia-smi and torch import                                                          ~5 s   limit 30
#   compile       torch.compile smoke test, Inductor (a few Triton kernels, forward + backward)       ~15 s   limit 60
#                 if it fails, every later step trains with --no-compile
#   kernels       `gpu-check`: every attention path vs fp64 in bf16/fp16/fp32, SDPA kernels          ~15 s   limit 60
#   bench         calibration (1 GiB copy × 23, 8192³ bf16 GEMM × 23: ~0.1 s of GPU work) and 5 attention
#                 ops × 4 shapes (the last is gpu-small's), fwd and fwd+bwd (each ≤ 2 TFLOP: ms)       ~20 s   limit 60
#   decode        `bench decode --device cuda` (lesson 12): ceilings again, then the decode model's step at batch 1-64
#                 and context 1,024-16,384 per variant (caches up to ~4 GiB each), CUDA-synchronised    ~30 s   limit 60
#   compare       gpu-small (12 × 768, context 2,048, batch 32: 65,536 tokens per step; 6.2e8 (baseline) to 8.2e8
#                 (2h heads) training FLOP per token, diffattn.training.loop.training_flops_per_token → 4.1-5.4e13 FLOP
#                 per step ≈ 0.13-0.17 s at 40% of 790 TFLOP/s), 4 variants × GPU_TRAIN_STEPS=40 steps; per variant
#                 compile ~35 s + 40 steps ~6 s + 2 evaluations ~1 s + a 1.0-1.2 GB checkpoint ~3 s        ~180 s   limit 190
#   eval          `eval suite` on gpu-small needles checkpoints trained here, 3 variants × GPU_EVAL_STEPS=20
#                 steps without compile (~0.3 s/step) + every evaluation at --samples 1                ~90 s   whatever is left
#   study         opt-in, GPU_RETRIEVAL_STEPS=N (default 0: off; it does not fit the 6 minutes)
# GPU_TRAIN_STEPS=0 or GPU_EVAL_STEPS=0 skips that step. Results of 40 steps are timings, not model quality: no lesson
# quotes them. The full preset is 1,200 steps per variant (GPU_TRAIN_STEPS=1200 GPU_CHECK_BUDGET=3600 on a machine
# held longer).
set -uo pipefail
MODE=gpu
FOLDER=""
USAGE="usage: bash scripts/gpu_check.sh [--cpu] [OUT_DIR]"
for arg in "$@"; do
    case "$arg" in
        --cpu) MODE=cpu ;;
        -*) echo "$USAGE (unknown option $arg)" >&2; exit 2 ;;
        *) [ -n "$FOLDER" ] && { echo "$USAGE (one OUT_DIR, got $FOLDER and $arg)" >&2; exit 2; }
           FOLDER=$arg ;;
    esac
done
OUT=${FOLDER:-${OUT:-}}
[ -n "$OUT" ] && [ "${OUT#/}" = "$OUT" ] && OUT=$PWD/$OUT  # a relative OUT_DIR is the caller's, not the repository's
cd "$(dirname "$0")/.."
if [ -z "$OUT" ]; then
    OUT=outputs/gpu/local
    [ "$MODE" = cpu ] && OUT=outputs/gpu/rehearsal
fi
PY=${PYTHON:-python3}
GRACE=${GPU_GRACE:-15}            # seconds between a step's SIGTERM (it saves what it finished) and SIGKILL
MIN_STEP=${GPU_MIN_STEP:-20}
export PYTHONPATH=code${PYTHONPATH:+:$PYTHONPATH}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
STAGE=$WORK/results               # what is packed into gpu-results.tgz
export DIFFATTN_CHECKPOINTS=$WORK/checkpoints   # trained runs (1 GB each on gpu-small) stay out of the results
mkdir -p "$OUT" "$STAGE/logs"
START=$SECONDS
status=0

if [ "$MODE" = gpu ]; then
    DEVICE=cuda PRESET=gpu-small SIZE=() SLOW=1
    TRAIN_STEPS=${GPU_TRAIN_STEPS:-40} EVAL_STEPS=${GPU_EVAL_STEPS:-20}
    BUDGET=${GPU_CHECK_BUDGET:-330}
else  # cpu-tiny, compiled, bf16 autocast on CPU: every code path of the GPU run at CI sizes, in under a minute on
    # 2 cores. torch.compile uses aot_eager here (Dynamo's graph capture and AOTAutograd without code generation: a CPU
    # cannot rehearse Triton's anyway), or GPU_REHEARSAL_BACKEND=inductor (make test-slow; Inductor's cold C++
    # compiles take 20-45 s each here, hence three times the GPU's step limits)
    DEVICE=cpu PRESET=cpu-tiny SIZE=(--bf16) SLOW=3
    export DIFFATTN_COMPILE_BACKEND=${GPU_REHEARSAL_BACKEND:-aot_eager}
    TRAIN_STEPS=${GPU_TRAIN_STEPS:-4} EVAL_STEPS=${GPU_EVAL_STEPS:-4}
    BUDGET=${GPU_CHECK_BUDGET:-900}
fi

pack() {  # the summary, the packed results and the last log into OUT_DIR (three files, each replaced whole)
    "$PY" -m diffattn.cli.gpu_run summary "$STAGE" --out "$STAGE/gpu-check.json" >> "$STAGE/logs/summary.log" 2>&1
    tar -czf "$WORK/gpu-results.tgz" -C "$STAGE" .
    [ $? -le 1 ] && mv -f "$WORK/gpu-results.tgz" "$OUT/gpu-results.tgz"  # 1: a file changed while read; still packed
    [ -f "$STAGE/gpu-check.json" ] && cp "$STAGE/gpu-check.json" "$OUT/gpu-check.json"
    [ -f "$1" ] && cp "$1" "$OUT/last-step.log"
}

record() {  # record NAME STATUS RC SECONDS LIMIT [REASON]: one line of steps.jsonl
    printf '{"step": "%s", "status": "%s", "rc": %s, "seconds": %s, "limit": %s, "reason": "%s"}\n' \
        "$1" "$2" "$3" "$4" "$5" "${6:-}" >> "$STAGE/steps.jsonl"
}

skip() {  # skip NAME REASON: a step that did not run, said so in its log and in steps.jsonl
    echo "== $1 skipped: $2" | tee "$STAGE/logs/$1.log"
    record "$1" skipped null 0 0 "$2"
    status=1
    pack "$STAGE/logs/$1.log"
    return 1
}

lacking() {  # the modules among "$@" that this python cannot import (the GPU machine has no installs)
    "$PY" -c 'import importlib, sys
missing = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ImportError:
        missing.append(name)
print(" ".join(missing))' "$@"
}

step() {  # step NAME LIMIT [--needs "MODULE ..."] COMMAND...: run under the smaller of LIMIT and what the deadline
    local name=$1 limit=$2 needs=""  # leaves, then pack
    shift 2
    if [ "$1" = --needs ]; then
        needs=$2
        shift 2
    fi
    local log=$STAGE/logs/$name.log
    local module missing=""
    for module in torch $needs; do
        [[ " $LACKING " == *" $module "* ]] && missing="$missing $module"
    done
    [ -n "$missing" ] && { skip "$name" "needs${missing}, which $PY cannot import"; return 1; }
    local left=$((BUDGET - (SECONDS - START) - GRACE))
    [ "$left" -lt "$MIN_STEP" ] && { skip "$name" "${left} s left of the ${BUDGET} s budget"; return 1; }
    limit=$((limit * SLOW))
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $name (limit $limit s)"
    local started=$SECONDS
    timeout -k "$GRACE" "$limit" "$@" > "$log" 2>&1
    local rc=$?
    local state=ok
    [ "$rc" -ne 0 ] && state=failed
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && state="timed out"
    echo "   $state (exit $rc) after $((SECONDS - started)) s"
    tail -n 15 "$log"
    if [ "$(wc -c < "$log")" -gt 4000000 ]; then  # a runaway log must not push the archive past 16 MiB
        tail -c 4000000 "$log" > "$log.tail" && mv "$log.tail" "$log"
    fi
    record "$name" "$state" "$rc" "$((SECONDS - started))" "$limit"
    [ "$state" = ok ] || status=1
    pack "$log"
    [ "$state" = ok ]
}

LACKING=$(lacking torch scipy tqdm)  # once: each check imports the module
step environment 30 bash -c "{ command -v nvidia-smi > /dev/null && nvidia-smi; } ; \
    $PY -m diffattn.cli.gpu_run environment --out $STAGE/environment.json"
COMPILE=()
step compile 60 "$PY" -m diffattn.cli.gpu_run smoke --device "$DEVICE" --out "$STAGE/compile-smoke.json" \
    || COMPILE=(--no-compile)
[ "$MODE" = cpu ] && [ ${#COMPILE[@]} -eq 0 ] && COMPILE=(--compile)  # cpu-tiny is not compiled by default
step kernels 60 "$PY" -m diffattn gpu-check --device "$DEVICE" --out "$STAGE/kernels.json"
if [ "$MODE" = gpu ]; then
    step bench 60 "$PY" -m diffattn bench --device cuda --no-hf --out "$STAGE/bench.json"
    step decode 60 "$PY" -m diffattn bench decode --device cuda --no-figures --out "$STAGE/decode"
else
    step bench 60 "$PY" -m diffattn bench --device cpu --quick --no-hf --out "$STAGE/bench.json"
    step decode 60 "$PY" -m diffattn bench decode --device cpu --quick --threads 1 --no-figures --out "$STAGE/decode"
fi
COMPARE_LIMIT=190
[[ " $LACKING " == *" scipy "* ]] && COMPARE_LIMIT=280  # eval will be skipped: its ~90 s go to compare
if [ "$TRAIN_STEPS" != 0 ]; then
    step compare "$COMPARE_LIMIT" "$PY" -m diffattn compare --preset "$PRESET" --device "$DEVICE" --steps "$TRAIN_STEPS" \
        ${COMPILE[@]+"${COMPILE[@]}"} ${SIZE[@]+"${SIZE[@]}"} --no-progress --out "$STAGE/compare-$PRESET"
fi
if [ "$EVAL_STEPS" != 0 ]; then
    # scipy: its intervals (diffattn.core.stats); a bare GPU machine may not have it
    step eval 600 --needs "scipy tqdm" "$PY" -m diffattn eval suite --preset "$PRESET" --steps "$EVAL_STEPS" \
        --warmup-steps 1 --no-compile --samples 1 --out "$STAGE/eval-$PRESET"
fi
RETRIEVAL_STEPS=${GPU_RETRIEVAL_STEPS:-0}
if [ "$RETRIEVAL_STEPS" != 0 ]; then  # lesson 09's low-floor tasks at gpu-small's width (needs scipy for the summary)
    step study 600 --needs "scipy tqdm" "$PY" -m diffattn study --groups retrieval --retrieval-preset "$PRESET" \
        --retrieval-steps "$RETRIEVAL_STEPS" --out "$STAGE/study-$PRESET" --no-progress
fi
echo "all steps: $((SECONDS - START)) s; results in $OUT:"
"$PY" -m diffattn.cli.gpu_run check-out "$OUT" || status=1
ls -l "$OUT"
rm -rf "$WORK"
exit $status
