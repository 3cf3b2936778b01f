#!/usr/bin/env bash
# The GPU tier on a GPU host, from the repo root: the `gpu`-marked tests, the row ops' shape suites, or both.
#   bash scripts/gpu_tier.sh [tests|ops|all]
# A shorthand for benchmarks/run.py (see its --list): tests = the gpu-tier suite, ops = norms-shapes.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-all}" in
  tests) exec python3 benchmarks/run.py gpu-tier ;;
  ops) exec python3 benchmarks/run.py norms-shapes ;;
  all) exec python3 benchmarks/run.py gpu-tier norms-shapes ;;
  *) echo "usage: bash scripts/gpu_tier.sh [tests|ops|all]" >&2; exit 2 ;;
esac
