"""Where a small GEMM's time goes between the kernel and the loop's timer: cuBLAS beside configurations of the tiled
template on one shape, timed by the loop's own sampler (`kernelloop.core.bench.timer.sample`, the cold-L2 events policy)
under three L2 states (flushed by a write, flushed by a read, not flushed), and from the profiler's kernel records
(device-side durations, L2 flushed by a write). A diagnostic, not a benchmark of record.

    python3 benchmarks/gemm_timing_gap.py --out gap.json [--shape 512,1024,4096] [--samples 200] [--configs JSON]

Question it answers (an earlier H200 run): on 512x1024x4096 bf16 the loop's timer put our tiled 64x64 kernel at
0.933x cuBLAS while Nsight Compute counted the same kernel time for both. If the gap closes without the flush, or
with a read flush, it comes from the cold-L2 state (dirty lines written back during the kernel); if it stays in
the kernel records, it is in the kernel; if it shows only in the events, it is launch-side.
"""

import argparse
import importlib.util
import json
import pathlib
import statistics
import sys

import torch
from kernelloop.base.builtin import ops_dir

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _load(path: pathlib.Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cfg(bm, bn, bk, stages, warps, tma):
    return dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_stages=stages, num_warps=warps, TMA=tma,
                PERSISTENT=0)


# the suite's winner on 512x1024x4096 (TMA descriptors), the same tile with pointer loads, and cuBLAS's own tile
# shape (64x64x64, deep pipeline)
CONFIGS = {"tiled-64x64x128-s6-tma": _cfg(64, 64, 128, 6, 4, 1), "tiled-64x64x128-s6-ptr": _cfg(64, 64, 128, 6, 4, 0),
           "tiled-64x64x64-s10-tma": _cfg(64, 64, 64, 10, 4, 1)}


def _subjects(M, N, K, dtype):
    kernel = _load(ops_dir() / "gemm" / "kernel.py", "gemm_kernel_gap")
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    outs = {"cublas": torch.empty(M, N, device="cuda", dtype=dtype)}
    subjects = {"cublas": lambda: torch.matmul(a, b, out=outs["cublas"])}
    ref = a.float() @ b.float()
    errors = {}
    for name, cfg in CONFIGS.items():
        c = torch.empty(M, N, device="cuda", dtype=dtype)
        outs[name] = c
        subjects[name] = (lambda c=c, cfg=cfg: kernel.launch(a, b, c, **cfg))
    for name, fn in subjects.items():
        fn()
    torch.cuda.synchronize()
    for name, c in outs.items():
        errors[name] = float(((c.float() - ref).abs().max() / ref.abs().max()).item())
    return subjects, errors


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--shape", default="512,1024,4096", help="M,N,K (bf16)")
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--configs", help="JSON {name: tiled-template configuration} to time instead of CONFIGS")
    args = p.parse_args(argv)
    if args.configs:
        CONFIGS.clear()
        CONFIGS.update(json.loads(args.configs))
    M, N, K = (int(x) for x in args.shape.split(","))
    if not torch.cuda.is_available():
        sys.exit("gemm_timing_gap.py needs a CUDA GPU")
    from kernelloop.core.bench.policy import COLD_L2_EVENTS
    from kernelloop.core.bench.timer import sample
    gemm_kernels = _load(ROOT / "benchmarks" / "gemm_kernels.py", "gemm_kernels_gap")
    subjects, errors = _subjects(M, N, K, torch.bfloat16)
    policies = {"write-flush": COLD_L2_EVENTS,
                "read-flush": COLD_L2_EVENTS.model_copy(update={"name": "read-flush", "flush_mode": "read"}),
                "no-flush": COLD_L2_EVENTS.model_copy(update={"name": "no-flush", "flush_bytes": 0})}
    result = {"shape": [M, N, K], "dtype": "bf16", "max_rel_err": errors, "timer": {}, "records": {}}
    for label, policy in policies.items():
        got = sample(subjects, policy.model_copy(update={"samples": args.samples}), seed=7)
        result["timer"][label] = {name: {"kernel_us_median": statistics.median(v["kernel_us"]),
                                         "call_us_median": statistics.median(v["call_us"])}
                                  for name, v in got.items()}
    flush = torch.empty(64 * 2 ** 20, dtype=torch.float32, device="cuda")
    for name, fn in subjects.items():
        result["records"][name] = gemm_kernels._profile(fn, flush, 50)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    try:
        import triton
        meta["triton"] = triton.__version__
    except ImportError:
        pass
    result["meta"] = meta
    pathlib.Path(args.out).write_text(json.dumps(result, indent=1))
    base = {label: t["cublas"]["kernel_us_median"] for label, t in result["timer"].items()}
    for name in subjects:
        cells = [f"{label} {t[name]['kernel_us_median']:.2f} us ({base[label] / t[name]['kernel_us_median']:.3f}x)"
                 for label, t in result["timer"].items()]
        rec = "; ".join(f"{k['kernel'][:40]} {k['median_us']:.2f} us" for k in result["records"][name])
        print(f"{name}: err {errors[name]:.2e} | " + " | ".join(cells) + f" | records: {rec}", flush=True)


if __name__ == "__main__":
    main()
