"""Host overhead of a packaged op on a CUDA GPU: back-to-back wall time per call beside a bare launch of the same
kernel, the eager torch op and torch.compile.

For each (op, shape): a short `kernelloop optimize` run (or `--runs DIR` with earlier ones), `kernelloop export
--exact`, then 500 back-to-back calls (after warm-up; one synchronize at the end; wall per call; median of 7
repeats) of:
  bare       the winner's launches on preallocated outputs, straight to their compiled kernels' launchers (the
             handles recorded from the winner's `launch`, deliver/package/replay.py)
  bare-jit   the winner's own `launch` on preallocated outputs, through Triton's JIT (binding, specialisation and
             cache lookup on every call)
  packaged   `pkg[op](...)`: guard decision, fresh outputs, the launch (replayed from the plan's third call on)
  torch-op   `torch.ops.<ns>.<op>(...)`: the same through torch's dispatcher (what an applied model calls)
  eager      the eager PyTorch op
  compile    torch.compile of the eager op
Small shapes show the host path (the GPU waits for the host); large ones show whether it hides behind the kernel.
Writes overhead.json (and prints it).

    python3 benchmarks/packaged_overhead.py --out $OUT/overhead --budget 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from kernelloop.base.builtin import ops_dir

ROOT = Path(__file__).resolve().parents[1]
CASES = {   # op -> shapes (axis values) and the eager op
    "layernorm": [{"M": 4096, "N": 4096}, {"M": 8, "N": 4096}],
    "rmsnorm": [{"M": 4096, "N": 4096}, {"M": 8, "N": 4096}],
    "gemm_nt": [{"M": 4096, "N": 4096, "K": 4096}, {"M": 16, "N": 4096, "K": 4096}],
}


def eager_fn(op: str):
    F = torch.nn.functional
    return {"layernorm": lambda x, w, b, eps: F.layer_norm(x, (x.shape[-1],), w, b, eps),
            "rmsnorm": lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps),
            "gemm_nt": lambda a, b: F.linear(a, b)}[op]


def wall_per_call(fn, calls: int = 500, repeats: int = 7) -> dict:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        runs.append((time.perf_counter() - t0) / calls * 1e6)
    return {"median_us": statistics.median(runs), "min_us": min(runs), "max_us": max(runs), "calls": calls,
            "repeats": repeats}


def kl(*args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    subprocess.run([sys.executable, "-m", "kernelloop.cli.app", *args], cwd=ROOT, env=env, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget", default="4")
    ap.add_argument("--ops", nargs="*", default=list(CASES))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import kernelloop
    from kernelloop.core.reference.inputs import make_inputs
    from kernelloop.base.records import DType, Workload
    from kernelloop.core.spec import load_op
    results = {}
    runs = []
    for op in args.ops:
        wl = args.out / f"{op}.toml"
        wl.write_text(f'op = "{op}"\n' + "".join(
            "[[workload]]\naxes = { " + ", ".join(f"{k} = {v}" for k, v in s.items()) + " }\ndtype = \"fp16\"\n"
            for s in CASES[op]))
        run = args.out / f"run-{op}"
        if not (run / "archive.sqlite").is_file():
            kl("optimize", op, "--workloads", str(wl), "--budget", args.budget, "--no-confirm", "--out", str(run))
        runs.append(run)
    pkg_dir = args.out / "pkg"
    if not pkg_dir.exists():
        kernelloop.export(runs, pkg_dir, ops_root=ops_dir(), ranges=False, keep_slower=True, sanitize=False)
    pkg = kernelloop.load_package(pkg_dir).register()
    for op in args.ops:
        bundle = load_op(ops_dir() / op)
        k = pkg[op]
        for axes in CASES[op]:
            w = Workload(op=op, axes=axes, dtype=DType.fp16)
            inputs = make_inputs(bundle.spec, w, seed=0, device="cuda")
            scalars = dict(bundle.spec.scalars)
            idx, why = k.decide(inputs, scalars)
            row = {"axes": axes, "entry": k.table.entries[idx].id if idx >= 0 else None, "reason": why}
            if idx >= 0:
                launch, config = k.launchers[idx]
                outs = [torch.empty(tuple(axes[a] for a in t.shape), dtype=torch.float16, device="cuda")
                        for t in bundle.spec.outputs]
                extra = {}
                if bundle.spec.scratch is not None:
                    extra["scratch"] = torch.empty(bundle.spec.scratch_numel(axes), device="cuda")
                row["config"] = dict(config)
                call = lambda: launch(*inputs, *outs, **extra, **scalars, **config)  # noqa: E731
                row["bare-jit"] = wall_per_call(call)
                from kernelloop.deliver.package.replay import Replay, record
                rec = record([*inputs, *outs, *extra.values()], call)
                if rec.why_not:
                    row["bare_why_not"] = rec.why_not
                else:
                    handle = Replay(rec)
                    tensors = [*inputs, *outs, *extra.values()]
                    row["bare"] = wall_per_call(lambda: handle(tensors, 0))
                call()
                jit_out = [o.clone() for o in outs]
                packaged = [k(*inputs, **scalars) for _ in range(3)][-1]
                packaged = packaged if isinstance(packaged, tuple) else (packaged,)
                row["packaged_equals_jit"] = all(torch.equal(p, j) for p, j in zip(packaged, jit_out))
            row["packaged"] = wall_per_call(lambda: k(*inputs, **scalars))
            row["torch-op"] = wall_per_call(lambda: k.torch_op(*inputs, *scalars.values()))
            eager = eager_fn(op)
            row["eager"] = wall_per_call(lambda: eager(*inputs, *scalars.values()))
            compiled = torch.compile(eager)
            row["compile"] = wall_per_call(lambda: compiled(*inputs, *scalars.values()))
            row["replayed_calls"] = k.replays.total()
            row["not_replayed"] = k.counts()["not_replayed"]
            if "bare" in row:
                row["packaged_minus_bare_us"] = row["packaged"]["median_us"] - row["bare"]["median_us"]
                row["torch_op_minus_bare_us"] = row["torch-op"]["median_us"] - row["bare"]["median_us"]
            results[f"{op} " + "x".join(str(v) for v in axes.values())] = row
            print(op, axes, {n: round(row[n]["median_us"], 2) for n in ("bare", "bare-jit", "packaged", "torch-op", "eager",
                                                                      "compile") if n in row}, flush=True)
    import triton
    report = {"what": "wall µs per call, 500 back-to-back calls, median of 7 repeats, fp16",
              "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "results": results}
    (args.out / "overhead.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
