#!/usr/bin/env bash
# Everything that needs the GPU, in one call on the GPU host (from the repo root):
#   bash scripts/gpu_tier.sh [tests|ops|all] [op ...]
# Writes logs, JSON run summaries and archives under $OUT (or ./gpu-out) and into
# benchmarks/results/<date>-<gpu>/ (with results.md: device, date, versions, tables). The H200 image lacks pydantic and
# liger-kernel: carry ./.whl (built here by ../shared/scripts/wheelhouse.sh with WHEEL_EXTRAS=bench).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH="$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
what=${1:-all}; shift || true
ops=("$@"); [ ${#ops[@]} -gt 0 ] || ops=(layernorm rmsnorm softmax)
BUDGET=${BUDGET:-12}
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
} 2>&1 | tee "$OUT/env.txt"
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  timeout 450 python3 -m pytest -m gpu tests -v --tb=short -p no:cacheprovider --timeout 150 2>&1 | tee "$OUT/gpu-tests.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
fi
if [ "$what" = ops ] || [ "$what" = all ]; then
  for op in "${ops[@]}"; do
    rm -rf "runs/gpu-$op"
    python3 -m kernelloop.cli.app optimize "ops/$op" --device cuda --budget "$BUDGET" \
      --out "runs/gpu-$op" --json > "$OUT/$op.json" 2> "$OUT/$op.err"
    echo "$op: exit $?"; tail -3 "$OUT/$op.err"
    cp "runs/gpu-$op/archive.sqlite" "$OUT/$op.sqlite" 2>/dev/null
    python3 benchmarks/render.py "$OUT/$op.json" 2>&1 | tail -12
  done
fi
# Results into the repo (device, date, versions) and into $OUT.
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr 'A-Z ' 'a-z-')
RESULTS=${RESULTS:-benchmarks/results/$(date -u +%F)-${gpu:-gpu}}
mkdir -p "$RESULTS"
cp "$OUT"/env.txt "$OUT"/*.json "$OUT"/*.sqlite "$OUT"/gpu-tests.log "$RESULTS"/ 2>/dev/null
{ cat "$OUT/env.txt"; echo; for j in "$OUT"/*.json; do python3 benchmarks/render.py "$j"; done; } > "$RESULTS/results.md" 2>&1
cp "$RESULTS/results.md" "$OUT/results.md"
echo "results: $RESULTS"
exit $rc
