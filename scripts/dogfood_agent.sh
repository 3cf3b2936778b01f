#!/usr/bin/env bash
# Agent-mode dogfood on the GPU host, one line from the repo root:
#   bash scripts/dogfood_agent.sh
# What an outside agent does, through the CLI only: `agent init` a fresh workspace on
# benchmarks/workloads/layernorm-dogfood.toml (fp16 [4096,5000], [3001,12288], [4096,4096]), `submit`
# ops/layernorm/chunked.py (a best-guess config, profiled when ncu is there; then a config
# space), the op's own row template as the reference point, and a last submit with --confirm that re-measures each
# workload's best beside eager, torch.compile, Liger-Kernel and a device copy; then `agent status` (JSON).
# Writes at most 8 files to $OUT (default ./gpu-out): dogfood.log, submit-{guess,space,template,confirm}.json,
# status.json, dogfood.sqlite (the run archive; `xz -9e` it to keep it in the repository). Needs no network: pydantic and Liger-Kernel come from ./.whl when
# the host lacks them (as in scripts/gpu_tier.sh). Every step runs under `timeout`; a failed step is logged and the
# script goes on. Env: DEVICE (cuda), WS (workspace folder, default runs/dogfood-agent-<time>), WL (workload file),
# GUESS / SPACE / TEMPLATE_FIXED / TEMPLATE_SPACE (JSON), PROFILE (1: profile the best-guess submission).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
LOG="$OUT/dogfood.log"
: > "$LOG"
if ls .whl/*.whl >/dev/null 2>&1; then
  timeout 300 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl >> "$LOG" 2>&1 || echo "wheel install failed (exit $?)" | tee -a "$LOG"
fi
export PYTHONPATH="$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
KL=(python3 -m kernelloop.cli.app)
DEVICE=${DEVICE:-cuda}
WS=${WS:-runs/dogfood-agent-$(date -u +%Y%m%d-%H%M%S)}
WL=${WL:-benchmarks/workloads/layernorm-dogfood.toml}
KERNEL=src/kernelloop/base/builtin/ops/layernorm/chunked.py
TEMPLATE=src/kernelloop/base/builtin/ops/layernorm/kernel.py
GUESS=${GUESS:-'{"CHUNK": 1024, "ROWS": 1, "num_warps": 8, "WB_FIRST": 0}'}
SPACE=${SPACE:-'{"CHUNK": [512, 1024, 2048, 4096], "num_warps": [4, 8, 16]}'}
# The template's space holds its recorded H200 winners on these shapes (benchmarks/results/2026-11-30-h200).
TEMPLATE_FIXED=${TEMPLATE_FIXED:-'{"STREAM_STORE": 0}'}
TEMPLATE_SPACE=${TEMPLATE_SPACE:-'{"BLOCK_N": [4096, 8192], "ROWS": [1, 2], "EVICT_FIRST": [0, 1], "num_warps": [4, 16]}'}
PROFILE=${PROFILE:-1}
say() { echo "== $*" | tee -a "$LOG"; }
step() {  # step NAME SECONDS OUTFILE CMD...: run under timeout, stdout to OUTFILE, stderr to the log
  local name=$1 secs=$2 out=$3; shift 3
  local t0=$SECONDS
  timeout "$secs" "$@" > "$out" 2>> "$LOG"
  local rc=$?
  say "$name: exit $rc in $((SECONDS - t0)) s$([ "$rc" -eq 124 ] && echo " (timed out after $secs s)")"
  return $rc
}
verdicts() {  # one line per result of a submit answer
  timeout 60 python3 - "$1" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
try:
    a = json.load(open(sys.argv[1]))
except Exception as e:  # an empty or partial answer after a failed step
    sys.exit(f"   no JSON answer in {sys.argv[1]}: {e}")
print(f"   verdict {a.get('verdict')}" + (f": {a['error']}" if a.get("error") else ""))
for r in a.get("results", []):
    m = r.get("measurement") or {}
    print(f"   {r['workload']:28s} {r.get('label', ''):52s} {r['status']:14s} "
          f"kernel_us={m.get('kernel_us') or float('nan'):9.2f} roofline_fraction={m.get('roofline_fraction', m.get('copy_fraction')) or float('nan'):.3f} "
          f"{r.get('message', '')[:100]}")
EOF
}

{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
  timeout 120 python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  echo "workspace: $WS  workloads: $WL  device: $DEVICE"
} 2>&1 | tee -a "$LOG"

step "agent init" 180 "$OUT/init.json" "${KL[@]}" agent init layernorm --out "$WS" --workloads "$WL" \
  --device "$DEVICE" --json || { say "no workspace; stopping"; exit 3; }
rm -f "$OUT/init.json"   # the workspace's own files say the same; keep $OUT within 8 files

prof=(); [ "$PROFILE" = 1 ] || prof=(--no-profile)
step "submit best guess $GUESS" 600 "$OUT/submit-guess.json" "${KL[@]}" submit "$KERNEL" --workspace "$WS" \
  --config "$GUESS" "${prof[@]}" --agent dogfood \
  --hypothesis "latency_us down -30%: chunk-resident rows, 16-byte vectors on N=5000, no 39% masked lanes"
verdicts "$OUT/submit-guess.json"
step "submit space $SPACE" 600 "$OUT/submit-space.json" "${KL[@]}" submit "$KERNEL" --workspace "$WS" \
  --config '{"ROWS": 1, "WB_FIRST": 0}' --space "$SPACE" --no-profile --agent dogfood
verdicts "$OUT/submit-space.json"
step "submit the op's template $TEMPLATE_SPACE" 600 "$OUT/submit-template.json" "${KL[@]}" submit "$TEMPLATE" \
  --workspace "$WS" --config "$TEMPLATE_FIXED" --space "$TEMPLATE_SPACE" --no-profile --agent template
verdicts "$OUT/submit-template.json"
# Judged before, so nothing is re-run: --confirm re-measures every workload's best of the run beside the baselines.
step "confirm" 900 "$OUT/submit-confirm.json" "${KL[@]}" submit "$KERNEL" --workspace "$WS" --config "$GUESS" \
  --no-profile --confirm --agent dogfood
step "agent status" 120 "$OUT/status.json" "${KL[@]}" agent status --workspace "$WS" --device "$DEVICE"
cat "$OUT/status.json"
timeout 60 python3 - "$OUT/status.json" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
s = json.load(open(sys.argv[1]))
print("\n| workload | best | kernel µs | % of copy | confirmed µs | copy µs | eager µs | torch.compile µs | liger µs |")
print("|---|---|---|---|---|---|---|---|---|")
for w in s["workloads"]:
    b, c = w.get("best") or {}, w.get("confirmed") or {}
    base = c.get("baselines", {})
    f = lambda v: f"{v:.2f}" if isinstance(v, (int, float)) else "-"
    print(f"| {w['label']} | {b.get('label', '-')} | {f(b.get('kernel_us'))} | "
          f"{f(100 * r) if (r := b.get('roofline_fraction', b.get('copy_fraction'))) else '-'} | {f(c.get('kernel_us'))} | "
          + " | ".join(f(base.get(n, {}).get("kernel_us")) for n in ("copy", "eager", "torch.compile", "liger")) + " |")
print("counts:", s["counts"])
EOF
timeout 120 python3 - "$WS/.kernelloop/run-$DEVICE/archive.sqlite" "$OUT/dogfood.sqlite" <<'EOF' 2>&1 | tee -a "$LOG"
import sqlite3, sys
src, dst = sqlite3.connect(sys.argv[1]), sqlite3.connect(sys.argv[2])
src.backup(dst)   # a consistent copy, WAL included
dst.close(); src.close()
print("archive:", sys.argv[2])
EOF
say "workspace $WS; files in $OUT"
