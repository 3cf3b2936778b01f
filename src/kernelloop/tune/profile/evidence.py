"""Evidence about an evaluated trial, for proposers that plan from it (the rule planner).

After a PASSED trial whose proposer asks for evidence, the controller hands an `EvidenceSource` the trial, its
candidate and what the proposer predicted (`EvidenceRequest`: hypotheses, cited knowledge entries, the parent
candidate). The source builds a `ProfileReport`, archives it next to the trial and returns it; the controller
passes the report back to the proposer. The report carries the hypotheses and their outcomes against the
parent's archived observations, so the archive records whether each prediction held.

Sources:
- `NcuEvidence`: Nsight Compute on the candidate (`profile_trial`; CUDA and `ncu` only), kernel filter from
  the build's JIT kernel names, a deadline; a failed profile still archives a report that says why;
- `TimingEvidence`: no profiler, the report is built from the timing alone (roofline under the measured
  ceilings of the device when cached, else the device copy of the same bytes timed beside the trial);
  conditions that need profile metrics are then not evaluable and the planner explores.

`default_evidence(device)` picks ncu on CUDA when it is found, else timing.
"""

from __future__ import annotations

from ...base.records.device import Device

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ...base.records import (BuildArtifact, BuildResources, Candidate, Hypothesis, KernelProfile, ProfileReport, Trial,
                       Workload)
from .hypothesis import Observation, observations
from .report import make_report
from ...base import pyast


@dataclass(frozen=True)
class EvidenceRequest:
    """What a proposer predicted for a candidate: evaluated against the parent when evidence comes in."""

    hypotheses: tuple[Hypothesis, ...] = ()
    cites: tuple[str, ...] = ()
    parent_id: str | None = None   # candidate id of the parent (on the same workload), None for a root


@dataclass
class EvidenceContext:
    """Everything a source may use about one trial. `archive` is the run's Archive."""

    archive: Any
    run_id: str
    run_dir: Path
    op_dir: Path
    spec: Any                      # OpSpec
    device: str
    environment: dict
    workload: Workload
    candidate: Candidate
    trial: Trial
    request: EvidenceRequest = field(default_factory=EvidenceRequest)


class EvidenceSource(Protocol):
    name: str

    def collect(self, ctx: EvidenceContext) -> ProfileReport:
        """Build, archive and return the trial's report."""


# -- what every source needs -------------------------------------------------------------------------------

def bench_seed(run: dict, workload: Workload, candidate_id: str, run_id: str = "") -> int:
    """The seed the run timed the candidate (and the baselines) with (`Evaluator.bench`), so a profile sees the
    inputs the timer saw (while timing, the worker also cycled refreshed inputs behind the same buffers; values
    do not change the work these ops do). Without the run's secret: a seed of its own."""
    from ...core.execute.evaluate import derive_seed
    secret = (run.get("options") or {}).get("secret")
    if secret is None:
        return derive_seed("profile", run.get("id", run_id), workload.id, candidate_id)
    return derive_seed(secret, "bench", workload.id, candidate_id)


def build_resources(trial: Trial) -> BuildResources | None:
    """Registers, spills and shared memory of the trial's build (Triton counters), when the build has any."""
    b = trial.build
    if isinstance(b, BuildArtifact) and any(v is not None for v in (b.registers, b.spills, b.shared_bytes)):
        return BuildResources(kernel=",".join(b.kernel_names), registers=b.registers, spills=b.spills,
                              shared_bytes=b.shared_bytes, source="trial build artifact (Triton counters)")
    return None


def roofs(ctx: EvidenceContext) -> tuple[Any, float | None, list[str]]:
    """(ceilings, copy µs, notes): the measured ceilings of the run's device when cached (CUDA), and the copy
    of the same bytes — the run's confirmed copy baseline, else the copy timed beside this trial."""
    notes: list[str] = []
    ceilings = None
    env = ctx.environment
    if Device.of(ctx.device).is_cuda and env.get("gpu"):
        from .ceilings import CeilingsCacheError, cached_ceilings
        try:
            ceilings = cached_ceilings(env["gpu"], env.get("driver", ""), env.get("torch", ""))
        except CeilingsCacheError as e:
            notes.append(f"ceilings cache unreadable: {e}")
    copy_us = None
    copy = ctx.archive.baselines(ctx.run_id, ctx.workload.id).get("copy", (None, ""))[0]
    if copy is not None:
        copy_us = copy.kernel.median_us
    else:
        m = ctx.trial.measurement
        if m is not None and m.roofline_fraction:
            copy_us = m.roofline_fraction * m.kernel.median_us   # the copy subject timed in the trial's rounds
    return ceilings, copy_us, notes


def parent_observations(archive, run_id: str, parent_id: str | None,
                        workload_id: str) -> tuple[dict[str, Observation] | None, str]:
    """(observations, parent trial id) of the parent's trial on the workload: its archived report, timing and
    build; (None, '') when there is no parent or it has no trial."""
    if not parent_id:
        return None, ""
    pt = archive.find_trial(run_id, parent_id, workload_id)
    if pt is None:
        return None, ""
    return observations(archive.profile(run_id, pt.id), pt.measurement, build_resources(pt)), pt.id


