#!/usr/bin/env bash
# One GPU run: the package's GPU test, the packaged-op host overhead, the Llama-3-8B-shaped delivery path.
cd "$(dirname "$0")"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site whl/*.whl || exit 9
export PYTHONPATH="$PWD/src:/tmp/site" PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $OUT/r/env.txt
python3 -c "import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)" >> $OUT/r/env.txt
date -u >> $OUT/r/env.txt
( timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu tests/package/test_gpu_package.py 2>&1 | tail -15 ) > $OUT/r/gpu_test.txt
cat $OUT/r/gpu_test.txt
timeout 150 python3 benchmarks/packaged_overhead.py --out /tmp/ovh --budget 3 > $OUT/r/overhead.txt 2>&1; echo "overhead rc $?" >> $OUT/r/overhead.txt
cp /tmp/ovh/overhead.json $OUT/r/ 2>/dev/null
tail -5 $OUT/r/overhead.txt
timeout 320 python3 benchmarks/delivery_e2e.py --out /tmp/e2e --budget 2 --shapes 1x512 4x2048 --rounds 8 --calls 3 > $OUT/r/e2e.txt 2>&1; echo "e2e rc $?" >> $OUT/r/e2e.txt
cp /tmp/e2e/e2e.json $OUT/r/ 2>/dev/null; cp /tmp/e2e/commands.log $OUT/r/e2e_commands.log 2>/dev/null
tail -30 $OUT/r/e2e.txt
