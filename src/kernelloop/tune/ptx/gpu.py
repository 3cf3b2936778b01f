"""The differential proof on a GPU: the template launched as it is and with the edited PTX substituted through
Triton's IR override (`override.py`), in one process per edit (`python -m kernelloop.tune.ptx.prove_child`), so an
edit that faults the device costs only its own process and is recorded as crashed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from ...base.records import OpSpec
from ...core.build.ptx_override import PtxOverrides, write_files
from .prove import ProofCase, ProofReport
from .records import PtxCandidate


class TritonOverrideExecutor:
    """Launches the op's template on CUDA tensors; the edited side with the PTX substituted by Triton's
    `ir_override` for the one kernel, and only where the launch compiles to the PTX the edit was made from."""

    name = "triton-ir-override (GPU)"

    def __init__(self, spec: OpSpec, template_source: str, config: dict, kernel: str, original_sha: str,
                 workdir: Path, policy=None):
        from ...core.bench.policy import COLD_L2_EVENTS
        self.spec, self.config, self.kernel, self.sha = spec, config, kernel, original_sha
        self.workdir = Path(workdir)
        self.policy = policy or COLD_L2_EVENTS
        major, minor = torch.cuda.get_device_capability()
        self.arch, self.device_name = f"sm_{major}{minor}", torch.cuda.get_device_name()
        path = self.workdir / "template.py"
        path.write_text(template_source)
        mod_spec = importlib.util.spec_from_file_location("kernelloop_ptx_template", path)
        self.module = importlib.util.module_from_spec(mod_spec)
        sys.modules["kernelloop_ptx_template"] = self.module   # Triton resolves globals through the module
        mod_spec.loader.exec_module(self.module)
        self._overrides: dict[str, PtxOverrides] = {}

    def overrides(self, edited: str) -> PtxOverrides:
        o = self._overrides.get(edited)
        if o is None:
            o = self._overrides[edited] = PtxOverrides(write_files(self.workdir / "ptx", {self.kernel: (self.sha, edited)}))
        return o

    def _call(self, inputs, case: ProofCase):
        from ...core.reference.inputs import alloc_outputs, alloc_scratch
        outputs = alloc_outputs(self.spec, case.workload, "cuda")
        scratch = alloc_scratch(self.spec, case.workload, "cuda")
        return outputs, lambda: self.module.launch(*inputs, *outputs, **scratch, **self.spec.scalars, **self.config)

    def run(self, edited: str | None, case: ProofCase):
        from ...core.reference.inputs import make_inputs
        inputs = make_inputs(self.spec, case.workload, case.seed, "cuda", case.distribution)
        outputs, call = self._call(inputs, case)
        applied = False
        if edited is None:
            call()
        else:
            o = self.overrides(edited)
            before = o.hits[self.kernel]
            with o.installed():
                call()
            applied = o.hits[self.kernel] > before
        torch.cuda.synchronize()
        return [i.cpu() for i in inputs], [t.cpu() for t in outputs], applied

    def time(self, edited: str, case: ProofCase, seed: int):
        from ...core.bench.timer import sample
        from ...core.reference.inputs import make_inputs
        inputs = make_inputs(self.spec, case.workload, case.seed, "cuda", case.distribution)
        _, original = self._call(inputs, case)
        _, edit = self._call(inputs, case)
        o = self.overrides(edited)

        def edited_call():
            with o.installed():
                edit()
        got = sample({"original": original, "edited": edited_call}, self.policy, seed)
        return {k: v["kernel_us"] for k, v in got.items()}, self.policy.name


def prove_isolated(candidate: PtxCandidate, original_ptx: str, *, op_dir: Path, template_source: str, config: dict,
                   cases: list[ProofCase], metadata: dict, original_cubin: bytes | None = None, time_it: bool = True,
                   seed: int = 0, timeout_s: float = 300.0) -> ProofReport:
    """`prove` in a fresh process on the GPU; a process that dies (a device fault) or runs out of time is a
    `crashed` report with the tail of its output."""
    import base64
    with tempfile.TemporaryDirectory(prefix="kernelloop-ptx-prove-") as d:
        job, out = Path(d) / "job.json", Path(d) / "report.json"
        job.write_text(json.dumps({
            "candidate": candidate.model_dump(mode="json"), "original_ptx": original_ptx, "op_dir": str(op_dir),
            "template_source": template_source, "config": config, "metadata": metadata,
            "cases": [c.model_dump(mode="json") for c in cases], "time_it": time_it, "seed": seed,
            "original_cubin_b64": base64.b64encode(original_cubin).decode() if original_cubin else ""}))
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        src = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        t0 = time.perf_counter()
        try:
            res = subprocess.run([sys.executable, "-m", "kernelloop.tune.ptx.prove_child", str(job), str(out), d],
                                 capture_output=True, text=True, timeout=timeout_s, env=env)
            tail, code = (res.stdout + res.stderr)[-3000:], res.returncode
        except subprocess.TimeoutExpired as e:
            tail, code = f"no report within {timeout_s:.0f} s " + str(e.stderr or "")[-2000:], None
        if code == 0 and out.is_file():
            return ProofReport.model_validate_json(out.read_text())
        return ProofReport(candidate_id=candidate.id, parent_candidate_id=candidate.parent_candidate_id,
                           kernel=candidate.kernel, rule=candidate.rule, executor=TritonOverrideExecutor.name,
                           stage="differential", verdict="crashed",
                           message=f"the proof process {'timed out' if code is None else f'exited with {code}'} "
                                   f"after {time.perf_counter() - t0:.0f} s: {tail}")
