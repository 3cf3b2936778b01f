"""Round trip of every built-in op's templates through Triton's ptxas, on a machine without a GPU.

Each template at one valid configuration (the first its space keeps for the op's first workload) is built for
sm_90 ahead of time, its kernels' PTX recovered and re-assembled with Triton's ptxas and flags, the result
compared with Triton's own cubin (bytes, SASS, resources, .nv.info). Writes results.json and prints a table.

    PYTHONPATH=src python benchmarks/ptx_roundtrip.py [--out benchmarks/results/ptx-roundtrip-cpu-2026-12-03]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from kernelloop.tune.ptx.survey import survey


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/ptx-roundtrip-cpu-2026-12-03"))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    import triton
    t0 = time.perf_counter()
    rows = survey(jobs=args.jobs)
    out = []
    for r in rows:
        for k in r.kernels or [None]:
            rt = k.round_trip if k else None
            out.append({"op": r.op, "template": r.template, "config": r.config, "build": r.status,
                        "error": r.error, "kernel": k.kernel.name if k else None,
                        "recoverable": bool(k and k.kernel.recoverable),
                        "registers": k.kernel.registers if k else None,
                        "shared": k.kernel.shared_bytes if k else None,
                        "round_trip_ok": bool(rt and rt.ok), "identical_cubin": rt.identical_cubin if rt else None,
                        "sass_instructions": rt.sass_instructions if rt else None,
                        "differences": [d.model_dump() for d in rt.differences] if rt else []})
    summary = {"kernels": sum(1 for o in out if o["kernel"]),
               "recoverable": sum(o["recoverable"] for o in out),
               "not_recoverable": sum(1 for o in out if o["kernel"] and not o["recoverable"]),
               "round_trip_ok": sum(o["round_trip_ok"] for o in out),
               "identical_cubin": sum(bool(o["identical_cubin"]) for o in out),
               "not_built": sum(1 for o in out if o["build"] != "built"),
               "seconds": round(time.perf_counter() - t0, 1), "triton": triton.__version__,
               "python": platform.python_version(), "host": "CPU only (no GPU), 2 cores"}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"summary": summary, "rows": out}, indent=2) + "\n")
    for o in out:
        print(f"{o['op']:18} {o['template']:12} {o['build']:13} {str(o['kernel']):24} "
              f"{'ok' if o['round_trip_ok'] else 'DIFF' if o['recoverable'] else '-':4} "
              f"identical={o['identical_cubin']} regs={o['registers']} shared={o['shared']} "
              f"sass={o['sass_instructions']} diffs={len(o['differences'])} {o['error'][:80]}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
