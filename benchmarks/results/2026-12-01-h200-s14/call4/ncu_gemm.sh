#!/bin/bash
# ncu over .dev/ncu_gemm.py: a few metrics per GEMM kernel (caches flushed before each, clocks as they run)
set -u
M=gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__cycles_active.avg,sm__cycles_elapsed.avg
timeout 300 ncu --clock-control none --cache-control all --kernel-name regex:'gemm|nvjet|sm90|gemm_ws|pingpong' \
  --metrics "$M" --csv python3 .dev/ncu_gemm.py > "$OUT/ncu-gemm.csv" 2> "$OUT/ncu-gemm.err"
echo "ncu rc=$?"
tail -5 "$OUT/ncu-gemm.err"
python3 - "$OUT/ncu-gemm.csv" <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
r = list(csv.DictReader(rows))
by = collections.OrderedDict()
for x in r:
    by.setdefault((x["ID"], x["Kernel Name"][:60], x.get("NVTX", "")), {})[x["Metric Name"]] = x["Metric Value"]
for k, v in by.items():
    print(k[0], k[1], k[2], " | ".join(f"{m.split('.')[0].split('__')[-1]}={val}" for m, val in v.items()))
PY
