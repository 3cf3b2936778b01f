"""Does the way the timer evicts the L2 change kernel times? (A candidate explanation of Nsight Compute reporting
eager LayerNorm fp16 [4096, 4096] at 29.5 µs where the timer says 32.7-34.0 µs: ncu flushes and invalidates its
caches, our 'write' flush zeroes a 256 MiB buffer and leaves the L2 full of dirty lines.)

    python benchmarks/flush_modes.py [--device cuda] [--samples 100] [--out flush_modes.json]

For each op's fp16 [4096, 4096] workload, one worker times the op's best-known template configuration, eager,
Liger-Kernel and a device copy of the same bytes under the 'write' policy and under the 'read' policy (same
samples, interleaved rounds each), and reports the medians and the read/write ratio per subject.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from kernelloop.base.builtin import ops_dir
from kernelloop.core.bench.policy import policies_for
from kernelloop.core.device import environment
from kernelloop.core.execute.evaluate import Evaluator
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Workload
from kernelloop.core.spec import load_op

# the H200 winners of 2026-11-30 (their archives are in git history: benchmarks/results/2026-11-30-h200-s2)
CASES = [
    ("layernorm", {"BLOCK_N": 4096, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0}),
    ("rmsnorm", {"BLOCK_N": 4096, "ROWS": 1, "num_warps": 8, "EVICT_FIRST": 0, "STREAM_STORE": 0}),
    ("softmax", {"BLOCK_N": 4096, "ROWS": 1, "num_warps": 8, "EVICT_FIRST": 0, "STREAM_STORE": 0}),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--axes", default="4096,4096", help="M,N")
    ap.add_argument("--out", default="flush_modes.json")
    args = ap.parse_args()
    m, n = (int(v) for v in args.axes.split(","))
    base = policies_for(args.device)[0].model_copy(update={"samples": args.samples})
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for op, config in CASES:
            bundle = load_op(ops_dir() / op)
            w = Workload(op=op, axes={"M": m, "N": n}, dtype="fp16" if args.device == "cuda" else "fp32")
            cand = Candidate(op=op, template="rowwise", source=bundle.template_sources["rowwise"], config=config)
            subjects = ["candidate", "eager", "copy"] + (["liger"] if args.device == "cuda" else [])
            worker = Worker(args.device, Path(tmp) / op)
            try:
                ev = Evaluator(bundle, args.device, worker, base, secret=f"flush-{time.time()}")
                assert ev.load(cand) is None, "the library template failed to load"
                got = {}
                for mode in ("write", "read"):
                    policy = base.model_copy(update={"flush_mode": mode, "name": f"{base.name}-{mode}"})
                    ms, notes, reply = ev.bench(cand, w, subjects, policy)
                    if reply.status != "ok":
                        raise SystemExit(f"bench failed: {reply.status} {reply.error}")
                    got[mode] = {s: ms[s].kernel.median_us for s in ms}
            finally:
                worker.close()
            for s in got["write"]:
                rows.append({"op": op, "subject": s, "write_us": got["write"][s], "read_us": got["read"].get(s),
                             "read_over_write": (got["read"].get(s) or float("nan")) / got["write"][s]})
                print(f"{op:9s} {s:10s} write {got['write'][s]:8.2f} µs  read {got['read'].get(s, float('nan')):8.2f} µs"
                      f"  read/write {rows[-1]['read_over_write']:.3f}", flush=True)
    out = {"date": time.strftime("%Y-%m-%d"), "axes": {"M": m, "N": n}, "samples": args.samples,
           "environment": environment(args.device).model_dump(mode="json"), "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
