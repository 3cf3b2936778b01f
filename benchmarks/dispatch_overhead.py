"""Host time of a packaged op's guard decision, per call, on this machine (no GPU needed).

Builds an RMSNorm dispatch table of ENTRIES entries (half exact guards, half ranges along M, as an export makes them)
in memory and times, with `time.perf_counter_ns` over many calls after a warm-up:
  - `decide` on a shape seen before (the memo hit every steady-state call takes),
  - `decide` on shapes never seen (the memo miss: the exact dict, then a scan of the range entries),
  - `Dispatcher.select` alone,
  - the whole `Kernel.__call__` host path with the launch replaced by a no-op (guard + output allocation +
    keyword binding; the launch itself is the GPU's part, measured on the GPU),
  - the same through the registered torch op (`torch.ops.<ns>.rmsnorm`), which adds torch's dispatcher.
Prints JSON; `--out FILE` also writes it.

    python3 benchmarks/dispatch_overhead.py --out benchmarks/results/dispatch-overhead-cpu-2026-12-03/overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from kernelloop.base.builtin import ops_dir
from kernelloop.deliver.package.guards import AxisRange, Guard  # noqa: E402
from kernelloop.deliver.package.runtime import Kernel, Package  # noqa: E402
from kernelloop.deliver.package.records import MeasuredOn, PackageManifest, PackagedOp  # noqa: E402
from kernelloop.deliver.package.table import DispatchEntry, DispatchTable, ShapeClaim  # noqa: E402
from kernelloop.base.records import DType  # noqa: E402
from kernelloop.core.spec import load_op  # noqa: E402



def table(entries: int) -> DispatchTable:
    out = []
    for i in range(entries):
        n = 256 * (1 + i // 2)
        if i % 2 == 0:
            axes = {"M": AxisRange(lo=4096, hi=4096), "N": AxisRange(lo=n, hi=n)}
        else:
            axes = {"M": AxisRange(lo=1, hi=4095), "N": AxisRange(lo=n, hi=n)}
        g = Guard(dtype=DType.fp16, arch="interpret", axes=axes, scalars={"eps": 1e-6})
        out.append(DispatchEntry(id=f"e{i}", guard=g, template="rowwise", kernel="kernels/kernel.py",
                                 config={"BLOCK_N": 1024, "ROWS": 1, "num_warps": 4}, candidate_id=f"c{i}",
                                 shapes=[ShapeClaim(axes={"M": axes["M"].lo, "N": n}, kernel_us=1.0, source="run")]))
    return DispatchTable(op="rmsnorm", axes=["M", "N"], entries=out)


def per_call_ns(fn, calls: int, repeats: int = 7) -> dict:
    for _ in range(min(calls, 1000)):
        fn()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter_ns() - t0) / calls)
    return {"median_ns": statistics.median(runs), "min_ns": min(runs), "max_ns": max(runs), "repeats": repeats,
            "calls": calls}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=16)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    bundle = load_op(ops_dir() / "rmsnorm")
    tmp = Path(tempfile.mkdtemp())
    try:
        (tmp / "kernels").mkdir()
        shutil.copy(ops_dir() / "rmsnorm/reference.py", tmp / "reference.py")
        shutil.copy(ops_dir() / "rmsnorm/kernel.py", tmp / "kernels/kernel.py")
        t = table(args.entries)
        k = Kernel(tmp, bundle.spec, t, "interpret", "", "bench")
        k.launchers = [(lambda *a, **kw: None, cfg) for _, cfg in k.launchers]   # host path only
        x = torch.empty(100, 256 * (args.entries // 2), dtype=torch.float16)
        w = torch.empty(x.shape[1], dtype=torch.float16)
        scalars = {"eps": 1e-6}
        assert k.decide((x, w), scalars)[0] >= 0, "the benchmark's input must hit an entry"

        def miss():   # a shape decided for the first time: plan (guard lookup, shapes, outputs) and checks
            k.plans.clear()
            k.dispatcher.memo.clear()
            k.decide((x, w), scalars)

        manifest = PackageManifest(name="bench", version="0", created=0, kernelloop="", files={}, ops=[PackagedOp(
            op="rmsnorm", run_id="r", manifest_hash="m", entries=len(t.entries),
            measured_on=MeasuredOn(device="interpret", arch="interpret", torch="", triton=""))])
        pkg = Package(tmp, manifest, {"rmsnorm": k}).register()
        op = k.torch_op
        results = {
            "decide_memo_hit": per_call_ns(lambda: k.decide((x, w), scalars), args.calls),
            "decide_memo_miss": per_call_ns(miss, args.calls // 4),
            "select_only": per_call_ns(lambda: k.dispatcher.select(DType.fp16, "interpret", (100, x.shape[1])),
                                       args.calls),
            "call_host_path_noop_launch": per_call_ns(lambda: k(x, w), args.calls),
            "torch_op_host_path_noop_launch": per_call_ns(lambda: op(x, w, 1e-6), args.calls),
        }
        del pkg
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    import triton
    report = {"what": "host ns per call of the packaged op's dispatch (no kernel launched)", "entries": args.entries,
              "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                          "python": platform.python_version(), "torch": torch.__version__,
                          "triton": triton.__version__},
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "results": results}
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
