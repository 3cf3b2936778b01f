"""The process Nsight Compute profiles: `python -m kernelloop.profile.harness JOB.json` (CUDA only).

It loads the op, imports the candidate's source, builds the workload's seeded inputs on the GPU, calls
`launch` `warmup` times (JIT compilation and caches) and then once inside the NVTX range the ncu command
filters on. It prints one JSON line with what it did; it never judges correctness (the verifier did that
before the candidate was profiled).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    import torch

    from ..records import Workload
    from ..reference.inputs import alloc_outputs, make_inputs
    from ..spec import load_op

    if not torch.cuda.is_available():
        print(json.dumps({"ok": False, "error": "the profiling harness needs CUDA"}))
        return 2
    bundle = load_op(job["op_dir"])
    spec = bundle.spec
    workload = Workload.model_validate_json(job["workload"])
    mod_spec = importlib.util.spec_from_file_location("kernelloop_profiled_candidate", job["source_file"])
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    inputs = make_inputs(spec, workload, int(job["seed"]), "cuda")
    outputs = alloc_outputs(spec, workload, "cuda")

    def call() -> None:
        module.launch(*inputs, *outputs, **spec.scalars, **job["config"])

    for _ in range(int(job.get("warmup", 3))):
        call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(job.get("nvtx_range", "kernelloop-profile"))
    call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    print(json.dumps({"ok": True, "workload": workload.label, "config": job["config"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
