#!/usr/bin/env bash
# Short diagnostic on the GPU host: a few gpu tests with strict per-test timeouts, and one tiny loop run.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="$PWD/src:/tmp/site" PYTHONUNBUFFERED=1
timeout 200 python3 -m pytest -m gpu tests/gpu -x -v --tb=long -p no:cacheprovider --timeout 90 -k "${K:-honest}" > "$OUT/diag-tests.log" 2>&1
echo "pytest rc=$?"; grep -E "PASS|FAIL|Error|error|assert" "$OUT/diag-tests.log" | head -40
timeout 200 python3 -m kernelloop.cli.app optimize ops/layernorm --device cuda --budget 3 --workloads benchmarks/workloads/layernorm-4096.toml --out runs/diag --json > "$OUT/diag-run.json" 2> "$OUT/diag-run.err"
echo "run rc=$?"; tail -5 "$OUT/diag-run.err"; head -c 1500 "$OUT/diag-run.json"
cp runs/diag/worker.log "$OUT/diag-worker.log" 2>/dev/null; tail -20 runs/diag/worker.log 2>/dev/null
