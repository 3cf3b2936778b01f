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

- the further benchmark_hub caches (`--hub GITDIR`: a clone of AutoTuningAssociation/benchmark_hub; the files are
  read from commit HUB_COMMIT with `git show`, whatever is checked out): rewritten as Kernel Tuner caches with only
  the parameters and `time` (or the failure string); `time` is rounded to 4 significant digits (a relative change
  of at most 5e-5, far below the 2 % and 5 % thresholds scored; the full digits were most of each file) and no
  costs are kept (the tree has a size limit). `--hub` vendors only these (HUB); the set each space belongs to is
  benchmarks/spaces/split.toml.

Every space is written xz-compressed (`.json.xz`, `xz -9e`, deterministic bytes).

    python benchmarks/vendor_spaces.py [--public DIR] [--out benchmarks/spaces]
    python benchmarks/vendor_spaces.py --hub ../benchmark_hub           # the HUB spaces only
    python benchmarks/vendor_spaces.py --list                           # the table of benchmarks/spaces/README.md
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
HUB_REPO = "AutoTuningAssociation/benchmark_hub"
HUB_COMMIT = "8eeb99e7179e6838af95d392ac6c60cebfd8c434"
_KT = "currently_unused/cachefiles/KernelTuner data"
HUB = {   # vendored name -> path in benchmark_hub at HUB_COMMIT
    "convolution_milo_A4000": "cachefiles/convolution_milo/A4000.json.gz",
    "convolution_milo_A6000": "cachefiles/convolution_milo/A6000.json.gz",
    "convolution_milo_W6600": "cachefiles/convolution_milo/W6600.json.gz",
    "convolution_milo_W7800": "cachefiles/convolution_milo/W7800.json.gz",
    "dedispersion_milo_A4000": "cachefiles/dedispersion_milo/A4000.json.gz",
    "dedispersion_milo_W6600": "cachefiles/dedispersion_milo/W6600.json.gz",
    "kt_convolution_RTX_Titan": f"{_KT}/convolution/RTX_Titan.json.gz",
    "kt_convolution_RTX_3060_laptop": f"{_KT}/convolution/RTX_3060_laptop.json.gz",
    "kt_pnpoly_RTX_Titan": f"{_KT}/pnpoly/RTX_Titan.json.gz",
    "kt_pnpoly_RTX_3060_laptop": f"{_KT}/pnpoly/RTX_3060_laptop.json.gz",
    "kt_convolution_milo_MI50": f"{_KT}/convolution_milo/mi50.json.gz",
}
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


def slim_hub_cache(data: dict, source: str) -> dict:
    """A benchmark_hub cache with only the parameters and `time` (4 significant digits) or its failure string."""
    keys = data["tune_params_keys"]
    cache = {}
    for k, rec in data["cache"].items():
        t = rec.get("time")
        if isinstance(t, (int, float)) and not isinstance(t, bool):
            t = float(f"{t:.4g}")
        cache[k] = {**{p: rec[p] for p in keys}, "time": t}
    doc = {k: data[k] for k in ("device_name", "kernel_name", "problem_size", "tune_params_keys", "tune_params")
           if k in data}
    doc["objective"] = "time"
    doc["cache"] = cache
    doc["vendored_from"] = f"{HUB_REPO}@{HUB_COMMIT}:{source} (MIT licence); only the parameters and time kept, " \
                           "time rounded to 4 significant digits"
    return doc


def vendor_hub(gitdir: Path, out: Path) -> int:
    """Write every HUB space from `gitdir` (a benchmark_hub clone) at HUB_COMMIT; their total size."""
    import gzip
    import subprocess
    total = 0
    for name, source in HUB.items():
        blob = subprocess.run(["git", "--git-dir" if (gitdir / "HEAD").is_file() else "-C", str(gitdir), "show",
                               f"{HUB_COMMIT}:{source}"], capture_output=True, check=True).stdout
        n = _xz_json(out / f"{name}.json.xz", slim_hub_cache(json.loads(gzip.decompress(blob)), source))
        print(f"{name}.json.xz <- {source}: {len(blob)} -> {n} bytes")
        total += n
    print(f"total {total} bytes")
    return total


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
    ap.add_argument("--hub", type=Path, default=None, help="a benchmark_hub clone: vendor the HUB spaces only")
    ap.add_argument("--list", action="store_true", help="print the table of the spaces in --out and stop")
    args = ap.parse_args(argv)
    if args.list:
        from kernelloop.tune.replay.corpus import corpus_table
        print(corpus_table(args.out))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    if args.hub is not None:
        vendor_hub(args.hub, args.out)
        return 0
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
