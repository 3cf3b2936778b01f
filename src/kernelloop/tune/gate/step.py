"""The static gate as steps of a build stage: `run(job, context)` over a job with `.candidate` and `.workload`,
answering with `outcome`, `note`, `verdict`, `failure`, `artifact` and `cubins` (the fields a build stage reads of a
step's result). A rejection is a REJECTED verdict naming the schedule field: the trial ends before any GPU work.

    steps = [StaticRules(), StaticGate(), ...]                    # no compile in the stage: the schedule's checks
    gate = StaticGate(compiled=True)                               # a compile step follows in the stage:
    steps = [StaticRules(), gate, TritonCompile(...), gate.build_check]   # ... and its build is checked after it
    gate = StaticGate(build=True)                                  # or: build ahead of time itself and check that

With `compiled`, a schedule's checks still come first (a rejected schedule is never compiled); the decision waits on
the job (`job.gate_decision`) for `build_check`, which completes it with the compile step's build
(`job.sm_build`, a `kernelloop.core.build.aot.BuildOutcome`): registers, spills, shared memory and occupancy against the
device's limits and the declared budget. When the compile ends the job first (a compile error), `settle` still
decides, so the decision is kept whatever happened to the candidate.

Every decision is kept (`drain()`) for the controller to archive (kernelloop.tune.gate.archive.record_decision), so the
gate's precision can be measured against the GPU verdicts; with `enforce=False` nothing is rejected, only recorded.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ...base.records.device import DeviceProperties
from ...base.records import Status, Verdict
from .check import gate_candidate, gate_schedule, with_build
from ...base.records.gate import GateDecision

NO_BUILD = "no sm_90 build in this stage: only the schedule's own checks"


@dataclass
class GateResult:
    outcome: str = "passed"
    note: str = ""
    verdict: Verdict | None = None
    failure: object = None
    artifact: object = None
    cubins: list[str] = field(default_factory=list)
    decision: GateDecision | None = None


class StaticGate:
    """The static gate before the GPU. By itself, only candidates lowered from a schedule are checked (their
    protocol and footprint, no compiler run; `no_build` says why in the decision); with `compiled`, a compile step
    of the same stage follows and `build_check` checks every candidate's build; with `build`, the gate builds every
    candidate ahead of time for sm_90 itself and checks that build."""

    name = "static gate"

    def __init__(self, *, build: bool = False, compiled: bool = False, enforce: bool = True,
                 limits: DeviceProperties | None = None, target: str = "sm_90", no_build: str = NO_BUILD):
        self.build, self.compiled, self.enforce, self.limits = build, compiled, enforce, limits
        self.target, self.no_build = target, no_build
        self.build_check = GateBuildCheck(self)
        self._decisions: list[GateDecision] = []
        self._lock = threading.Lock()

    def run(self, job, context) -> GateResult:
        cand, w = job.candidate, job.workload
        if self.build:
            return self.decide(gate_candidate(cand, context.spec, w, limits=self.limits), w)
        decision = gate_schedule(cand, workload=w, limits=self.limits, enforced=self.enforce)
        if decision.passed and self.compiled:
            job.gate_decision = decision   # completed by build_check once the compile step has built it
            return GateResult("passed", ("the schedule's checks pass; " if decision.schedule else "")
                              + f"the {self.target} build is checked after the compile")
        if decision.schedule is None:
            return GateResult("skipped", "not lowered from a schedule")
        return self.decide(decision.model_copy(update={"note": "" if self.compiled else self.no_build}), w)

    def decide(self, decision: GateDecision, workload) -> GateResult:
        """Keep `decision` for the controller; REJECTED (when enforced) naming the field."""
        decision = decision.model_copy(update={"enforced": self.enforce})
        with self._lock:
            self._decisions.append(decision)
        if decision.passed or not self.enforce:
            return GateResult("passed" if decision.passed else "recorded", decision.message()[:500],
                              decision=decision)
        verdict = Verdict(status=Status.REJECTED, message=f"static-gate: {decision.message()}"[:2000],
                          case=f"{workload.label}: static gate, before the GPU",
                          log=decision.model_dump_json(indent=1))
        return GateResult("rejected", decision.message()[:500], verdict=verdict, decision=decision)

    def drain(self) -> list[GateDecision]:
        """The decisions made since the last drain."""
        with self._lock:
            out, self._decisions = self._decisions, []
        return out


class GateBuildCheck:
    """The gate's second step, after the stage's compile: the decision waiting on the job completed with the
    build the compile step left there (`job.sm_build`)."""

    name = "static gate: build"

    def __init__(self, gate: StaticGate):
        self.gate = gate

    def run(self, job, context) -> GateResult:
        from ...core.build.aot import BUILT, COMPILE_ERROR
        pending = getattr(job, "gate_decision", None)
        if pending is None:
            return GateResult("skipped", "no decision of the gate waits on this job")
        job.gate_decision = None
        built = getattr(job, "sm_build", None)
        if built is not None and built.status in (BUILT, COMPILE_ERROR):
            decision = with_build(pending, built, self.gate.limits, self.gate.target)
        elif pending.schedule is None:
            return GateResult("skipped", f"no {self.gate.target} build to check"
                              + (f" ({built.status}: {built.error[:200]})" if built is not None else ""))
        else:
            why = f"{built.status}: {built.error[:300]}" if built is not None else "the compile step made none"
            decision = pending.model_copy(update={"note": f"no {self.gate.target} build ({why}): only the "
                                                          f"schedule's own checks"})
        return self.gate.decide(decision, job.workload)

    def settle(self, job) -> None:
        """After the job's steps, however they ended: a decision still waiting (the compile ended the job before
        this step) is made from what the compile left, and kept."""
        if getattr(job, "gate_decision", None) is not None:
            self.run(job, None)


__all__ = ["GateBuildCheck", "GateResult", "NO_BUILD", "StaticGate"]
