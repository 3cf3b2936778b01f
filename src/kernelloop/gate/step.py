"""The static gate as a step of a build stage: `run(job, context)` over a job with `.candidate` and `.workload`,
answering with `outcome`, `note`, `verdict`, `failure`, `artifact` and `cubins` (the fields a build stage reads of a
step's result). A rejection is a REJECTED verdict naming the schedule field: the trial ends before any GPU work.

    steps = [StaticRules(), StaticGate(), TritonCompile(...)]   # the gate's checks of a schedule need no build
    gate = StaticGate(build=True)                                  # or: build ahead of time for sm_90 and check that

Every decision is kept (`drain()`) for the controller to archive (kernelloop.gate.archive.record_decision), so the
gate's precision can be measured against the GPU verdicts; with `enforce=False` nothing is rejected, only recorded.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..records import Status, Verdict
from .check import gate, gate_candidate
from .records import GateDecision


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
    """The static gate before the GPU. Without `build`, only candidates lowered from a schedule are checked (their
    protocol and footprint, no compiler run); with `build`, every candidate is built ahead of time for sm_90 and its
    build checked against the device and its declared budget."""

    name = "static gate"

    def __init__(self, *, build: bool = False, enforce: bool = True, limits: dict | None = None):
        self.build, self.enforce, self.limits = build, enforce, limits
        self._decisions: list[GateDecision] = []
        self._lock = threading.Lock()

    def run(self, job, context) -> GateResult:
        cand, w = job.candidate, job.workload
        if self.build:
            decision = gate_candidate(cand, context.spec, w, limits=self.limits)
        else:
            decision = gate(cand, None, workload=w, limits=self.limits)
            if decision.schedule is None:
                return GateResult("skipped", "not lowered from a schedule")
        decision = decision.model_copy(update={"enforced": self.enforce})
        with self._lock:
            self._decisions.append(decision)
        if decision.passed or not self.enforce:
            return GateResult("passed" if decision.passed else "recorded", decision.message()[:500],
                              decision=decision)
        verdict = Verdict(status=Status.REJECTED, message=f"static-gate: {decision.message()}"[:2000],
                          case=f"{w.label}: static gate, before the GPU",
                          log=decision.model_dump_json(indent=1))
        return GateResult("rejected", decision.message()[:500], verdict=verdict, decision=decision)

    def drain(self) -> list[GateDecision]:
        """The decisions made since the last drain."""
        with self._lock:
            out, self._decisions = self._decisions, []
        return out


__all__ = ["GateResult", "StaticGate"]
