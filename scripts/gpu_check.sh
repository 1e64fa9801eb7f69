#!/usr/bin/env bash
# The one prepared GPU run, sized to finish in under 8 minutes on an H100/H200 (every step has its own time limit, and
# the limits add up to 470 s after start-up). Writes everything to $OUT (default: outputs/gpu/local).
#
#   OUT=/some/dir bash scripts/gpu_check.sh
#
# Uses the machine's own python3 (PyTorch preinstalled; no pip, no network) with PYTHONPATH=code:
#   1. environment: GPU, driver, torch / CUDA / cuDNN versions, flash-attn presence
#   2. `python -m diffattn gpu-check`: every attention path vs an fp64 reference in bf16/fp16/fp32, SDPA kernel support
#      for equal and 2d-wide values, whole modules in bf16 (lesson 06)
#   3. the GPU tests (tests/test_gpu.py), when pytest is installed
#   4. `python -m diffattn bench --device cuda`: calibration (copy GB/s, bf16 GEMM) and attention ops fwd / fwd+bwd
#   5. lesson 08's gpu-small preset, every variant (bf16, compiled): `python -m diffattn compare --preset gpu-small`
#      writes summary.json (loss curves, tokens/s, MFU, machine), table.txt and compare.png to $OUT/compare-gpu-small.
#      By default each variant trains GPU_TRAIN_STEPS=150 steps (a timing run that fits the 8-minute budget); the full
#      preset is 1,200 steps per variant, sized for about 5 minutes each (not yet measured): GPU_TRAIN_STEPS=1200 on a
#      machine you hold longer. GPU_TRAIN_STEPS=0 skips training.
#   6. lessons 09-11 on gpu-small `needles` checkpoints (trained when missing): `python -m diffattn eval suite`
#      writes one JSON per variant and evaluation, and summary.json (machine, GPU), to $OUT/eval-gpu-small
#      (skipped with GPU_TRAIN_STEPS=0).
#   7. opt-in (GPU_RETRIEVAL_STEPS=N, default 0: off, it does not fit the 8 minutes with steps 5-6): lesson 09's low-floor
#      retrieval tasks (diffattn/study.py: 3-digit needles and `rebind`, 3 variants × 3 seeds) at gpu-small's width
#      and context 2,048, N steps each, learning curves against their nulls: `python -m diffattn study --groups
#      retrieval --retrieval-preset gpu-small` writes summary.json and table.txt to $OUT/study-gpu-small (the summary
#      needs scipy). No lesson quotes GPU numbers until such a run is committed.
# Afterwards copy $OUT to outputs/gpu/<gpu>-<date>/ and commit it (README, "GPU results"); copy eval-gpu-small also
# to outputs/eval/gpu-small/, where lessons 09-11 read committed suites (diffattn.eval.saved) and report them.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-outputs/gpu/local}
PY=${PYTHON:-python3}
export PYTHONPATH=code${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT"
status=0

step() {  # step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.log, remember failures
    local name=$1 limit=$2
    shift 2
    echo "== $name"
    local started=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "   exit $rc after $((SECONDS - started)) s (log: $OUT/$name.log)"
    tail -n 25 "$OUT/$name.log"
    [ "$rc" -eq 0 ] || status=1
}

step environment 20 bash -c "nvidia-smi; $PY -c 'import torch, importlib.util as u; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"cudnn\", torch.backends.cudnn.version(), \"gpu\", torch.cuda.get_device_name(), \"flash_attn\", u.find_spec(\"flash_attn\") is not None)'"
step gpu-check 90 "$PY" -m diffattn gpu-check --out "$OUT/gpu-check.json"
if "$PY" -c "import pytest" 2> /dev/null; then
    step gpu-tests 60 "$PY" -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider --junitxml="$OUT/gpu-tests.xml"
else
    echo "== gpu-tests skipped: pytest is not installed here (gpu-check above runs the same checks)"
fi
step bench 60 "$PY" -m diffattn bench --device cuda --quick --no-hf --out "$OUT/bench-cuda.json"
TRAIN_STEPS=${GPU_TRAIN_STEPS:-150}
if [ "$TRAIN_STEPS" != "0" ]; then
    step compare-gpu-small 180 "$PY" -m diffattn compare --preset gpu-small --no-progress \
        --out "$OUT/compare-gpu-small" ${TRAIN_STEPS:+--steps "$TRAIN_STEPS"}
    # lessons 09-11 on gpu-small needles checkpoints (trained here when missing): JSON per variant and kind
    step eval-gpu-small 60 "$PY" -m diffattn eval suite --preset gpu-small --out "$OUT/eval-gpu-small"
fi
RETRIEVAL_STEPS=${GPU_RETRIEVAL_STEPS:-0}
if [ "$RETRIEVAL_STEPS" != "0" ]; then
    step study-retrieval-gpu-small 300 "$PY" -m diffattn study --groups retrieval --retrieval-preset gpu-small \
        --retrieval-steps "$RETRIEVAL_STEPS" --out "$OUT/study-gpu-small" --no-progress
fi
echo "results in $OUT"
exit $status
