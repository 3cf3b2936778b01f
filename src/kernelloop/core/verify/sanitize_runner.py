"""The process compute-sanitizer wraps: one launch of one candidate on one small workload, nothing else.

    python -m kernelloop.core.verify.sanitize_runner JOB.json

JOB.json (written by `kernelloop.core.verify.sanitizer`): {"source_file", "config", "spec" (OpSpec JSON), "workload"
(Workload JSON), "seed", "device"}. The runner imports the candidate's source as a module, draws the seeded inputs
with `make_inputs` (on the CPU, then copied: no generator kernels under the tool), allocates poisoned outputs
(and the op's scratch) with `alloc_outputs`/`alloc_scratch`, calls `launch` once and synchronizes. It prints
LAUNCHED_MARK after the launch returned and the device synchronized, so a clean tool report can be told apart from
a run that never reached the kernel. Exit 0 on success; 3 when the job or the candidate failed before or during the
launch (the traceback on stderr).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from pathlib import Path

LAUNCHED_MARK = "kernelloop-sanitize: launched and synchronized"
FAILED_EXIT = 3


def _import_source(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod   # Triton's JIT looks functions' globals up through their module
    spec.loader.exec_module(mod)
    return mod


def run_job(job: dict) -> None:
    """Import, allocate, launch once, synchronize (raises on any failure)."""
    import torch

    from ...base.records import OpSpec, Workload
    from ..reference.inputs import alloc_outputs, alloc_scratch, make_inputs
    spec = OpSpec.model_validate_json(job["spec"])
    workload = Workload.model_validate_json(job["workload"])
    device = job.get("device", "cuda")
    mod = _import_source(Path(job["source_file"]), "kernelloop_sanitize_candidate")
    inputs = [t.to(device) for t in make_inputs(spec, workload, int(job.get("seed", 0)), "cpu")]
    outputs = alloc_outputs(spec, workload, device)
    scratch = alloc_scratch(spec, workload, device)
    if device == "cuda":
        torch.cuda.synchronize()
    mod.launch(*inputs, *outputs, **scratch, **spec.scalars, **job.get("config", {}))
    if device == "cuda":
        torch.cuda.synchronize()
    print(LAUNCHED_MARK, flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m kernelloop.core.verify.sanitize_runner JOB.json", file=sys.stderr)
        return FAILED_EXIT
    try:
        run_job(json.loads(Path(argv[0]).read_text()))
    except BaseException:  # noqa: BLE001 - candidate code may raise anything; the tool's report is what counts
        traceback.print_exc()
        return FAILED_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
