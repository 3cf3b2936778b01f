"""The GPU tier's verifier check of an ops/gemm template's `launch`, shared by the template tests (gluon, stream-K,
swap-AB).

It runs in a fresh interpreter: the test modules set TRITON_INTERPRET for their CPU tests, and a GPU check must
compile for the device (device "cpu" keeps the interpreter, which is how the check itself is tested without a GPU).
For each configuration x shape x dtype x layout of b: inputs from the op's generator and the float64 truth, c
poisoned with a guard row after it and the workspace with a guard tail, `calls` launches, the verifier's comparison
of the first call's c, bitwise equality of every call's c, nothing written past c or the workspace, and zeros failing
the case. One JSON row per case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kernelloop.base.builtin import ops_dir

ROOT = Path(__file__).resolve().parents[2]
GEMM = ops_dir() / "gemm"

SCRIPT = r"""
import importlib.util, json, sys, torch
from pathlib import Path
from kernelloop.base.records import Workload
from kernelloop.core.reference.inputs import is_poison, make_inputs, poison_
from kernelloop.core.reference.truth import truth
from kernelloop.core.spec import load_op
from kernelloop.core.verify.compare import check_outputs, error_metrics
job = json.loads(sys.argv[1])
gemm, device = Path(job["gemm"]), job["device"]
s = importlib.util.spec_from_file_location("template_under_check", gemm / job["file"])
kernel = importlib.util.module_from_spec(s); s.loader.exec_module(kernel)
spec = load_op(gemm).spec


def workspace_numel(axes, cfg):
    if job["workspace"] == "spec":      # what the harness allocates for the op
        return spec.scratch_numel(axes)
    if job["workspace"] == "kernel":    # exactly what the template says it needs
        return kernel.workspace_numel(axes["M"], axes["N"], cfg["SPLIT_K"], cfg["BLOCK_M"], cfg["BLOCK_N"])
    return 0


rows = []
for cfg in job["configs"]:
    for axes in job["shapes"]:
        M, N = axes["M"], axes["N"]
        numel = workspace_numel(axes, cfg)
        for dtype in job["dtypes"]:
            for trans_b in job["layouts"]:
                w = Workload(op="gemm", axes=axes, dtype=dtype)
                a, b = make_inputs(spec, w, 11, device, "normal")
                refs = truth(spec, gemm / spec.reference, [a, b])
                if trans_b:
                    b = b.t().contiguous()
                ws = torch.empty(numel + 64, device=device)
                runs = []
                for i in range(job["calls"]):
                    if i == 0 or job["fresh_workspace"]:
                        poison_(ws)
                    buf = poison_(torch.empty(M + 1, N, dtype=a.dtype, device=device))
                    kernel.launch(a, b, buf[:M], TRANS_B=trans_b, **({"scratch": ws[:numel]} if numel else {}), **cfg)
                    if device == "cuda":
                        torch.cuda.synchronize()
                    assert bool(is_poison(buf[M]).all()), "wrote past the output"
                    assert bool(is_poison(ws[numel:]).all()), "wrote past the workspace"
                    runs.append(buf[:M].clone())
                v = check_outputs(spec, w, [runs[0]], refs, [a, b], [a, b], device)
                det = all(torch.equal(runs[0].view(torch.uint8), r.view(torch.uint8)) for r in runs[1:])
                zeros_fail = error_metrics("c", torch.zeros_like(runs[0]), refs[0], spec.tolerance_for(w)).mismatched > 0
                rows.append(dict(cfg=cfg, axes=axes, dtype=dtype, trans_b=trans_b, status=v.status.value,
                                 message=v.message[:300], deterministic=det, zeros_fail=zeros_fail,
                                 ratio=v.metrics[0].error_cap_ratio if v.metrics else None))
print(json.dumps({"rows": rows}))
"""


def check(file: str, configs: list[dict], shapes: list[dict], *, calls: int, workspace: str = "none",
          fresh_workspace: bool = True, dtypes=("fp16", "bf16"), layouts=(0, 1), device: str = "cuda",
          out_name: str | None = None, timeout: float = 380) -> list[dict]:
    """Every case's row. `workspace`: "none" (no `scratch=`), "spec" (the op's declared workspace for the shape) or
    "kernel" (the template's `workspace_numel`); with `fresh_workspace` False the later calls find the workspace as
    the call before left it. With $OUT set, the rows are also written to $OUT/<out_name>.json."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    job = {"gemm": str(GEMM), "file": file, "configs": configs, "shapes": shapes, "calls": calls,
           "workspace": workspace, "fresh_workspace": fresh_workspace, "dtypes": list(dtypes),
           "layouts": list(layouts), "device": device}
    p = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(job)], env=env, text=True, capture_output=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = json.loads(p.stdout.strip().splitlines()[-1])["rows"]
    if out_name and os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / f"{out_name}.json").write_text(json.dumps(rows, indent=1))
    return rows


def failures(rows: list[dict]) -> list[dict]:
    """The cases that did not pass, were not bitwise repeatable, or would have passed with zeros."""
    return [r for r in rows if r["status"] != "PASSED" or not r["deterministic"] or not r["zeros_fail"]]
