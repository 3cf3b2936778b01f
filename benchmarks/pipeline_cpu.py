"""Trials per minute of the evaluation pipeline on the CPU (Triton interpreter), before and after.

    python3 benchmarks/pipeline_cpu.py --before-src /path/to/older/checkout/src --out benchmarks/results/DIR

Runs the same interpreter searches -- LayerNorm and GEMM on their interpreter workload files, exhaustive over the
same space with the same seed, the same evaluation budget and verification strength (checks), no confirmation --
with the source tree given as "before" (one worker, tensors through files) and with this checkout: one worker, and
one worker per CPU core (`--devices N`). Each run is `kernelloop optimize --json` in a fresh process; its archive's
throughput (trials per minute over the search's wall time, each device's busy share, the build wait) is what is
compared. Writes `pipeline_cpu.json` (every run's summary throughput and the command) and `pipeline_cpu.md`.

Interpreter timings say nothing about GPU kernels: this measures the pipeline around them (worker round trips,
output transport, the controller's checks, parallel workers), which is what the GPU's busy share depends on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEARCHES = {   # op -> (evaluations per workload, extra arguments): equal for every variant
    "layernorm": (3, ["--template", "rowwise"]),
    "gemm": (2, ["--template", "tiled"]),
}


def run(src: Path, op: str, out: Path, extra: list[str], budget: int, checks: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "KERNELLOOP_RECORD_HOST": "0"}
    cmd = [sys.executable, "-m", "kernelloop.cli.app", "optimize", op, "--device", "interpret", "--strategy",
           "exhaustive", "--budget", str(budget), "--checks", str(checks), "--no-confirm", "--seed", "0", "--out",
           str(out), "--json", *SEARCHES[op][1], *extra]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.monotonic() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    summary = json.loads(p.stdout)
    tp = summary["throughput"]
    counts = {}
    for w in summary.get("workloads", []):
        for k, v in (w.get("counts") or {}).items():
            counts[k] = counts.get(k, 0) + v
    return {"op": op, "command": " ".join(cmd[1:]), "process_wall_s": round(wall, 1), "trials": tp["trials"],
            "search_wall_s": round(tp["wall_s"], 1), "trials_per_minute": tp["trials_per_minute"],
            "devices": tp["devices"], "build_wait_s": tp["build_wait_s"], "statuses": summary.get("counts", counts)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before-src", type=Path, required=True, help="src/ of the checkout measured as 'before'")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--checks", type=int, default=2)
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--only", default=",".join(SEARCHES), help="ops, comma-separated")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    variants = [("before: one worker, tensors through files", args.before_src, []),
                ("after: one worker", ROOT / "src", []),
                (f"after: {args.workers} interpreter workers", ROOT / "src", ["--devices", str(args.workers)])]
    rows = []
    for op in args.only.split(","):
        budget = SEARCHES[op][0]
        for name, src, extra in variants:
            r = run(src, op, args.out / "runs" / f"{op}-{len(rows)}", extra, budget, args.checks)
            r["variant"] = name
            rows.append(r)
            print(f"{op:10s} {name:45s} {r['trials']:3d} trials in {r['search_wall_s']:6.1f} s: "
                  f"{r['trials_per_minute']:.1f} trials/min", flush=True)
    load = os.getloadavg()
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "host": {"cpus": len(os.sched_getaffinity(0)),
           "python": platform.python_version(), "load_average_at_end": load}, "checks": args.checks,
           "argv": sys.argv, "runs": rows}
    (args.out / "pipeline_cpu.json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = ["| op | variant | trials | search wall s | trials/min | statuses |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['op']} | {r['variant']} | {r['trials']} | {r['search_wall_s']} | "
                     f"{r['trials_per_minute']:.1f} | {r['statuses']} |")
    (args.out / "pipeline_cpu.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
