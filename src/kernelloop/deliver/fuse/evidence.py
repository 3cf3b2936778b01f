"""What a realisation's run showed: per workload the verdict, the kernel time and the speed-ups over the unfused
sequence (the op's eager and torch.compile baselines: the model's own ATen calls, and Inductor's code for them).

On a GPU the numbers are the confirmation's (the best candidate beside the baselines, interleaved, with bootstrap
intervals) when the run confirmed, else the search trial's (also interleaved with the baselines). In Triton's
interpreter nothing about speed is claimed: no times, no speed-ups, `speed` is "not measured".
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from ...base.records import Record, Status
from ...base.records.device import Device
from ...base.records.measurement import Ratio
from .plans import OpPlan

Speed = Literal["FASTER", "SAME", "SLOWER", "not measured"]


class WorkloadEvidence(Record):
    axes: dict[str, int]
    dtype: str
    status: str = Field(description="Verdict of the workload's best trial (PASSED, WRONG_VALUES, ...; NONE: no "
                                    "trial).")
    candidate_id: str | None = None
    kernel_us: float | None = Field(None, description="Kernel median (confirmation's when there was one).")
    kernel_ci_us: list[float] | None = None
    eager_us: float | None = Field(None, description="The unfused sequence, eager: kernel median.")
    compile_us: float | None = Field(None, description="The unfused sequence under torch.compile: kernel median.")
    vs_eager: Ratio | None = None
    vs_compile: Ratio | None = None
    confirmed: bool = Field(False, description="Numbers from the run's confirmation beside the baselines.")


class Evidence(Record):
    """One loop run behind a realisation."""

    run_id: str
    run_dir: str
    device: Device = Field(description="The run's device kind (cuda or interpret), stored as that text.")
    gpu: str = ""
    source: Literal["search", "table"] = Field(description="search: the loop searched the template's space; "
                                                           "table: the pattern table's realisation, re-verified "
                                                           "(one candidate per workload, no search).")
    proposer: str = Field(description="Who proposed the run's candidates ('search:staged', 'pattern-table').")
    trials: int
    workloads: list[WorkloadEvidence]

    @property
    def passed(self) -> bool:
        return bool(self.workloads) and all(w.status == Status.PASSED.value for w in self.workloads)

    @property
    def speed(self) -> Speed:
        """FASTER when every workload is faster than eager, SLOWER when one is slower, SAME otherwise; "not
        measured" in the interpreter or without a comparison."""
        if not self.device.is_cuda or any(w.vs_eager is None for w in self.workloads) or not self.workloads:
            return "not measured"
        verdicts = {w.vs_eager.verdict.value for w in self.workloads}
        if verdicts == {"FASTER"}:
            return "FASTER"
        return "SLOWER" if "SLOWER" in verdicts else "SAME"


class Realisation(Record):
    """A plan realised as an op: its folder, the run, the winning candidate and what it showed."""

    op: str
    folder: str
    pattern: str = Field(description="The pattern table's key.")
    plan: OpPlan
    tolerance_notes: list[str] = Field(default_factory=list)
    candidate_id: str | None = None
    template: str | None = None
    config: dict = Field(default_factory=dict)
    evidence: Evidence | None = None
    table: str = Field("", description="What the pattern table did: 'hit' (re-verified, no search), 'miss: why', "
                                       "'admitted', 'speed not measured', 'not admitted: why', 'evicted: why'.")
    error: str = Field("", description="Why the op could not be realised (nothing else is set then).")

    @property
    def passed(self) -> bool:
        return self.evidence is not None and self.evidence.passed


def from_run(run_dir: Path, source: str) -> Evidence:
    """The evidence of a finished run folder."""
    from ..api import Run
    from ...core.archive import Archive
    run = Run.load(run_dir)
    summary = run.summary()
    trials = {t.id: t for t in run.trials()}
    rows = []
    with Archive(run.path, readonly=True) as archive:
        env = archive.get_run(summary.run)["environment"]
        timed = Device.of_environment(env).is_cuda   # interpreter timings are not kernel performance: not reported
        finals = archive.finals(summary.run)
        for w in summary.workloads:
            mine = [t for t in trials.values() if t.workload_id == w.id]
            if w.best is None:
                rows.append(WorkloadEvidence(axes=dict(w.axes), dtype=w.dtype,
                                             status=mine[-1].verdict.status.value if mine else "NONE"))
                continue
            confirmed = w.id in finals and finals[w.id][0] == w.best.candidate
            m = finals[w.id][1] if confirmed else trials[w.best.trial].measurement
            ratios = {r.baseline: r for r in m.ratios}
            base = archive.baselines(summary.run, w.id) if confirmed else {}

            def median(name: str) -> float | None:
                got = base.get(name)
                if got is not None and got[0] is not None:
                    return got[0].kernel.median_us
                r = ratios.get(name)
                return m.kernel.median_us * r.speedup if r is not None else None
            if not timed:
                rows.append(WorkloadEvidence(axes=dict(w.axes), dtype=w.dtype, status=Status.PASSED.value,
                                             candidate_id=w.best.candidate))
                continue
            rows.append(WorkloadEvidence(
                axes=dict(w.axes), dtype=w.dtype, status=Status.PASSED.value, candidate_id=w.best.candidate,
                kernel_us=m.kernel.median_us, kernel_ci_us=[m.kernel.ci_low_us, m.kernel.ci_high_us],
                eager_us=median("eager"), compile_us=median("torch.compile"), vs_eager=ratios.get("eager"),
                vs_compile=ratios.get("torch.compile"), confirmed=confirmed))
        names = sorted({archive.get_candidate(t.candidate_id).proposer for t in trials.values()})
    return Evidence(run_id=summary.run, run_dir=str(run_dir), device=Device.of_environment(env),
                    gpu=env.get("gpu", ""), source=source, proposer=",".join(names), trials=len(trials),
                    workloads=rows)