def kernel_regex(candidate: Candidate, trial: Trial) -> str | None:
    """A regex for the candidate's kernels: the build's JIT kernel names, else the @triton.jit functions of
    the source; None when neither names any."""
    names: list[str] = []
    if isinstance(trial.build, BuildArtifact):
        names = [n for n in trial.build.kernel_names if n]
    if not names:
        try:
            tree = pyast.parse(candidate.source)
        except SyntaxError:
            tree = None
        for node in (tree.body if tree is not None else []):
            if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
                names.append(node.name)
    names = list(dict.fromkeys(names))
    return "|".join(re.escape(n) for n in names) or None


def report_for(ctx: EvidenceContext, *, kernel: KernelProfile | None = None, notes: list[str] | None = None,
               artifact: str = "", command: list[str] | None = None) -> ProfileReport:
    """The trial's report from what is known (a kernel profile or none), archived; outcomes of the request's
    hypotheses against the parent's observations when there is a parent."""
    ceilings, copy_us, more = roofs(ctx)
    parent, parent_trial = parent_observations(ctx.archive, ctx.run_id, ctx.request.parent_id, ctx.workload.id)
    notes = [*(notes or []), *more]
    if ctx.request.hypotheses and parent is None:
        notes.append("no parent trial on this workload: hypotheses cannot be evaluated")
    elif parent_trial:
        notes.append(f"parent trial {parent_trial}")
    report = make_report(ctx.trial, ctx.spec, ctx.workload, kernel=kernel, build=build_resources(ctx.trial),
                         ceilings=ceilings, copy_us=copy_us, hypotheses=list(ctx.request.hypotheses), parent=parent,
                         cites=list(ctx.request.cites), artifact=artifact, command=command, notes=notes)
    ctx.archive.put_profile(ctx.run_id, ctx.trial.id, report)
    return report


# -- sources -----------------------------------------------------------------------------------------------

class TimingEvidence:
    """A report from the timing alone: roofline position, build resources, hypotheses on latency."""

    name = "timing"

    def __init__(self, reason: str = ""):
        self.reason = reason

    def collect(self, ctx: EvidenceContext) -> ProfileReport:
        why = f": {self.reason}" if self.reason else ""
        return report_for(ctx, notes=[f"timing only, no Nsight Compute profile{why}"])


class NcuEvidence:
    """Nsight Compute on the trial's candidate (`profile_trial`), with the request's hypotheses and parent."""

    name = "ncu"

    def __init__(self, timeout_s: float = 300.0, ncu: str | None = None):
        self.timeout_s = timeout_s
        self.ncu = ncu

    def collect(self, ctx: EvidenceContext) -> ProfileReport:
        from .report import profile_trial
        src = ctx.run_dir / "sources" / f"{ctx.candidate.id}.py"
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(ctx.candidate.source)
        ceilings, copy_us, _ = roofs(ctx)
        parent, _ = parent_observations(ctx.archive, ctx.run_id, ctx.request.parent_id, ctx.workload.id)
        return profile_trial(ctx.archive, ctx.run_dir, ctx.trial, op_dir=ctx.op_dir, source_file=src,
                             config=ctx.candidate.config, workload=ctx.workload, spec=ctx.spec,
                             seed=bench_seed(next((r for r in ctx.archive.runs() if r["id"] == ctx.run_id), {}),
                                             ctx.workload, ctx.candidate.id, ctx.run_id),
                             kernel_regex=kernel_regex(ctx.candidate, ctx.trial),
                             build=build_resources(ctx.trial), ceilings=ceilings, copy_us=copy_us,
                             hypotheses=list(ctx.request.hypotheses), parent=parent, cites=list(ctx.request.cites),
                             timeout_s=self.timeout_s)


def default_evidence(device, timeout_s: float = 300.0) -> EvidenceSource:
    """Nsight Compute on CUDA when `ncu` is found; otherwise timing-only reports (saying why)."""
    if not Device.of(device).is_cuda:
        return TimingEvidence("the Triton interpreter cannot be profiled")
    from .ncu_report_adapter import find_ncu
    if find_ncu() is None:
        return TimingEvidence("ncu not found ($KERNELLOOP_NCU, PATH)")
    return NcuEvidence(timeout_s)


def outcome_counts(report: ProfileReport | None) -> dict[str, int]:
    """{'confirmed', 'refuted', 'inconclusive'} counts of a report's hypothesis outcomes."""
    out = {"confirmed": 0, "refuted": 0, "inconclusive": 0}
    for o in (report.outcomes if report is not None else []):
        out[o.status] += 1
    return out


__all__ = ["EvidenceContext", "EvidenceRequest", "EvidenceSource", "NcuEvidence", "TimingEvidence", "bench_seed",
           "build_resources",
           "default_evidence", "kernel_regex", "outcome_counts", "parent_observations", "report_for", "roofs"]
