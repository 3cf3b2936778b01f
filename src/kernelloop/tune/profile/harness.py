"""The process Nsight Compute profiles: `python -m kernelloop.tune.profile.harness JOB.json` (CUDA only).

It loads the op, builds the workload's seeded inputs on the GPU and then, by the job's `mode`:
- `candidate` (the default): imports the candidate's source and calls its `launch` on fresh outputs;
- `baseline`: builds the baseline callable named by `baseline` (eager, torch.compile, copy, or a name of the op's
  `baselines.py`) with `kernelloop.core.execute.worker.make_baseline`, the same code the worker times, and calls it.
It makes `warmup` calls (JIT compilation, torch.compile, caches, the caching allocator) and then one more inside
the NVTX range the ncu command filters on. Every kernel the call launches falls inside the range (a baseline may
launch several). It prints one JSON line with what it did; it never judges correctness (the verifier did that
before the candidate was profiled; baselines are not verified).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

MODES = ("candidate", "baseline")


def build_call(job: dict, device: str = "cuda"):
    """(zero-argument callable, description) of the job's subject on its seeded inputs."""
    from ...base.records import Workload
    from ...core.reference.inputs import alloc_outputs, alloc_scratch, make_inputs
    from ...core.spec import load_op

    mode = job.get("mode", "candidate")
    if mode not in MODES:
        raise ValueError(f"unknown harness mode {mode!r}; expected one of {MODES}")
    bundle = load_op(job["op_dir"])
    spec = bundle.spec
    workload = Workload.model_validate_json(job["workload"])
    inputs = make_inputs(spec, workload, int(job["seed"]), device)
    if mode == "baseline":
        from ...core.execute.baselines import make_baseline
        name = job["baseline"]
        fn = make_baseline(name, inputs, spec.scalars, reference_file=job.get("reference_file"),
                           baselines_file=job.get("baselines_file"), bytes_moved=float(job.get("bytes_moved", 0.0)),
                           device=device)
        return fn, {"mode": mode, "baseline": name, "workload": workload.label}
    mod_spec = importlib.util.spec_from_file_location("kernelloop_profiled_candidate", job["source_file"])
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    outputs = alloc_outputs(spec, workload, device)
    scratch = alloc_scratch(spec, workload, device)
    config = job["config"]

    def call() -> None:
        module.launch(*inputs, *outputs, **scratch, **spec.scalars, **config)

    return call, {"mode": mode, "workload": workload.label, "config": config}


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"ok": False, "error": "the profiling harness needs CUDA"}))
        return 2
    if not nvtx_available(torch):
        # without NVTX ncu's range filter sees nothing: say so instead of a confusing "no kernels were profiled"
        print(json.dumps({"ok": False, "error": "torch has no NVTX support here (torch.cuda.nvtx): the profiled "
                                                "launch cannot be marked"}))
        return 2
    call, what = build_call(job, "cuda")
    for _ in range(int(job.get("warmup", 3))):
        call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(job.get("nvtx_range", "kernelloop-profile"))
    try:
        call()
        torch.cuda.synchronize()
    finally:
        torch.cuda.nvtx.range_pop()
    print(json.dumps({"ok": True, **what}))
    return 0


def nvtx_available(torch) -> bool:
    """Whether torch.cuda.nvtx can push ranges (a CPU-only or NVTX-less build raises on the first push)."""
    try:
        torch.cuda.nvtx.range_push("kernelloop-nvtx-check")
        torch.cuda.nvtx.range_pop()
        return True
    except Exception:  # noqa: BLE001 - "NVTX functions not installed" and kin
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
