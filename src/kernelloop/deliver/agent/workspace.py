"""`kernelloop agent init`: a workspace for an outside coding agent.

    DIR/
      kernelloop-workspace.json  the workspace manifest: op folder, sha256 of its files, workloads, device, checks
      README.md                  what the agent may do and how to submit
      interface.json             launch signature, tensor shapes and dtypes per workload, rules, template params
      proposal.schema.json       JSON Schema of a KernelProposal (for `kernelloop submit proposal.json`)
      answer.schema.json         JSON Schema of `submit`'s answer (SubmitAnswer)
      status.schema.json         JSON Schema of `agent status` (WorkspaceStatus)
      baseline.json              baseline figures from a run archive, or "not measured"
      reference/                 copies for reading: spec.toml, the reference, the starting templates
      .kernelloop/run-<device>/  the run archive, created by the first submit

Evaluation never reads the copies: it loads the op folder named in the manifest and refuses to run when any
of its files' hashes differ from those recorded at init; once the first submit created the run, the run's
frozen manifest (reference, verifier, timer, policy, environment) pins them again on every submit.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ...base.records import Workload, sha256_hex
from ...core.spec import OpBundle, load_op
from ...base.records.device import Device, DeviceKind
from ...tune.propose.interface import op_interface, template_params
from .answer import answer_schema
from .status_records import BaselineBest, BaselineTimes, BaselineWorkload, Measured, NotMeasured, status_schema

MANIFEST = "kernelloop-workspace.json"
SCHEMA = 1


class WorkspaceError(RuntimeError):
    """No workspace, a malformed one, or an op folder that changed since `agent init`."""


def _op_files(bundle: OpBundle) -> dict[str, str]:
    """sha256 of every file of the op folder that a verdict depends on (with the specs its spec.toml extends, as
    paths relative to the folder)."""
    names = [*bundle.spec_file_names(), bundle.spec.reference, *[t.file for t in bundle.spec.templates]]
    if (bundle.folder / "baselines.py").is_file():
        names.append("baselines.py")
    return {n: sha256_hex((bundle.folder / n).read_bytes()) for n in dict.fromkeys(names)}


@dataclass(frozen=True)
class Workspace:
    """A loaded workspace manifest."""

    root: Path
    data: dict

    @classmethod
    def load(cls, root: str | Path) -> "Workspace":
        root = Path(root).resolve()
        path = root / MANIFEST
        if not path.is_file():
            raise WorkspaceError(f"{root} is not a kernelloop workspace (no {MANIFEST}; run `kernelloop agent init`)")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise WorkspaceError(f"{path}: not valid JSON: {e}") from None
        if data.get("schema") != SCHEMA:
            raise WorkspaceError(f"{path}: workspace schema {data.get('schema')!r}, this kernelloop reads {SCHEMA}")
        return cls(root, data)

    @property
    def op_dir(self) -> Path:
        return Path(self.data["op_dir"])

    @property
    def device(self) -> str:
        return self.data["device"]

    @property
    def checks(self) -> int:
        return int(self.data["checks"])

    @property
    def workloads(self) -> list[Workload]:
        return [Workload.model_validate(w) for w in self.data["workloads"]]

    def run_dir(self, device: str | None = None) -> Path:
        """The run folder of a device (one archive per device: a run's manifest freezes its environment)."""
        return self.root / ".kernelloop" / f"run-{device or self.device}"

    def bundle(self) -> OpBundle:
        """The op, loaded from the folder the manifest names, after checking every recorded hash."""
        try:
            bundle = load_op(self.op_dir)
        except Exception as e:  # noqa: BLE001 - any failure to load is a refusal to evaluate
            raise WorkspaceError(f"cannot load the op folder {self.op_dir}: {e}") from None
        now = _op_files(bundle)
        recorded = self.data["op_files"]
        changed = sorted(n for n in set(now) | set(recorded) if now.get(n) != recorded.get(n))
        if changed:
            raise WorkspaceError(f"the op folder {self.op_dir} changed since `agent init` ({', '.join(changed)}); "
                                 f"results are only comparable under one reference and verifier: init a new workspace")
        return bundle


def baseline_figures(run: str | Path | None) -> NotMeasured | Measured:
    """Best trial and confirmed baselines per workload from a run archive; 'not measured' without one (the record
    baseline.json holds: deliver/agent/status_records.py)."""
    if run is None:
        return NotMeasured(status="not measured", note="no run archive was given to `agent init --run`")
    from ...core.archive import Archive
    from ..report.summary import run_summary
    path = Path(run)
    path = path / "archive.sqlite" if path.is_dir() else path
    if not path.is_file():
        raise WorkspaceError(f"no run archive at {path}")
    with Archive(path) as archive:
        s = run_summary(archive)
    figures = []
    for w in s.workloads:
        entry = {"workload": w.label, "id": w.id}
        if w.best is not None:
            entry["best"] = BaselineBest(candidate=w.best.candidate, label=w.best.label,
                                         kernel_us=w.best.search.kernel_us, call_us=w.best.search.call_us)
        if w.confirmed is not None:
            entry["baselines"] = {n: BaselineTimes(**{k: v for k, v in (("kernel_us", b.kernel_us),
                                                                        ("call_us", b.call_us)) if v is not None})
                                  for n, b in w.confirmed.baselines.items()}
        figures.append(BaselineWorkload(**entry))
    return Measured(status="measured", run=s.run, source=str(path), device=s.device, gpu=s.gpu,
                    interpreter=s.interpreter, workloads=figures)


README = """# kernelloop workspace: {op}

Write a faster Triton kernel for `{op}`; kernelloop judges it. Read `interface.json` (the launch signature, the
tensor shapes and dtypes of every workload, the rules) and, for reading only, `core/reference/` (the spec, the
reference and the starting templates). `baseline.json` holds the figures to beat.

Submit a kernel module (its `launch` must match `{launch}`; the configuration arrives as keyword arguments):

    kernelloop submit my_kernel.py --workspace {root} [--config '{{"BLOCK": 1024}}'] [--parent CANDIDATE_ID] \\
        [--hypothesis "registers down; latency_us down -10%"]

Several configurations of one module in one submission (every combination, at most 16; `--config` holds the
keys that stay fixed):

    kernelloop submit my_kernel.py --workspace {root} --space '{{"BLOCK": [512, 1024], "num_warps": [4, 8]}}'

or a proposal (JSON matching `proposal.schema.json`, full source or a unified diff against a parent, with its
own `config` or `space`):

    kernelloop submit proposal.json --workspace {root}

A module is judged as it is: a `launch` that rejects a configuration key fails at run time, archived as such.
`--workspace` defaults to the current folder. On CUDA each passing trial is also profiled with Nsight Compute
when `ncu` is installed (`--no-profile` skips it); `--confirm` re-measures each workload's best beside the
baselines (eager, torch.compile, the op's library kernels, a device copy of the same bytes).

Every submission is compiled, verified against the reference on fresh inputs and held-out shapes you are not
shown, timed beside eager PyTorch when it passes, and archived with its lineage. The answer is JSON: the
verdict per workload with its evidence (failing case, error metrics, log tail) or the measurement; a failure on a
held-out case is named by its class only (e.g. "a held-out smaller M"), never by its shape.
`kernelloop agent status --workspace {root}` shows the front. The same operations are MCP tools
(`kernelloop mcp --workspace {root}`).

Device: {device}. {device_note}
"""


def init_workspace(spec: str | Path, out: str | Path, *, workloads_file: str | Path | None = None,
                   run: str | Path | None = None, device: str | None = None, checks: int = 2) -> Workspace:
    """Create the workspace folder `out` for the op at `spec` (folder or spec.toml)."""
    from ..api import default_workloads
    from ...core.device import cuda_available
    from ...core.spec import load_workloads
    from ...tune.propose.proposal import proposal_json_schema

    bundle = load_op(spec)
    device = str(Device.of(device or (DeviceKind.CUDA if cuda_available() else DeviceKind.INTERPRET)).kind_only)
    wl_file = Path(workloads_file) if workloads_file else default_workloads(bundle.folder, device)
    workloads = load_workloads(wl_file, bundle.spec)
    root = Path(out).resolve()
    if (root / MANIFEST).exists():
        raise WorkspaceError(f"{root} already is a workspace; choose another --out")
    baseline = baseline_figures(run)
    root.mkdir(parents=True, exist_ok=True)
    ref = root / "reference"
    ref.mkdir(exist_ok=True)
    for name in _op_files(bundle):
        target = ref / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bundle.folder / name, target)
        target.chmod(0o444)
    iface = {**op_interface(bundle.spec, workloads), "templates": template_params(bundle.spec)}
    (root / "interface.json").write_text(json.dumps(iface, indent=2) + "\n")
    for name, schema in (("proposal", proposal_json_schema()), ("answer", answer_schema()), ("status", status_schema())):
        (root / f"{name}.schema.json").write_text(json.dumps(schema, indent=2) + "\n")
    (root / "baseline.json").write_text(json.dumps(baseline.model_dump(mode="json"), indent=2) + "\n")
    note = ("Without a GPU kernels run in the Triton interpreter on CPU tensors: verdicts are real, timings are "
            "interpreter wall clock, not kernel performance." if not Device.of(device).is_cuda else "")
    (root / "README.md").write_text(README.format(op=bundle.spec.name, launch=iface["launch"], root=root,
                                                  device=device, device_note=note))
    data = {"schema": SCHEMA, "op": bundle.spec.name, "op_dir": str(bundle.folder.resolve()),
            "op_files": _op_files(bundle), "workloads_file": str(wl_file.resolve()),
            "workloads": [w.model_dump(mode="json") for w in workloads], "device": device, "checks": checks,
            "baseline": baseline.run if isinstance(baseline, Measured) else None, "created": time.time()}
    (root / MANIFEST).write_text(json.dumps(data, indent=2) + "\n")
    return Workspace(root, data)


__all__ = ["MANIFEST", "Workspace", "WorkspaceError", "baseline_figures", "init_workspace"]
