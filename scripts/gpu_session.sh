#!/usr/bin/env bash
# One device call of a GPU session: named steps in lanes, one lane per GPU (lanes run one after the other
# when the host has a single GPU). Every step runs under `timeout`, logs to $OUT/<step>.log, and appends
# "step rc seconds" to $OUT/steps.tsv, so a hung or failed step costs its own time only.
#
#   bash scripts/gpu_session.sh PHASE          # PHASE: memory | headline | evidence | evidence2 | final | last | profiles | matmul
#
# The H200 image lacks pydantic and liger-kernel: carry ./.whl (docs/gpu-runbook.md says how to build it).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
phase=${1:?phase: memory | headline | evidence | evidence2 | final | last | profiles | matmul | s4a | s4b | s4c | s4d | s5a | s5b | s5c | s5d | s5e | s6a | s6b | s6c | s7a | s7b | s8a | s9a | s9b | s9c | s9d | s10a | s10b | s11a | s12a | s12b | s12c | s12d | s13a | s14a | s14b | s14c | s15a | s15b | s15c | s15d | s16a | s16b | s16c | s16d | s16e | s16f | s16g | s17a | s17b | s18a | s18b | selftest}
STEP_PIDS=$(mktemp -d /tmp/gpu-session-steps.XXXXXX)   # one NAME.pid per running step
# Only a handful of files come back from a device call: pack everything into one archive, also when the call's
# own `timeout` stops this script (SIGTERM): the lanes are stopped first, then what they wrote is packed.
packed=0
pack() {
  [ "$packed" = 1 ] && return
  packed=1
  cat "$OUT/steps.tsv" 2>/dev/null
  # built in this run's own temporary folder (a fixed /tmp name would be shared with any other session running
  # at the same time), then moved into $OUT; only when that worked are the packed files removed from $OUT
  local tgz="$STEP_PIDS/session-$phase.tgz"
  rm -f "$OUT/session-$phase.tgz"
  ( cd "$OUT" && tar czf "$tgz" . ) || echo "pack: tar exited $?" | tee -a "$OUT/steps.tsv"
  if [ -s "$tgz" ] && mv "$tgz" "$OUT/"; then
    ( cd "$OUT" && find . -mindepth 1 ! -name "session-$phase.tgz" ! -name steps.tsv ! -name "env-$phase.txt" -delete )
  else
    echo "pack: no archive made, the files stay as they are" | tee -a "$OUT/steps.tsv"
  fi
  ls -la "$OUT"
}
on_term() {
  # ignore, not reset: `timeout` signals this shell and then its whole process group, so a second TERM follows
  # the first at once, and with the default disposition it would kill this shell in the middle of packing
  trap '' TERM INT
  echo "stopped by a signal: packing what the steps wrote" | tee -a "$OUT/steps.tsv"
  # `timeout` passes the signal on to its command's process group; then the lanes themselves
  for f in "$STEP_PIDS"/*.pid; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done
  kill -TERM $(jobs -p) 2>/dev/null
  sleep 2
  pack
  rm -rf "$STEP_PIDS"
  exit 124
}
trap on_term TERM INT
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
fi
export PYTHONPATH="$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
KL="python3 -m kernelloop.cli.app"
[ "$phase" = selftest ] || {
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  python3 -c 'import liger_kernel, pydantic; print("liger-kernel", __import__("importlib.metadata").metadata.version("liger-kernel"), "pydantic", pydantic.VERSION)'
  command -v ncu && ncu --version | tail -1
} > "$OUT/env-$phase.txt" 2>&1
[ "$phase" = selftest ] && date -u +"date: %Y-%m-%dT%H:%M:%SZ (selftest: no device facts)" > "$OUT/env-$phase.txt"
cat "$OUT/env-$phase.txt"

step() {  # step NAME SECONDS command...
  local name=$1 secs=$2; shift 2
  local t0=$SECONDS
  # in the background and waited for, so a signal to this script is handled at once (see on_term)
  timeout --kill-after=10 "$secs" "$@" > "$OUT/$name.log" 2>&1 &
  local pid=$!
  echo "$pid" > "$STEP_PIDS/$name.pid"      # only running steps are listed: a finished step's pid may be reused
  wait "$pid"
  local rc=$?
  rm -f "$STEP_PIDS/$name.pid"
  printf '%s\t%s\t%s\tgpu=%s\n' "$name" "$rc" "$((SECONDS - t0))" "${CUDA_VISIBLE_DEVICES:-}" | tee -a "$OUT/steps.tsv"
  return 0
}

optimize() {  # optimize NAME SECONDS OP [options...]: a run folder runs/NAME, its JSON summary and gzipped archive in $OUT
  local name=$1 secs=$2 op=$3; shift 3
  rm -rf "runs/$name"
  step "$name" "$secs" sh -c 'out=$1; shift; "$@" > "$out"' _ "$OUT/$name.json" \
    $KL optimize "ops/$op" --device cuda --out "runs/$name" --json "$@"
  # a step cut by its timeout leaves the newest trials in the write-ahead log: fold it into the file first
  python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("PRAGMA wal_checkpoint(TRUNCATE)"); c.close()' \
    "runs/$name/archive.sqlite" 2>/dev/null
  # gzipped, as committed results keep archives (--prior, show and profile read .sqlite.gz; ~7x smaller)
  [ -f "runs/$name/archive.sqlite" ] && gzip -9n -c "runs/$name/archive.sqlite" > "$OUT/$name.sqlite.gz"
  python3 benchmarks/render.py "$OUT/$name.json" > "$OUT/$name.md" 2>&1
}

wait_for() {  # wait_for FILE SECONDS: until another lane has written FILE (or the time is up)
  local t=0
  while [ ! -e "$1" ] && [ "$t" -lt "$2" ]; do sleep 2; t=$((t + 2)); done
}

screen_step() {  # screen_step NAME SECONDS pruning_screen.py arguments...: the screen, then its summary
  local name=$1 secs=$2; shift 2
  # a CUDA fault ends the screen's process after recording its configuration (exit 3): continue in a fresh one;
  # the step's status is the last run's
  step "$name" "$secs" sh -c 'rc=0; for i in 1 2 3 4 5 6; do "$@"; rc=$?; [ "$rc" = 3 ] || break; done; exit "$rc"' _ \
    python3 benchmarks/pruning_screen.py "$@"
  # summarized again from what was timed, also when the screen was cut, failed or faulted six times
  step "$name-summary" 60 python3 benchmarks/pruning_screen.py "$@" --summarize-only
}

gpu_tests() {
  step gpu-tests "$1" python3 -m pytest -m gpu tests -v --tb=short -p no:cacheprovider --timeout 150
}

# Every prefill archive so far, for a per-workload warm start (each workload from its own measured best): s14b, s14c
PREFILL_PRIORS=(
  --prior benchmarks/results/2026-11-30-h200-s7/call4-gemm-prefill-prior.sqlite.gz
  --prior benchmarks/results/2026-12-01-h200-s8/call2-gemm-prefill-few-tiles.sqlite.gz
  --prior benchmarks/results/2026-12-01-h200-s9/call4-gemm-prefill-own-best.sqlite.gz
  --prior benchmarks/results/2026-12-01-h200-s10/call2/gemm-prefill-all-best.sqlite.gz
  --prior benchmarks/results/2026-12-01-h200-s10/call4/gemm-few-tiles-bm128.sqlite.gz
  --prior benchmarks/results/2026-12-01-h200-s10/call4/gemm-few-tiles-bm64.sqlite.gz
  --prior benchmarks/results/2026-12-01-h200-s11/call2/gemm-narrow-64x64.sqlite.gz
  --prior benchmarks/results/2026-12-01-h200-s11/call2/gemm-narrow-splitk.sqlite.gz
)
# s15a's recordings of the Gluon template over the prefill suite (its 256-wide tiles), for s15b and s15c
GLUON_PRIORS=(--prior benchmarks/results/2026-12-01-h200-s12/call4/gemm-prefill-gluon.sqlite.gz
  --prior benchmarks/results/2026-12-01-h200-s13/call4/gemm-prefill-gluon128.sqlite.gz)

lane_a() { :; }
lane_b() { :; }
case "$phase" in
  memory)  # issue 2: the three memory-bound ops over six shapes, current manifest; the GPU test tier
    lane_a() {
      gpu_tests 300
      optimize layernorm 230 layernorm --budget 12,130s
    }
    lane_b() {
      optimize softmax-4096 200 softmax --strategy exhaustive --budget 128,150s --workloads benchmarks/workloads/softmax-4096.toml
      optimize rmsnorm 170 rmsnorm --budget 10,80s
      optimize softmax 170 softmax --budget 10,80s
    }
    ;;
  headline)  # issue 2's fp16 [4096, 4096] figures (wider searches), issue 3's side stream and A/A experiment
    lane_a() {
      optimize layernorm-4096 210 layernorm --strategy random --budget 64,150s --workloads benchmarks/workloads/layernorm-4096.toml
      optimize rmsnorm-4096 210 rmsnorm --strategy random --budget 64,150s --workloads benchmarks/workloads/rmsnorm-4096.toml
      step side-stream 90 python3 benchmarks/side_stream.py --out "$OUT/side_stream.json"
      step flush-modes 80 python3 benchmarks/flush_modes.py --out "$OUT/flush_modes.json"
    }
    lane_b() {
      optimize softmax-4096 340 softmax --strategy exhaustive --budget 200,290s --workloads benchmarks/workloads/softmax-4096.toml
      step aa 200 python3 benchmarks/aa_experiment.py --device cuda --comparisons 100 --samples 40 --out "$OUT/aa.json"
    }
    ;;
  evidence)  # issues 3, 4, 5: GPU tier (now with ncu tests), side stream, A/A; a recorded LayerNorm space and the planner
    lane_a() {
      gpu_tests 330
      step side-stream 60 python3 benchmarks/side_stream.py --out "$OUT/side_stream.json"
      # the ~7 µs A/A bias: own buffers (twin), the very same buffers (same), shared rotating output sets
      step aa-twin 45 python3 benchmarks/aa_experiment.py --device cuda --kernels 0 --comparisons 40 --samples 40 \
        --output-sets 1 --out "$OUT/aa-twin.json"
      step aa-same 45 python3 benchmarks/aa_experiment.py --device cuda --kernels 0 --comparisons 40 --samples 40 \
        --output-sets 1 --twin candidate-same --out "$OUT/aa-same.json"
      step aa-sets3 45 python3 benchmarks/aa_experiment.py --device cuda --kernels 0 --comparisons 40 --samples 40 \
        --output-sets 3 --out "$OUT/aa-sets3.json"
    }
    lane_b() {
      step record-layernorm 270 $KL record ops/layernorm --device cuda --workloads benchmarks/workloads/layernorm-4096.toml \
        --out "$OUT/layernorm-4096.space.json.gz"
      optimize planner-layernorm 200 layernorm --strategy planner --start "BLOCK_N=1024,ROWS=1,num_warps=1,EVICT_FIRST=0" \
        --budget 15 --no-confirm --workloads benchmarks/workloads/layernorm-4096.toml
      step planner-vs-exhaustive 60 python3 benchmarks/planner_vs_exhaustive.py \
        --exhaustive "$OUT/layernorm-4096.space.json.gz" --planner runs/planner-layernorm --out "$OUT/planner_vs_exhaustive.json"
    }
    ;;
  evidence2)  # issue 4: the LayerNorm [4096, 4096] space in two shards (one per GPU), the planner beside it, classes
             # with each instrument against its own copy roof (limits from the third session's cut runs)
    lane_a() {
      step record-layernorm-0 300 $KL record ops/layernorm --device cuda --workloads benchmarks/workloads/layernorm-4096.toml \
        --shard 0/2 --resume --out "$OUT/layernorm-4096.shard0.space.json.gz"
      step profile-classes 220 python3 benchmarks/profile_classes.py --clean-timing --baseline eager --baseline copy-kernel \
        benchmarks/results/2026-11-30-h200-s2/layernorm-4096.sqlite benchmarks/results/2026-11-30-h200-s2/rmsnorm-4096.sqlite \
        benchmarks/results/2026-11-30-h200-s2/softmax-4096.sqlite --out "$OUT/profile_classes.json"
    }
    lane_b() {
      step record-layernorm-1 300 $KL record ops/layernorm --device cuda --workloads benchmarks/workloads/layernorm-4096.toml \
        --shard 1/2 --resume --out "$OUT/layernorm-4096.shard1.space.json.gz"
      optimize planner-layernorm 200 layernorm --strategy planner --start "BLOCK_N=1024,ROWS=1,num_warps=1,EVICT_FIRST=0" \
        --budget 15 --no-confirm --workloads benchmarks/workloads/layernorm-4096.toml
      step planner-vs-exhaustive 30 python3 benchmarks/planner_vs_exhaustive.py \
        --exhaustive "$OUT/layernorm-4096.shard0.space.json.gz" --exhaustive "$OUT/layernorm-4096.shard1.space.json.gz" \
        --planner runs/planner-layernorm --out "$OUT/planner_vs_exhaustive.json"
    }
    ;;
  final)  # issue 4: classes and agreement with the copy roof per instrument; issue 7: GEMM 4096^3 against cuBLAS;
          # issue 3: the full A/A with the default policy (output sets, launch-hiding check), side stream; GPU tier fixes
    lane_a() {
      step profile-classes 220 python3 benchmarks/profile_classes.py --clean-timing --baseline eager --baseline copy \
        benchmarks/results/2026-11-30-h200-s2/layernorm-4096.sqlite benchmarks/results/2026-11-30-h200-s2/rmsnorm-4096.sqlite \
        benchmarks/results/2026-11-30-h200-s2/softmax-4096.sqlite --out "$OUT/profile_classes.json"
      optimize gemm-4096 290 gemm --budget 24,220s --workloads benchmarks/workloads/gemm-4096.toml
    }
    lane_b() {
      step aa 220 python3 benchmarks/aa_experiment.py --device cuda --comparisons 200 --samples 40 --out "$OUT/aa.json"
      step side-stream 60 python3 benchmarks/side_stream.py --out "$OUT/side_stream.json"
      step gpu-tests-fixed 200 python3 -m pytest -m gpu -v --tb=short -p no:cacheprovider --timeout 150 \
        tests/bench/test_policy.py tests/profile/test_ceilings.py tests/gpu/test_cuda_evaluation.py \
        "tests/profile/test_profile_gpu.py::test_build_resources_of_a_compiled_triton_kernel"
    }
    ;;
  last)  # the last 318 s of the third session: the ~2 ms A/A kernel (cut in `final`), classes with a copy kernel as
         # the per-instrument roof, the fixed build-resources test
    lane_a() {
      step profile-classes 150 python3 benchmarks/profile_classes.py --clean-timing --baseline eager \
        --baseline copy-kernel benchmarks/results/2026-11-30-h200-s2/layernorm-4096.sqlite \
        benchmarks/results/2026-11-30-h200-s2/rmsnorm-4096.sqlite benchmarks/results/2026-11-30-h200-s2/softmax-4096.sqlite \
        --out "$OUT/profile_classes.json"
      step gpu-tests-fixed 40 python3 -m pytest -m gpu -v --tb=short -p no:cacheprovider --timeout 30 \
        "tests/profile/test_profile_gpu.py::test_build_resources_of_a_compiled_triton_kernel"
    }
    lane_b() {
      step aa-2ms 150 python3 benchmarks/aa_experiment.py --device cuda --kernels 4 --comparisons 40 --samples 40 \
        --out "$OUT/aa-2ms.json"
    }
    ;;
  profiles)  # issue 4's classes and roofline agreement (ncu), a GEMM run for the compute-bound class; issue 6's dogfood
    lane_a() {
      optimize gemm-4096 240 gemm --strategy random --budget 24,180s --workloads benchmarks/workloads/gemm-4096.toml
      step profile-classes 300 python3 benchmarks/profile_classes.py benchmarks/results/2026-11-30-h200-s2/layernorm-4096.sqlite \
        benchmarks/results/2026-11-30-h200-s2/rmsnorm-4096.sqlite benchmarks/results/2026-11-30-h200-s2/softmax-4096.sqlite \
        runs/gemm-4096 --out "$OUT/profile_classes.json"
    }
    lane_b() {
      step dogfood 420 env OUT="$OUT/dogfood" bash scripts/dogfood_agent.sh
    }
    ;;
  s4a)  # fourth session, call 1: issue 2 with the persistent templates (exhaustive over that template, confirmed
        # beside eager, torch.compile, Liger-Kernel and the copy); issue 7: attention, never timed before
    lane_a() {
      optimize rmsnorm-persistent 200 rmsnorm --strategy exhaustive --template persistent --budget 64,150s \
        --workloads benchmarks/workloads/rmsnorm-4096.toml
      optimize softmax-persistent 200 softmax --strategy exhaustive --template persistent --budget 64,150s \
        --workloads benchmarks/workloads/softmax-4096.toml
      optimize layernorm-persistent 150 layernorm --strategy exhaustive --template persistent --budget 64,100s \
        --workloads benchmarks/workloads/layernorm-4096.toml
    }
    lane_b() {
      optimize attention-seed 265 attention --budget 30,200s --workloads benchmarks/workloads/attention-seed.toml
      optimize attention_causal-seed 265 attention_causal --budget 30,200s \
        --workloads benchmarks/workloads/attention_causal-seed.toml
    }
    ;;
  s4b)  # fourth session, call 2: issue 2's LayerNorm and softmax one-row-per-program kernels re-searched where the
        # earlier winners were; issue 4's classes with each instrument against its own copy roof; issue 7: attention
        # re-searched around the first call's winners, confirmed beside the SDPA backends, profiled
    lane_a() {
      optimize softmax-rowwise 120 softmax --strategy exhaustive --template rowwise --fix BLOCK_N=4096,ROWS=1 \
        --budget 30,70s --workloads benchmarks/workloads/softmax-4096.toml
      optimize layernorm-rowwise 120 layernorm --strategy exhaustive --template rowwise --fix BLOCK_N=4096,ROWS=1 \
        --budget 30,70s --workloads benchmarks/workloads/layernorm-4096.toml
      step profile-classes 210 python3 benchmarks/profile_classes.py --clean-timing --baseline eager --baseline copy-kernel \
        benchmarks/results/2026-11-30-h200-s2/layernorm-4096.sqlite benchmarks/results/2026-11-30-h200-s2/softmax-4096.sqlite \
        benchmarks/results/2026-11-30-h200-s4/call1-rmsnorm-persistent.sqlite --out "$OUT/profile_classes.json"
    }
    lane_b() {
      optimize attention-seed 230 attention --strategy exhaustive --fix BLOCK_M=128,num_warps=8,num_stages=3 \
        --budget 18,160s --workloads benchmarks/workloads/attention-seed.toml
      optimize attention_causal-seed 215 attention_causal --strategy exhaustive \
        --fix BLOCK_N=64,CAUSAL_SKIP=1,KV_ORDER=2 --budget 20,150s --workloads benchmarks/workloads/attention_causal-seed.toml
      step profile-attention 90 $KL profile runs/attention-seed --op ops/attention --ncu --json
    }
    ;;
  s4c)  # fourth session, call 3: issue 4's planner beside the whole LayerNorm [4096, 4096] space (rowwise, chunked and
        # persistent templates, one shard per GPU); issue 2's six RMSNorm shapes with the persistent template; the GPU
        # tests of the evaluation path (the thread census changed)
    lane_a() {
      step record-layernorm-0 320 $KL record ops/layernorm --device cuda --workloads benchmarks/workloads/layernorm-4096.toml \
        --shard 0/2 --resume --out "$OUT/layernorm-4096.shard0.space.json.gz"
      optimize planner-layernorm 190 layernorm --strategy planner --start "BLOCK_N=1024,ROWS=1,num_warps=1,EVICT_FIRST=0" \
        --budget 15 --no-confirm --workloads benchmarks/workloads/layernorm-4096.toml
      wait_for "$OUT/layernorm-4096.shard1.done" 60
      step planner-vs-exhaustive 25 python3 benchmarks/planner_vs_exhaustive.py \
        --exhaustive "$OUT/layernorm-4096.shard0.space.json.gz" --exhaustive "$OUT/layernorm-4096.shard1.space.json.gz" \
        --planner runs/planner-layernorm --out "$OUT/planner_vs_exhaustive.json"
    }
    lane_b() {
      step record-layernorm-1 320 $KL record ops/layernorm --device cuda --workloads benchmarks/workloads/layernorm-4096.toml \
        --shard 1/2 --resume --out "$OUT/layernorm-4096.shard1.space.json.gz"
      touch "$OUT/layernorm-4096.shard1.done"
      step gpu-tests 80 python3 -m pytest -m gpu -v --tb=short -p no:cacheprovider --timeout 60 \
        tests/gpu/test_cuda_evaluation.py tests/bench/test_policy.py
      optimize rmsnorm-shapes 150 rmsnorm --budget 4,70s --workloads ops/rmsnorm/workloads.toml
    }
    ;;
  s4d)  # fourth session, call 4 (the last ~300 s): issue 2's softmax with the chunk-resident template, which won the
        # whole LayerNorm space in call 3; on the second GPU the 1024-lane chunks alone (a replicate)
    lane_a() {
      optimize softmax-chunked 170 softmax --strategy exhaustive --template chunked --budget 60,100s \
        --workloads benchmarks/workloads/softmax-4096.toml
    }
    lane_b() {
      optimize softmax-chunked-1024 170 softmax --strategy exhaustive --template chunked --fix CHUNK=1024 \
        --budget 20,60s --workloads benchmarks/workloads/softmax-4096.toml
    }
    ;;
  s5a)  # fifth session, call 1: issue 5's GEMM fp16 4096^3 space (persistent TMA grid, GROUP_M 8: 138 configurations,
        # one shard per GPU) and a real run of the default strategy over the same configurations (against its replay);
        # issue 7's attention suite with the seed shape's winner on every workload, beside every SDPA backend
    lane_a() {
      step record-gemm-0 300 $KL record ops/gemm --device cuda --workloads benchmarks/workloads/gemm-4096.toml \
        --fix TMA=1,GROUP_M=8,PERSISTENT=1 --shard 0/2 --resume --out "$OUT/gemm-4096.shard0.space.json.gz"
      optimize gemm-real 200 gemm --fix TMA=1,GROUP_M=8,PERSISTENT=1 --budget 30,130s \
        --workloads benchmarks/workloads/gemm-4096.toml
    }
    lane_b() {
      step record-gemm-1 300 $KL record ops/gemm --device cuda --workloads benchmarks/workloads/gemm-4096.toml \
        --fix TMA=1,GROUP_M=8,PERSISTENT=1 --shard 1/2 --resume --out "$OUT/gemm-4096.shard1.space.json.gz"
      optimize attention-suite 225 attention --budget 1,150s \
        --fix BLOCK_M=128,BLOCK_N=128,num_warps=8,num_stages=3,KV_ORDER=0,USE_TMA=0,WARP_SPEC=0
    }
    ;;
  s5b)  # fifth session, call 2: issue 4's planner (new rules, neighbour exploration) from the poor start on the recorded
        # LayerNorm [4096, 4096] space, and on softmax [4096, 4096] (no rule was written from a softmax measurement);
        # the whole GPU test tier on the other GPU
    lane_a() {
      optimize planner-layernorm 200 layernorm --strategy planner --start "BLOCK_N=1024,ROWS=1,num_warps=1,EVICT_FIRST=0" \
        --budget 15 --no-confirm --workloads benchmarks/workloads/layernorm-4096.toml
      step planner-vs-exhaustive 30 python3 benchmarks/planner_vs_exhaustive.py \
        --exhaustive benchmarks/results/2026-11-30-h200-s4/call3-layernorm-4096.shard0.space.json.gz \
        --exhaustive benchmarks/results/2026-11-30-h200-s4/call3-layernorm-4096.shard1.space.json.gz \
        --planner runs/planner-layernorm --out "$OUT/planner_vs_exhaustive.json"
      optimize planner-softmax 200 softmax --strategy planner --start "BLOCK_N=1024,ROWS=1,num_warps=1,EVICT_FIRST=0" \
        --budget 15 --no-confirm --workloads benchmarks/workloads/softmax-4096.toml
    }
    lane_b() {
      step gpu-tier 480 python3 -m pytest -m gpu -v --tb=short -p no:cacheprovider --timeout 200 tests
    }
    ;;
  s5c)  # fifth session, call 3: issue 7's attention after the fused scale (one multiply-subtract per score), with the
        # warp-specialized sm_90 variant (device descriptors, 4 warps, one KV loop) and the other loads around the
        # fourth session's winners, each search confirmed beside every SDPA backend
    lane_a() {
      optimize attention-ws 200 attention --strategy exhaustive --fix "USE_TMA=2,WARP_SPEC=1,num_warps=4,BLOCK_M=128,KV_ORDER=0" \
        --budget 12,120s --workloads benchmarks/workloads/attention-seed.toml
      optimize attention-nc 240 attention --strategy exhaustive --fix "BLOCK_M=128,BLOCK_N=128,KV_ORDER=0,WARP_SPEC=0" \
        --budget 18,160s --workloads benchmarks/workloads/attention-seed.toml
    }
    lane_b() {
      optimize attention_causal-s5 240 attention_causal --strategy exhaustive \
        --fix "BLOCK_M=128,BLOCK_N=64,CAUSAL_SKIP=1,KV_ORDER=2,WARP_SPEC=0" --budget 14,160s \
        --workloads benchmarks/workloads/attention_causal-seed.toml
      optimize attention-nc64 200 attention --strategy exhaustive --fix "BLOCK_M=128,BLOCK_N=64,KV_ORDER=0,WARP_SPEC=0" \
        --budget 14,130s --workloads benchmarks/workloads/attention-seed.toml
    }
    ;;
  s5d)  # fifth session, call 4: Nsight Compute on call 3's attention winners (the gap to cuDNN), and the GPU tests of
        # what changed since call 2 (attention template and worker allocator, the eager-LayerNorm strict xfail)
    lane_a() {
      optimize attention-win 90 attention --strategy exhaustive --budget 1 --no-confirm \
        --fix "BLOCK_M=128,BLOCK_N=64,num_warps=4,num_stages=2,USE_TMA=1,KV_ORDER=0,WARP_SPEC=0" \
        --workloads benchmarks/workloads/attention-seed.toml
      step profile-attention 120 $KL profile runs/attention-win --op ops/attention --ncu --json
      optimize attention_causal-win 90 attention_causal --strategy exhaustive --budget 1 --no-confirm \
        --fix "BLOCK_M=128,BLOCK_N=64,num_warps=4,num_stages=2,USE_TMA=1,KV_ORDER=2,CAUSAL_SKIP=1,WARP_SPEC=0" \
        --workloads benchmarks/workloads/attention_causal-seed.toml
      step profile-attention-causal 120 $KL profile runs/attention_causal-win --op ops/attention_causal --ncu --json
    }
    lane_b() {
      step gpu-tests 330 python3 -m pytest -m gpu -v --tb=short -p no:cacheprovider --timeout 250 \
        tests/ops/test_attention.py tests/gpu/test_cuda_evaluation.py \
        "tests/profile/test_profile_gpu.py::test_eager_layernorm_is_bandwidth_bound_and_its_profile_agrees_with_its_timing"
    }
    ;;
  s5e)  # fifth session, call 5 (the last ~300 s): issue 5's robustness across shapes on real data: RMSNorm's
        # persistent template with prefetch on the six GPU shapes, recorded in two shards (`replay --shapes`)
    lane_a() {
      step record-rmsnorm-shapes-0 185 $KL record ops/rmsnorm --device cuda --template persistent --fix PREFETCH=1 \
        --shard 0/2 --resume --out "$OUT/rmsnorm-shapes.shard0.space.json.gz"
    }
    lane_b() {
      step record-rmsnorm-shapes-1 185 $KL record ops/rmsnorm --device cuda --template persistent --fix PREFETCH=1 \
        --shard 1/2 --resume --out "$OUT/rmsnorm-shapes.shard1.space.json.gz"
    }
    ;;
  s6a)  # issue 5's pruning audit on the H200 (Triton 3.6): build the unpruned LayerNorm and GEMM spaces ahead of
        # time on this host's CPUs (ground truth for this Triton; it also warms Triton's cache), screen every pruned
        # configuration that runs beside the earlier recording's best kept ones (short unverified timings), then
        # time what the screen flags beside the best with full verification and policy, and check the top 1 %
    audit_and_screen() {  # audit_and_screen NAME OP WORKLOADS RECORDED JOBS AUDIT_S SCREEN_S RECORD_S
      local name=$1 op=$2 wl=$3 recorded=$4 jobs=$5
      step "audit-$name" "$6" $KL audit-pruning "$op" --workloads "$wl" --jobs "$jobs" --out "$OUT/audit-$name.json" \
        --configs-out "$OUT/audit-$name.runners.json"
      # an audit cut by its limit writes nothing: then screen from the CPU audit's builds (Triton 3.9) in the repo
      local audit="$OUT/audit-$name.json"
      [ -s "$audit" ] || audit="benchmarks/results/pruning-audit-2026-11-30/$name.json"
      screen_step "screen-$name" "$7" "$audit" --space "$recorded" \
        --top 10 --samples 10 --resume --out "$OUT/screen-$name.jsonl" --summary "$OUT/screen-$name.json" \
        --confirm-out "$OUT/confirm-$name.json"
      step "record-confirm-$name" "$8" $KL record "$op" --device cuda --workloads "$wl" \
        --configs "$OUT/confirm-$name.json" --resume --out "$OUT/confirm-$name.space.json.gz"
      step "top-share-$name" 40 $KL audit-pruning "$op" --workloads "$wl" --builds "$audit" \
        --timed "$OUT/confirm-$name.space.json.gz" --out "$OUT/audit-$name.timed.json"
    }
    lane_a() {
      # first: do the ahead-of-time builds report what a real launch compiles, with this Triton?
      step aot-vs-real 100 python3 -m pytest -q -p no:cacheprovider -m gpu tests/spec/test_aot.py
      audit_and_screen layernorm-4096 layernorm benchmarks/workloads/layernorm-4096.toml \
        benchmarks/results/2026-11-30-h200-s4/layernorm_fp16_4096_H200.space.json.gz 8 90 110 120
    }
    lane_b() {
      # the GEMM space is the big build (3072 configurations): most of the host's cores (32 on nvidia-h200-x2)
      audit_and_screen gemm-4096 gemm benchmarks/workloads/gemm-4096.toml \
        benchmarks/results/2026-11-30-h200-s5/gemm_fp16_4096_H200.space.json.gz 22 250 190 75
    }
    ;;
  s6b)  # issue 7: GEMM 4096^3 with the subtiled epilogue (TMA=2: 4 stages fit at 128x256x64) against cuBLAS, and
        # the Llama prefill / decode GEMM suites (never run yet)
    lane_a() {
      optimize gemm-4096-subtiled 280 gemm --budget 30,220s --fix TMA=2,PERSISTENT=1,GROUP_M=8 \
        --workloads benchmarks/workloads/gemm-4096.toml
      optimize gemm-decode 270 gemm --budget 3,220s --workloads ops/gemm/workloads-decode.toml
    }
    lane_b() {
      optimize gemm-prefill 550 gemm --budget 3,480s --workloads ops/gemm/workloads-prefill.toml
    }
    ;;
  s6c)  # issue 7: the attention suites (9 workloads each; never finished before): two evaluations per workload,
        # winners confirmed against the cuDNN and FlashAttention-2 SDPA backends only (no slow eager / compile)
    lane_a() {
      optimize attention-suite 560 attention --budget 2,420s --baseline sdpa-cudnn --baseline sdpa-flash
    }
    lane_b() {
      optimize attention_causal-suite 560 attention_causal --budget 2,420s --baseline sdpa-cudnn --baseline sdpa-flash
    }
    ;;
  s7a)  # seventh session, call 2: issue 5's GEMM top-1 % check with every configuration that runs screened (kept
        # ones too, one per distinct launch: an exact threshold), after the audit warms Triton's cache; issue 7's
        # GEMM 4096^3 with the subtiled epilogue and the Llama prefill suite, against cuBLAS only
    lane_a() {
      local wl=benchmarks/workloads/gemm-4096.toml
      step audit-gemm-4096 230 $KL audit-pruning gemm --workloads "$wl" --jobs 18 --out "$OUT/audit-gemm-4096.json"
      local audit="$OUT/audit-gemm-4096.json"
      [ -s "$audit" ] || audit="benchmarks/results/pruning-audit-2026-11-30/gemm-4096.json"
      screen_step screen-gemm-4096 215 "$audit" --kept all --samples 10 --resume \
        --out "$OUT/screen-gemm-4096.jsonl" --summary "$OUT/screen-gemm-4096.json" \
        --confirm-out "$OUT/confirm-gemm-4096.json"
      step record-confirm-gemm-4096 85 $KL record gemm --device cuda --workloads "$wl" \
        --configs "$OUT/confirm-gemm-4096.json" --resume --out "$OUT/confirm-gemm-4096.space.json.gz"
      step top-share-gemm-4096 25 $KL audit-pruning gemm --workloads "$wl" --builds "$audit" \
        --timed "$OUT/confirm-gemm-4096.space.json.gz" --screen "$OUT/screen-gemm-4096.json" \
        --out "$OUT/audit-gemm-4096.timed.json"
    }
    lane_b() {
      optimize gemm-4096-subtiled 250 gemm --budget 30,190s --fix TMA=2,PERSISTENT=1,GROUP_M=8 --baseline cublas \
        --workloads benchmarks/workloads/gemm-4096.toml
      optimize gemm-prefill 290 gemm --budget 3,230s --baseline cublas --workloads ops/gemm/workloads-prefill.toml
    }
    ;;
  s7b)  # seventh session, call 3 (the last ~600 s): issue 7's Llama prefill suite warm-started from the 4096^3
        # recording of call 2 (--prior), the decode suite; issue 5's LayerNorm top-1 % screen of every launch
    lane_a() {
      optimize gemm-prefill-prior 555 gemm --budget 3,360s --baseline cublas --workloads ops/gemm/workloads-prefill.toml \
        --prior benchmarks/results/2026-11-30-h200-s7/call2-confirm-gemm-4096.space.json.gz
    }
    lane_b() {
      local wl=benchmarks/workloads/layernorm-4096.toml
      # the build warms Triton's cache on the host's CPUs while the decode suite runs on this lane's GPU
      step audit-layernorm-4096 300 $KL audit-pruning layernorm --workloads "$wl" --jobs 20 --timeout 120 \
        --out "$OUT/audit-layernorm-4096.json" &
      optimize gemm-decode 320 gemm --budget 2,220s --baseline cublas --workloads ops/gemm/workloads-decode.toml
      wait
      local audit="$OUT/audit-layernorm-4096.json"
      [ -s "$audit" ] || audit="benchmarks/results/pruning-audit-2026-11-30/layernorm-4096.json"
      screen_step screen-layernorm-4096 215 "$audit" --kept all --samples 10 --resume \
        --out "$OUT/screen-layernorm-4096.jsonl" --summary "$OUT/screen-layernorm-4096.json"
    }
    ;;
  s8a)  # written in the seventh session for the next: issue 7's six few-tile prefill GEMMs with more evaluations
        # (0.30-0.62x cuBLAS after three), the attention seed shapes beside all four SDPA backends; issue 5's LayerNorm
        # configuration flagged after the rule fix, re-timed with verification beside the 19 best kept ones
    lane_a() {
      optimize gemm-prefill-few-tiles 560 gemm --budget 16,430s --baseline cublas \
        --workloads benchmarks/workloads/gemm-prefill-few-tiles.toml
    }
    lane_b() {
      local r=benchmarks/results/2026-11-30-h200-s7 wl=benchmarks/workloads/layernorm-4096.toml
      step record-confirm-layernorm-4096 90 $KL record layernorm --device cuda --workloads "$wl" \
        --configs "$r/call4-confirm-layernorm-4096.after-rule-fix.json" --out "$OUT/confirm-layernorm-4096.space.json.gz"
      gunzip -c "$r/call4-audit-layernorm-4096.json.gz" > "$OUT/audit-layernorm-4096.json"
      step top-share-layernorm-4096 40 $KL audit-pruning layernorm --workloads "$wl" --builds "$OUT/audit-layernorm-4096.json" \
        --timed "$OUT/confirm-layernorm-4096.space.json.gz" --screen "$r/call4-screen-layernorm-4096.after-rule-fix.json" \
        --out "$OUT/audit-layernorm-4096.timed.json"
      # warm-started from the fifth session's tuned runs of the same shapes (their archives)
      optimize attention-seed-backends 200 attention --budget 8,120s --workloads benchmarks/workloads/attention-seed.toml \
        --prior benchmarks/results/2026-11-30-h200-s5/call3-attention-nc64.sqlite.gz \
        --baseline sdpa-cudnn --baseline sdpa-flash --baseline sdpa-efficient --baseline sdpa-math
      optimize attention_causal-seed-backends 200 attention_causal --budget 8,120s \
        --workloads benchmarks/workloads/attention_causal-seed.toml \
        --prior benchmarks/results/2026-11-30-h200-s5/call3-attention_causal-s5.sqlite.gz \
        --baseline sdpa-cudnn --baseline sdpa-flash --baseline sdpa-efficient --baseline sdpa-math
    }
    ;;
  s9a)  # eighth session, call 1 (issue 7): both attention suites (9 workloads each, the seed shape first) beside all
        # four SDPA backends, four evaluations a workload, warm-started from the fifth session's tuned seed-shape runs
    lane_a() {
      optimize attention-suite-backends 560 attention --budget 4,300s \
        --prior benchmarks/results/2026-11-30-h200-s5/call3-attention-nc64.sqlite.gz \
        --baseline sdpa-cudnn --baseline sdpa-flash --baseline sdpa-efficient --baseline sdpa-math
    }
    lane_b() {
      optimize attention_causal-suite-backends 560 attention_causal --budget 4,300s \
        --prior benchmarks/results/2026-11-30-h200-s5/call3-attention_causal-s5.sqlite.gz \
        --baseline sdpa-cudnn --baseline sdpa-flash --baseline sdpa-efficient --baseline sdpa-math
    }
    ;;
  s9b)  # eighth session, call 2 (issue 7; one GPU): the six few-tile prefill GEMMs with the new split-K template for
        # 16-bit outputs (workspace from the harness), 12 evaluations each, beside cuBLAS, then the gemm GPU sweep
        # (split-K through the workspace on the device)
    lane_a() {
      optimize gemm-prefill-few-tiles 360 gemm --budget 12,280s --baseline cublas \
        --workloads benchmarks/workloads/gemm-prefill-few-tiles.toml
      step gpu-sweep-gemm 150 env KERNELLOOP_GPU_TIER=1 python3 -m pytest -q -m gpu -p no:cacheprovider \
        tests/ops/test_gemm.py -k gpu_sweep
    }
    lane_b() { :; }
    ;;
  s9c)  # eighth session, call 3 (issue 7; one GPU): the causal attention suite beside all four SDPA backends, two
        # evaluations a workload, warm-started from the fifth session's tuned archive (whose measured best the warm
        # start now tries first)
    lane_a() {
      optimize attention_causal-suite-backends 520 attention_causal --budget 2,240s \
        --prior benchmarks/results/2026-11-30-h200-s5/call3-attention_causal-s5.sqlite.gz \
        --baseline sdpa-cudnn --baseline sdpa-flash --baseline sdpa-efficient --baseline sdpa-math
    }
    lane_b() { :; }
    ;;
  s9d)  # eighth session, call 4 (issue 7; one GPU, ~450 s of budget left): the non-causal attention suite again beside all
        # four SDPA backends, one evaluation a workload: the fifth session's tuned configuration, which the s9a run's
        # warm start (before the fix) never tried
    lane_a() {
      optimize attention-suite-backends 395 attention --budget 1,120s \
        --prior benchmarks/results/2026-11-30-h200-s5/call3-attention-nc64.sqlite.gz \
        --baseline sdpa-cudnn --baseline sdpa-flash --baseline sdpa-efficient --baseline sdpa-math
    }
    lane_b() { :; }
    ;;
  s10a)  # written in the eighth session for the next (issue 7; one GPU is enough): GEMM fp16 4096^3 with the
         # warp-specialized persistent template (never run on a GPU: Triton 3.6 may refuse to specialize it, which
         # the trials record), beside cuBLAS; then the decode suite with the split-K template in its space,
         # warm-started from the eighth session's few-tile archive (its measured best include split-K configurations)
    lane_a() {
      optimize gemm-4096-ws 230 gemm --template persistent_ws --budget 20,170s --baseline cublas \
        --workloads benchmarks/workloads/gemm-4096.toml
      optimize gemm-decode-splitk 320 gemm --budget 2,200s --baseline cublas --workloads ops/gemm/workloads-decode.toml \
        --prior benchmarks/results/2026-12-01-h200-s8/call2-gemm-prefill-few-tiles.sqlite.gz
    }
    lane_b() { :; }
    ;;
  s10b)  # (issue 7) the whole Llama-3 prefill suite in one run, split-K in the space, warm-started from the seventh
         # session's prefill archive (the measured best of every shape), beside cuBLAS. The persistent_ws template
         # is left out: at 8 warps it is the tiled template's persistent TMA kernel, and its warp-specialized
         # builds gave no gain at 4096^3 in s10a (one of them wrote NaN)
    lane_a() {
      optimize gemm-prefill-splitk 560 gemm --template tiled --template splitk --budget 3,330s --baseline cublas \
        --workloads ops/gemm/workloads-prefill.toml \
        --prior benchmarks/results/2026-11-30-h200-s7/call4-gemm-prefill-prior.sqlite.gz
    }
    lane_b() { :; }
    ;;
  s11a)  # ninth session (issue 7; one GPU): the whole Llama-3 prefill suite again, each workload warm-started from
         # its own measured best in three earlier runs (the seventh session's suite, the eighth's few-tile run with
         # split-K, the ninth's s10b run): --prior repeated, the warm start per workload
    lane_a() {
      optimize gemm-prefill-own-best 540 gemm --template tiled --template splitk --budget 3,330s --baseline cublas \
        --workloads ops/gemm/workloads-prefill.toml \
        --prior benchmarks/results/2026-11-30-h200-s7/call4-gemm-prefill-prior.sqlite.gz \
        --prior benchmarks/results/2026-12-01-h200-s8/call2-gemm-prefill-few-tiles.sqlite.gz \
        --prior benchmarks/results/2026-12-01-h200-s9/call2-gemm-prefill-splitk.sqlite.gz
    }
    lane_b() { :; }
    ;;
  s12a)  # written in the ninth session for the next (issue 7; one GPU): the non-causal attention suite, three
         # evaluations a workload, each warm-started from its own measured best in the eighth session's two suite
         # runs and the fifth session's tuned seed-shape run; confirmed beside cuDNN and FA2 (the efficient and
         # math backends were reported in the eighth session and cost ~150 s of confirmation)
    lane_a() {
      optimize attention-suite-own-best 560 attention --budget 3,330s \
        --prior benchmarks/results/2026-12-01-h200-s8/call4-attention-suite-backends.sqlite.gz \
        --prior benchmarks/results/2026-12-01-h200-s8/call1-attention-suite-backends.sqlite.gz \
        --prior benchmarks/results/2026-11-30-h200-s5/call3-attention-nc64.sqlite.gz \
        --baseline sdpa-cudnn --baseline sdpa-flash
    }
    lane_b() { :; }
    ;;
  s12b)  # (issue 7; one GPU) the causal attention suite likewise
    lane_a() {
      optimize attention_causal-suite-own-best 560 attention_causal --budget 3,330s \
        --prior benchmarks/results/2026-12-01-h200-s8/call3-attention_causal-suite-backends.sqlite.gz \
        --prior benchmarks/results/2026-12-01-h200-s8/call1-attention_causal-suite-backends.cut.sqlite.gz \
        --prior benchmarks/results/2026-11-30-h200-s5/call3-attention_causal-s5.sqlite.gz \
        --baseline sdpa-cudnn --baseline sdpa-flash
    }
    lane_b() { :; }
    ;;
  s12c)  # (issue 7; one GPU) the six few-tile prefill shapes with split-K of the 128x256 tile only (the tile the
         # large shapes run best with: 64 or 16 tiles split 2 or 8 ways fill one wave of 132 SMs; no earlier run
         # tried it there), 12 evaluations each; the GEMM GPU sweep (split-K 8 has never run on a GPU); GEMM fp16
         # 4096^3, 30 evaluations of the tiled template warm-started from the recorded space and the seventh
         # session's subtiled run; and the installed Triton's Gluon sources (its Hopper API changes between
         # releases), for writing a warp-specialized ping-pong GEMM offline
    lane_a() {
      step gluon-sources 20 sh -c 'd=$(python3 -c "import triton, os; print(os.path.dirname(triton.__file__))") &&
        tar czf "$1/triton-gluon-sources.tgz" -C "$d" experimental/gluon' _ "$OUT"
      optimize gemm-few-tiles-wave 200 gemm --template splitk --fix 'BLOCK_M=128,BLOCK_N=256' --budget 12,150s \
        --baseline cublas --workloads benchmarks/workloads/gemm-prefill-few-tiles.toml \
        --prior benchmarks/results/2026-12-01-h200-s8/call2-gemm-prefill-few-tiles.sqlite.gz
      step gpu-sweep-gemm 150 env KERNELLOOP_GPU_TIER=1 python3 -m pytest -q -m gpu -p no:cacheprovider \
        tests/ops/test_gemm.py -k gpu_sweep
      optimize gemm-4096-tiled 150 gemm --template tiled --budget 30,110s --baseline cublas \
        --workloads benchmarks/workloads/gemm-4096.toml \
        --prior benchmarks/results/2026-11-30-h200-s5/gemm_fp16_4096_H200.space.json.gz \
        --prior benchmarks/results/2026-11-30-h200-s7/call3-gemm-4096-subtiled.sqlite.gz
    }
    lane_b() { :; }
    ;;
  s12d)  # (issue 7; one GPU) the whole prefill suite, three evaluations a workload, each warm-started from its own
         # best of every earlier prefill run; EXTRA_PRIOR names one more (the s12c few-tile archive, once copied
         # into this session's results folder): EXTRA_PRIOR=<that archive> bash scripts/gpu_session.sh s12d
    lane_a() {
      optimize gemm-prefill-all-best 545 gemm --template tiled --template splitk --budget 3,330s --baseline cublas \
        --workloads ops/gemm/workloads-prefill.toml \
        --prior benchmarks/results/2026-11-30-h200-s7/call4-gemm-prefill-prior.sqlite.gz \
        --prior benchmarks/results/2026-12-01-h200-s8/call2-gemm-prefill-few-tiles.sqlite.gz \
        --prior benchmarks/results/2026-12-01-h200-s9/call4-gemm-prefill-own-best.sqlite.gz \
        ${EXTRA_PRIOR:+--prior "$EXTRA_PRIOR"}
    }
    lane_b() { :; }
    ;;
  s13a)  # (issue 7; one GPU; tenth session) the six few-tile prefill shapes, exhaustively over one-tile-per-program
         # 128- and 64-row tiles of one warpgroup with pipelines up to 8 stages deep: the kernel records of
         # benchmarks/gemm_kernels.py showed cuBLAS running 128x128 (6 stages) and 64x64 (13 stages) tiles there, one
         # wave of 128 CTAs and no split, and our 128x128 tile at 5 stages and 4 warps within 4 % of it
    lane_a() {
      optimize gemm-few-tiles-bm128 270 gemm --template tiled --strategy exhaustive --budget 24,225s \
        --fix 'BLOCK_M=128,BLOCK_K=64,GROUP_M=8,num_warps=4,PERSISTENT=0,TMA=1' --baseline cublas \
        --workloads benchmarks/workloads/gemm-prefill-few-tiles.toml
      optimize gemm-few-tiles-bm64 270 gemm --template tiled --strategy exhaustive --budget 24,225s \
        --fix 'BLOCK_M=64,BLOCK_K=64,GROUP_M=8,num_warps=4,PERSISTENT=0,TMA=1' --baseline cublas \
        --workloads benchmarks/workloads/gemm-prefill-few-tiles.toml
    }
    lane_b() { :; }
    ;;
  s14a)  # (issue 7; one GPU; eleventh session) the two 512x1024 prefill shapes: 64x64 tiles of one warpgroup over
         # both k-step lengths and every pipeline depth, and split-K of the 128x64 tile over every split and depth
         # (the kernel records put 64x64x128 6 deep and split-K 128x64 8 deep within 3 % of cuBLAS there; no
         # earlier search tried them); then the GPU test tier
    lane_a() {
      optimize gemm-narrow-64x64 150 gemm --template tiled --strategy exhaustive --budget 12,120s \
        --fix 'BLOCK_M=64,BLOCK_N=64,GROUP_M=8,num_warps=4,PERSISTENT=0,TMA=1' --baseline cublas \
        --workloads benchmarks/workloads/gemm-prefill-narrow.toml
      optimize gemm-narrow-splitk 150 gemm --template splitk --strategy exhaustive --budget 24,120s \
        --fix 'BLOCK_M=128,BLOCK_N=64,BLOCK_K=64,num_warps=4,TMA=1' --baseline cublas \
        --workloads benchmarks/workloads/gemm-prefill-narrow.toml
      gpu_tests 270
    }
    lane_b() { :; }
    ;;
  s14b)  # (issue 7; one GPU) the whole prefill suite, three evaluations a workload, each warm-started from its own
         # best of every earlier prefill run, the tenth session's exhaustive few-tile runs and s14a's narrow runs
    lane_a() {
      optimize gemm-prefill-s14 545 gemm --template tiled --template splitk --budget 3,330s --baseline cublas \
        --workloads ops/gemm/workloads-prefill.toml "${PREFILL_PRIORS[@]}"
    }
    lane_b() { :; }
    ;;
  s14c)  # (issue 7; one GPU) the four prefill workloads whose confirmations s14b's time limit cut, same priors,
         # three evaluations a workload; then the GPU tests s14a's time limit cut (the planner's ncu test, the CUDA
         # cheat gallery)
    lane_a() {
      optimize gemm-prefill-s14-tail 330 gemm --template tiled --template splitk --budget 3,200s --baseline cublas \
        --workloads benchmarks/workloads/gemm-prefill-tail.toml "${PREFILL_PRIORS[@]}"
      step gpu-tests-rest 200 python3 -m pytest -m gpu tests/test_loop_planner.py tests/verify/test_cheat_gallery.py \
        -v --tb=short -p no:cacheprovider --timeout 150
    }
    lane_b() { :; }
    ;;
  s15a)  # (issue 7; one GPU) the Gluon template (ops/gemm/gluon_kernel.py): its GPU test; GEMM fp16 4096^3 over its
         # 128-row tiles (exhaustive) beside cuBLAS; the prefill suite with the Gluon template alone, its 256-wide tiles
         # (3 configurations a workload, exhaustive, no confirmation): recordings that s15b's warm start ranks
    lane_a() {
      step gpu-tests-gluon 130 python3 -m pytest -m gpu tests/ops/test_gemm_gluon.py -v --tb=short -p no:cacheprovider \
        --timeout 125
      optimize gemm-4096-gluon 90 gemm --template gluon_ws --strategy exhaustive --fix BLOCK_M=128 --budget 12,50s \
        --baseline cublas --workloads benchmarks/workloads/gemm-4096.toml
      optimize gemm-prefill-gluon 300 gemm --template gluon_ws --strategy exhaustive --fix BLOCK_N=256 \
        --budget 3,270s --no-confirm --workloads ops/gemm/workloads-prefill.toml
    }
    lane_b() { :; }
    ;;
  s15b)  # (issue 7; one GPU) the whole prefill suite over the tiled, split-K and Gluon templates, three evaluations a
         # workload: each workload's three best recorded configurations (every earlier prefill archive and s15a's
         # Gluon recordings, ranked by their mean measured times), then its winner confirmed beside cuBLAS (531 s in
         # the twelfth session; should a slower host cut the last confirmations, s15c runs those workloads)
    lane_a() {
      optimize gemm-prefill-s15 545 gemm --template tiled --template splitk --template gluon_ws --budget 3,330s \
        --baseline cublas --workloads ops/gemm/workloads-prefill.toml "${PREFILL_PRIORS[@]}" "${GLUON_PRIORS[@]}"
    }
    lane_b() { :; }
    ;;
  s15c)  # (issue 7; one GPU) s15b's workloads that its time limit cut (benchmarks/workloads/gemm-prefill-tail.toml), the
         # same templates and priors
    lane_a() {
      optimize gemm-prefill-s15-tail 330 gemm --template tiled --template splitk --template gluon_ws --budget 3,200s \
        --baseline cublas --workloads benchmarks/workloads/gemm-prefill-tail.toml \
        "${PREFILL_PRIORS[@]}" "${GLUON_PRIORS[@]}"
    }
    lane_b() { :; }
    ;;
  s15d)  # the GPU test tier (twelfth session: what the remaining device time allows; the step limit may cut it)
    lane_a() {
      gpu_tests "${GPU_TIER_SECONDS:-380}"
    }
    lane_b() { :; }
    ;;
  s16a)  # (issue 7; one GPU; thirteenth session) the stream-K template: its GPU test (programs spinning on each
         # other's flags for real), then kernel records of stream-K tiles beside the persistent tiled and Gluon
         # kernels and cuBLAS on the prefill shapes with ragged last waves (benchmarks/gemm_kernels.py)
    lane_a() {
      step gpu-tests-streamk 200 python3 -m pytest -m gpu tests/ops/test_gemm_streamk.py -v --tb=short \
        -p no:cacheprovider --timeout 195
      step kernels-streamk 300 python3 benchmarks/gemm_kernels.py --shapes streamk --out "$OUT/streamk.json"
    }
    lane_b() { :; }
    ;;
  s16b)  # (issue 7; one GPU) the Gluon template's 128x128 tile on one warpgroup, 6 stages, over the whole prefill
         # suite (one configuration a workload, no confirmation): recordings for s16c's warm start. In the thirteenth
         # session's kernel records it ran 512x28672x8192 in 310.4 us beside cuBLAS's 324.5 (896 tiles fill the
         # waves that 448 of 128x256 leave ragged)
    lane_a() {
      optimize gemm-prefill-gluon128 300 gemm --template gluon_ws --strategy exhaustive \
        --fix BLOCK_M=128,BLOCK_N=128,num_warps=4,num_stages=6 --budget 1,270s --no-confirm \
        --workloads ops/gemm/workloads-prefill.toml
    }
    lane_b() { :; }
    ;;
  s16c)  # (issue 7; one GPU) s15b again with s16b's recordings among the priors: the whole prefill suite over the
         # tiled, split-K and Gluon templates, each workload's three best recorded configurations, then its winner
         # confirmed beside cuBLAS
    lane_a() {
      optimize gemm-prefill-s16 545 gemm --template tiled --template splitk --template gluon_ws --budget 3,330s \
        --baseline cublas --workloads ops/gemm/workloads-prefill.toml "${PREFILL_PRIORS[@]}" "${GLUON_PRIORS[@]}"
    }
    lane_b() { :; }
    ;;
  s16d)  # (issue 7; one GPU) the two 512x1024 prefill shapes with the Gluon template's 64x128 tile on one warpgroup,
         # every pipeline depth, beside cuBLAS (kernel records, thirteenth session: 15.2 us at K = 4096 with 6 stages,
         # where the tiled 128x128 took 21.8)
    lane_a() {
      optimize gemm-narrow-gluon 200 gemm --template gluon_ws --strategy exhaustive --budget 4,150s \
        --fix 'BLOCK_M=64,BLOCK_N=128,num_warps=4' --baseline cublas \
        --workloads benchmarks/workloads/gemm-prefill-narrow.toml
    }
    lane_b() { :; }
    ;;
  s16e)  # (issue 7; one GPU) the Gluon kernel with its tile as two half-width accumulators (template gluon_subtiled:
         # a half-size c staging buffer, so 128x256 fits 4 stages): recordings over the 16 large prefill workloads
         # (one configuration each, no confirmation), then the whole suite as s16c with those among the priors
    lane_a() {
      optimize gemm-prefill-subtiled 120 gemm --template gluon_subtiled --strategy exhaustive \
        --fix BLOCK_M=128,num_warps=8,num_stages=4 --budget 1,100s --no-confirm \
        --workloads benchmarks/workloads/gemm-prefill-large.toml
      optimize gemm-prefill-s16e 500 gemm --template tiled --template splitk --template gluon_ws \
        --template gluon_subtiled --budget 3,300s --baseline cublas --workloads ops/gemm/workloads-prefill.toml \
        "${PREFILL_PRIORS[@]}" "${GLUON_PRIORS[@]}" --prior runs/gemm-prefill-subtiled/archive.sqlite \
        --prior benchmarks/results/2026-12-01-h200-s13/call5/gemm-prefill-s16.sqlite.gz
    }
    lane_b() { :; }
    ;;
  s16f)  # (issue 7; one GPU; written in the thirteenth session for the next) s16e's second step alone, as a call of
         # its own (in s16e a cold start plus the recordings left it too little time): the whole prefill suite over
         # the tiled, split-K, Gluon and subtiled-Gluon templates, warm-started from every prefill archive, the
         # thirteenth session's suite run and its subtiled recordings (call 8), winners confirmed beside cuBLAS
    lane_a() {
      optimize gemm-prefill-s16f 545 gemm --template tiled --template splitk --template gluon_ws \
        --template gluon_subtiled --budget 3,330s --baseline cublas --workloads ops/gemm/workloads-prefill.toml \
        "${PREFILL_PRIORS[@]}" "${GLUON_PRIORS[@]}" \
        --prior benchmarks/results/2026-12-01-h200-s13/call8/gemm-prefill-subtiled.sqlite.gz \
        --prior benchmarks/results/2026-12-01-h200-s13/call5/gemm-prefill-s16.sqlite.gz
    }
    lane_b() { :; }
    ;;
  s16g)  # (issue 7; one GPU) the subtiled Gluon kernel's GPU test, then GEMM fp16 4096^3 over both Gluon templates'
         # 128-row tiles (exhaustive) beside cuBLAS
    lane_a() {
      step gpu-tests-subtiled 130 python3 -m pytest -m gpu tests/ops/test_gemm_gluon.py -v --tb=short \
        -p no:cacheprovider --timeout 125 -k subtiled
      optimize gemm-4096-subtiled 150 gemm --template gluon_ws --template gluon_subtiled --strategy exhaustive \
        --fix BLOCK_M=128 --budget 14,110s --baseline cublas --workloads benchmarks/workloads/gemm-4096.toml
    }
    lane_b() { :; }
    ;;
  s17a)  # (issue 7; one GPU; fourteenth session) the GPU verifier tests of the subtiled and ping-pong Gluon kernels,
         # then kernel records of the ping-pong kernel's tiles beside the Gluon kernel's best and cuBLAS (4096^3 and
         # the prefill shapes still behind)
    lane_a() {
      step gpu-tests-gluon-new 250 python3 -m pytest -m gpu tests/ops/test_gemm_gluon.py -v --tb=short \
        -p no:cacheprovider --timeout 240 -k "subtiled or pingpong"
      step kernels-pingpong 280 python3 benchmarks/gemm_kernels.py --shapes pingpong --out "$OUT/pingpong.json"
    }
    lane_b() { :; }
    ;;
  s17b)  # (issue 7; one GPU) GEMM fp16 4096^3 through the loop: every 128-row tile of the three Gluon templates
         # (gluon_ws, gluon_subtiled, gluon_pingpong), exhaustive, winners confirmed beside cuBLAS
    lane_a() {
      optimize gemm-4096-gluon3 240 gemm --template gluon_ws --template gluon_subtiled --template gluon_pingpong \
        --strategy exhaustive --fix BLOCK_M=128 --budget 20,200s --baseline cublas \
        --workloads benchmarks/workloads/gemm-4096.toml
    }
    lane_b() { :; }
    ;;
  s18a)  # (issue 7; one GPU; fifteenth session) the Gluon GPU tests again (helpers refactored after the fourteenth
         # session's runs), then the tiled kernel's new launch options (TMA=3: pointer store; PREFETCH=1: each program
         # asks the L2 for its share of its panels first) under the three L2 states of benchmarks/gemm_timing_gap.py,
         # on the suite's slowest shape and on two larger ones. Both options lost (results s15/call1) and were
         # removed again; the gap steps need the kernel of commit 06c4fbf: git checkout 06c4fbf -- ops/gemm/kernel.py
    lane_a() {
      step gpu-tests-gluon 250 python3 -m pytest -m gpu tests/ops/test_gemm_gluon.py -v --tb=short \
        -p no:cacheprovider --timeout 240
      local s='"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 8, "num_stages": 6, "num_warps": 4, "PERSISTENT": 0'
      step gap-small 120 python3 benchmarks/gemm_timing_gap.py --out "$OUT/gap-small.json" --configs \
        "{\"tma1\": {$s, \"TMA\": 1}, \"tma3\": {$s, \"TMA\": 3}, \"tma1-pf\": {$s, \"TMA\": 1, \"PREFETCH\": 1},
          \"tma3-pf\": {$s, \"TMA\": 3, \"PREFETCH\": 1}, \"ptr-pf\": {$s, \"TMA\": 0, \"PREFETCH\": 1}}"
      local l='"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 4, "num_warps": 8, "PERSISTENT": 1, "TMA": 2'
      step gap-8192x1024 100 python3 benchmarks/gemm_timing_gap.py --out "$OUT/gap-8192x1024.json" \
        --shape 8192,1024,4096 --samples 100 --configs \
        "{\"tma2\": {$l, \"GROUP_M\": 1}, \"tma2-pf\": {$l, \"GROUP_M\": 1, \"PREFETCH\": 1}}"
      step gap-2048x4096 100 python3 benchmarks/gemm_timing_gap.py --out "$OUT/gap-2048x4096.json" \
        --shape 2048,4096,4096 --samples 100 --configs \
        "{\"tma2\": {$l, \"GROUP_M\": 8}, \"tma2-pf\": {$l, \"GROUP_M\": 8, \"PREFETCH\": 1}}"
    }
    lane_b() { :; }
    ;;
  s18b)  # (issue 7; one GPU; fifteenth session) the attention seed shape again, today, beside all four SDPA backends:
         # the eighth session's winners (non-causal and causal), one configuration each, confirmed in the same run
    lane_a() {
      optimize attention-seed-today 200 attention --strategy exhaustive \
        --fix BLOCK_M=128,BLOCK_N=64,KV_ORDER=0,USE_TMA=1,WARP_SPEC=0,num_stages=2,num_warps=4 --budget 1,120s \
        --workloads benchmarks/workloads/attention-seed.toml \
        --baseline sdpa-cudnn --baseline sdpa-flash --baseline sdpa-efficient --baseline sdpa-math
      optimize attention_causal-seed-today 200 attention_causal --strategy exhaustive \
        --fix BLOCK_M=128,BLOCK_N=64,CAUSAL_SKIP=1,KV_ORDER=2,USE_TMA=1,WARP_SPEC=0,num_stages=2,num_warps=4 \
        --budget 1,120s --workloads benchmarks/workloads/attention_causal-seed.toml \
        --baseline sdpa-cudnn --baseline sdpa-flash --baseline sdpa-efficient --baseline sdpa-math
    }
    lane_b() { :; }
    ;;
  matmul)  # issue 7: GEMM fp16 4096^3 against cuBLAS, attention (seed shape) against the SDPA backends
    lane_a() {
      optimize gemm-4096 280 gemm --budget 40,220s --workloads benchmarks/workloads/gemm-4096.toml
      optimize attention-seed 280 attention --budget 30,220s --workloads benchmarks/workloads/attention-seed.toml
    }
    lane_b() {
      optimize attention_causal-seed 280 attention_causal --budget 30,220s \
        --workloads benchmarks/workloads/attention_causal-seed.toml
      optimize gemm-prefill 290 gemm --budget 3,230s --workloads ops/gemm/workloads-prefill.toml
    }
    ;;
  selftest)  # no GPU needed: two steps, the second outlives the call's timeout (tests the packing on SIGTERM)
    lane_a() {
      step quick 5 sh -c 'echo done'
      step slow 60 sleep "${SELFTEST_SLEEP:-30}"
    }
    ;;
  *) echo "unknown phase $phase"; exit 2 ;;
esac


# The lanes always run in the background and this shell waits: bash handles a signal during `wait` at once,
# but only after a foreground command has finished.
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$ngpu" -ge 2 ]; then
  ( trap - TERM INT; export CUDA_VISIBLE_DEVICES=0; lane_a ) &   # only this shell packs: lanes just stop
  ( trap - TERM INT; export CUDA_VISIBLE_DEVICES=1; lane_b ) &
else
  ( trap - TERM INT; lane_a; lane_b ) &
fi
wait
pack
rm -rf "$STEP_PIDS"
