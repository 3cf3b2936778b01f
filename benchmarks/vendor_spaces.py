"""Vendor the recorded spaces the strategy benchmark needs into benchmarks/spaces/, small enough for the repository.

Two kinds of sources:
- the six public brute-forced Kernel Tuner caches (`--public`, default ../shared/fixtures/spaces): rewritten as
  Kernel Tuner caches with only what a replay reads — every parameter, `time` (or the failure string:
  "CompilationFailedConfig", "RuntimeFailedConfig"), `compile_time`, `verification_time`, `benchmark_time`
  (milliseconds, Kernel Tuner's units; their sum is the GPU cost of an evaluation). The per-sample `times`,
  derived metrics and timestamps are dropped; `time` and the parameters are unchanged; the three costs are rounded
  to 3 significant digits (a cost model needs no more, and their noise digits were half of each file). Kernel
  Tuner's `tune_cache` reads these files as it reads the originals.
- our H200 recordings: the `kernelloop record` space files are copied; the whole unpruned GEMM fp16 4096^3 space
  of an earlier H200 run is assembled from its pruning audit (3072 configurations; 328 fail at launch: shared
  memory over the limit) and its screen (the 2744 that run, 10-sample cold-L2 kernel medians), with each
  configuration's cost in GPU seconds (its build on the H200 plus its screen) as a kernelloop space file.

Every space is written xz-compressed (`.json.xz`, `xz -9e`, deterministic bytes).

    python benchmarks/vendor_spaces.py [--public DIR] [--out benchmarks/spaces]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kernelloop.base.compressed import plain_name, read_bytes, write_bytes

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
KEEP = ("compile_time", "verification_time", "benchmark_time")
RECORDED = ["2026-11-30-h200-s4/layernorm_fp16_4096_H200.space.json.gz",
            "2026-11-30-h200-s5/gemm_fp16_4096_H200.space.json.gz"]
FULL_GEMM = ("2026-11-30-h200-s7/call3-audit-gemm-4096.json.gz", "2026-11-30-h200-s7/call3-screen-gemm-4096.jsonl.gz")


def _xz_json(path: Path, doc: dict) -> int:
    """Write `doc` as compact JSON, compressed as the name says (the spaces are kept as .json.xz); its size."""
    write_bytes(path, json.dumps(doc, separators=(",", ":")).encode())
    return path.stat().st_size


def _xz_name(path: str | Path) -> str:
    return plain_name(path) + ".xz"


def slim_kt_cache(src: Path, dst: Path) -> int:
    data = json.loads(read_bytes(src))
    keys = data["tune_params_keys"]
    cache = {}
    for k, rec in data["cache"].items():
        slim = {p: rec[p] for p in keys}
        slim["time"] = rec.get("time")
        for f in KEEP:
            if isinstance(rec.get(f), (int, float)):
                slim[f] = float(f"{rec[f]:.3g}")
        cache[k] = slim
    doc = {k: data[k] for k in ("device_name", "kernel_name", "problem_size", "tune_params_keys", "tune_params",
                                "objective") if k in data}
    doc.setdefault("objective", "time")
    doc["cache"] = cache
    doc["vendored_from"] = f"{src.name} (AutoTuningAssociation/benchmark_hub, Zenodo 10.5281/zenodo.15364124); " \
                           "only parameters, time and the compile/verification/benchmark times kept"
    return _xz_json(dst, doc)


def full_gemm_space(dst: Path) -> int:
    audit = json.loads(read_bytes(RESULTS / FULL_GEMM[0]))
    w = audit["workloads"][0]
    screen = {}
    for line in read_bytes(RESULTS / FULL_GEMM[1]).decode().splitlines():
        rec = json.loads(line)
        if rec.get("status") == "timed":
            screen[json.dumps(rec["config"], sort_keys=True)] = rec
    wid = w["workload_id"]
    records = []
    for row in w["rows"]:
        cfg = {"template": row["template"], **row["config"]}
        got = screen.get(json.dumps(cfg, sort_keys=True))
        build = float(row.get("build_s") or 0.0)
        if row["class"] == "fails":
            res = {"value": None, "status": "OUT_OF_RESOURCES", "why": row["why"], "cost_s": round(build, 3)}
        elif got is None:
            raise SystemExit(f"a configuration that runs was not screened: {cfg}")
        else:
            res = {"value": got["us"], "status": "PASSED", "cost_s": round(build + float(got["seconds"]), 3)}
        records.append({"config": cfg, "results": {wid: res}})
    doc = {"format": "kernelloop-space/1", "name": "gemm_fp16_4096_H200_full", "op": "gemm",
           "objective": "kernel_us", "device": audit["device"], "complete": True,
           "params": ["template"] + list(w["rows"][0]["config"]),
           "workloads": [{"id": wid, "label": w["workload"], "axes": w["axes"], "dtype": w["dtype"]}],
           "note": "the unpruned space of benchmarks/results/2026-11-30-h200-s7 (Triton 3.6): failures from the "
                   "pruning audit (launch limit: shared memory), values from the screen (10-sample cold-L2 kernel "
                   "medians, unverified), cost_s = H200 build seconds + screen seconds",
           "records": records}
    return _xz_json(dst, doc)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--public", type=Path, default=ROOT.parent / "shared" / "fixtures" / "spaces")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "spaces")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    total = 0
    for src in sorted(args.public.glob("*.json.gz")):
        n = slim_kt_cache(src, args.out / _xz_name(src))
        print(f"{src.name}: {src.stat().st_size} -> {n} bytes")
        total += n
    for rel in RECORDED:
        dst = write_bytes(args.out / _xz_name(rel), read_bytes(RESULTS / rel))
        total += dst.stat().st_size
        print(f"{dst.name}: copied, {dst.stat().st_size} bytes")
    n = full_gemm_space(args.out / "gemm_fp16_4096_H200_full.space.json.xz")
    total += n
    print(f"gemm_fp16_4096_H200_full.space.json.xz: {n} bytes; total {total} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
