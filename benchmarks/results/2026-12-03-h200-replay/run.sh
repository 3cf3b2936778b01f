# from a snapshot of the repository (src, tests, benchmarks) with the project's wheels installed on PYTHONPATH
cd "$(dirname "$0")/../../.."; mkdir -p $OUT/r   # the repository root
CORE="tests/package/test_gpu_package.py tests/gpu/test_cuda_evaluation.py tests/verify/test_cheat_gallery.py tests/verify/test_cheat_gallery2.py tests/verify/test_sanitizer.py tests/agent/test_agent_workspace.py"
( time timeout 230 python3 -m pytest -q -p no:cacheprovider -m gpu $CORE --timeout 150 --durations=15 -rfEsxX ) > $OUT/r/gpu_core.txt 2>&1
tail -25 $OUT/r/gpu_core.txt
timeout 170 python3 benchmarks/packaged_overhead.py --out /tmp/ovh --budget 3 > $OUT/r/overhead.txt 2>&1; echo "overhead rc $?" >> $OUT/r/overhead.txt
cp /tmp/ovh/overhead.json $OUT/r/ 2>/dev/null
grep -v "^ " $OUT/r/overhead.txt | tail -8
DES=""; for f in $CORE; do DES="$DES --ignore=$f"; done
( time timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests $DES --timeout 140 --durations=10 -rfEsxX ) > $OUT/r/gpu_rest.txt 2>&1
tail -25 $OUT/r/gpu_rest.txt
