"""Round trip of the recorded sm_90 winner configurations: every H200 run archived under benchmarks/results, each
workload's best PASSED candidate; each distinct (candidate, dtype) rebuilt ahead of time for sm_90 on this machine
(no GPU) on the first workload it won, its kernels' PTX recovered and re-assembled with Triton's ptxas, compared
with Triton's own cubin. Ops without a recorded H200 run are listed (the
template survey, benchmarks/ptx_roundtrip.py, covers them at a valid configuration). Writes results.json.

    PYTHONPATH=src python benchmarks/ptx_winners.py --out DIR [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelloop.base.compressed import decompress_to

ROOT = Path(__file__).resolve().parents[1]


def winners() -> list[tuple[str, object, object]]:
    """(archive name, candidate, workload) of every distinct (candidate, dtype) winner, on the first workload it won."""
    from kernelloop.core.archive import Archive
    from kernelloop.tune.select.pareto import best_per_workload
    out, seen = [], set()
    for gz in sorted((ROOT / "benchmarks" / "results").glob("*h200*/*.sqlite.xz")):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "archive.sqlite"
            decompress_to(gz, path)
            with Archive(path, readonly=True) as a:
                for run in a.runs():
                    for wid, trial in sorted(best_per_workload(a.trials(run["id"])).items()):
                        c, w = a.get_candidate(trial.candidate_id), a.get_workload(wid)
                        if (c.id, w.dtype) not in seen:
                            seen.add((c.id, w.dtype))
                            out.append((f"{gz.parent.name}/{gz.name}", c, w))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="at most this many winners (first ones)")
    args = ap.parse_args()
    import triton
    from kernelloop.base.builtin import ops_dir
    from kernelloop.tune.ptx.recover import from_candidate
    from kernelloop.tune.ptx.roundtrip import round_trip
    t0 = time.perf_counter()
    found = winners()[:args.limit]

    def one(item):
        source, c, w = item
        kernels, why = from_candidate(c, w)
        rows = []
        for k in kernels or [None]:
            rt = round_trip(k) if k is not None and k.recoverable else None
            rows.append({"archive": source, "op": c.op, "template": c.template, "config": c.config,
                         "workload": w.label, "build_error": why[:300], "kernel": k.name if k else None,
                         "recoverable": bool(k and k.recoverable), "round_trip_ok": bool(rt and rt.ok),
                         "identical_cubin": rt.identical_cubin if rt else None,
                         "differences": [d.model_dump() for d in rt.differences] if rt else []})
        print(f"{c.op:16} {c.template:14} {w.label:40} " + ", ".join(
            f"{r['kernel']}: {'ok' if r['round_trip_ok'] else 'not recoverable' if not r['recoverable'] else 'DIFF'}"
            for r in rows) + (f" {why[:80]}" if why else ""), flush=True)
        return rows
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        rows = [r for rs in pool.map(one, found) for r in rs]
    recorded = {r["op"] for r in rows}
    all_ops = sorted(p.name for p in ops_dir().iterdir() if (p / "spec.toml").is_file())
    summary = {"winners": len(found), "kernels": sum(1 for r in rows if r["kernel"]),
               "recoverable": sum(r["recoverable"] for r in rows),
               "not_recoverable": sum(1 for r in rows if r["kernel"] and not r["recoverable"]),
               "not_built": sum(1 for r in rows if r["build_error"]),
               "round_trip_ok": sum(r["round_trip_ok"] for r in rows),
               "identical_cubin": sum(bool(r["identical_cubin"]) for r in rows),
               "ops_with_recorded_winners": sorted(recorded),
               "ops_without_recorded_winners": [o for o in all_ops if o not in recorded],
               "seconds": round(time.perf_counter() - t0, 1), "triton": triton.__version__,
               "python": platform.python_version(), "host": "CPU only (no GPU)"}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
