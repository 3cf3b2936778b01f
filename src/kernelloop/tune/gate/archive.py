"""The gate's decisions in a run's archive (events of kind 'gate'), and its precision against GPU verdicts.

A decision is archived whether the candidate then runs or not. Precision needs both sides:
- passed by the gate, then not PASSED on the GPU: what the gate let through (by verdict status);
- rejected by the gate, yet PASSED on the GPU: only measurable for decisions recorded in audit mode
  (`enforced=False`: the candidate ran anyway).
"""

from __future__ import annotations

from collections import Counter

from pydantic import Field, computed_field

from ...base.records.base import Record
from ...base.records.events import GateEvent
from ...base.records.gate import GateDecision

KIND = GateEvent.model_fields["kind"].default


def record_decision(archive, run_id: str, decision: GateDecision) -> None:
    archive.log_event(run_id, GateEvent(payload=decision))


def decisions(archive, run_id: str) -> list[GateDecision]:
    """The run's decisions as archived (a payload that is no `GateDecision` raises ValidationError)."""
    return [GateDecision.model_validate(e.payload) for e in archive.event_records(run_id, KIND)]


class GatePrecision(Record):
    """The gate's decisions of a run against the GPU verdicts of the same (candidate, workload)."""

    decisions: int
    passed: int
    rejected: int
    passed_and_ran: int = Field(description="Passed decisions with a GPU trial.")
    passed_then_failed: dict[str, int] = Field(default_factory=dict,
                                               description="Passed, then a GPU verdict other than PASSED (by status).")
    rejected_and_ran: int = Field(0, description="Rejected in audit mode, with a GPU trial.")
    rejected_yet_passed: int = Field(0, description="Rejected in audit mode, yet PASSED on the GPU.")
    rejections_by_check: dict[str, int] = Field(default_factory=dict)

    @computed_field
    @property
    def pass_precision(self) -> float | None:
        """Of the passed candidates that ran, the fraction that passed on the GPU."""
        if not self.passed_and_ran:
            return None
        return 1 - sum(self.passed_then_failed.values()) / self.passed_and_ran

    @computed_field
    @property
    def reject_precision(self) -> float | None:
        """Of the rejected candidates that ran (audit), the fraction that failed on the GPU."""
        if not self.rejected_and_ran:
            return None
        return 1 - self.rejected_yet_passed / self.rejected_and_ran


def precision(archive, run_id: str) -> GatePrecision:
    """The run's decisions (the last one of each (candidate, workload): a resumed run may have decided again on a
    candidate whose trial an interruption lost) against its trials' verdicts."""
    ds = list({(d.candidate_id, d.workload_id): d for d in decisions(archive, run_id)}.values())
    verdicts = {(t.candidate_id, t.workload_id): t.verdict.status.value for t in archive.trials(run_id)}
    failed: Counter = Counter()
    by_check: Counter = Counter()
    ran_ok = ran_rej = yet_passed = 0
    for d in ds:
        v = verdicts.get((d.candidate_id, d.workload_id))
        if d.passed:
            if v is not None:
                ran_ok += 1
                if v != "PASSED":
                    failed[v] += 1
        else:
            by_check[d.first.check] += 1
            if v is not None and not d.enforced:
                ran_rej += 1
                yet_passed += v == "PASSED"
    return GatePrecision(decisions=len(ds), passed=sum(d.passed for d in ds), rejected=sum(not d.passed for d in ds),
                         passed_and_ran=ran_ok, passed_then_failed=dict(failed), rejected_and_ran=ran_rej,
                         rejected_yet_passed=yet_passed, rejections_by_check=dict(by_check))


__all__ = ["GatePrecision", "KIND", "decisions", "precision", "record_decision"]
