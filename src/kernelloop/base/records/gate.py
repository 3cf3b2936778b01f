"""The static gate's records (tune/gate): what it found, what it decided (archived as `gate` events) and the budget
a candidate declares."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Record

Check = Literal["schedule", "lowering", "protocol", "resources", "build", "shared", "threads", "registers", "spills",
                "occupancy"]
Checked = Literal["schedule", "build", "schedule and build"]


class Budget(Record):
    """What a candidate declares it needs (a schedule declares it by its fields; a template may be given one)."""

    registers: int | None = Field(None, description="Registers per thread the build may use at most.")
    shared_bytes: int | None = Field(None, description="Shared memory per program the build may use at most.")
    spills: bool = Field(True, description="Whether spills (local memory) are acceptable.")
    ctas_per_sm: int = Field(1, ge=1, description="Programs an SM must be able to hold at once.")
    field: str = Field("", description="The schedule field the register and spill budget comes from ('' none).")


class GateFinding(Record):
    check: Check
    field: str = Field("", description="The schedule field to change ('' for a candidate without a schedule).")
    message: str


class GateResources(Record):
    """The ahead-of-time build's resources (max over its kernels) and the occupancy they allow."""

    registers: int | None = None
    spills: bool | None = None
    shared_bytes: int | None = None
    threads: int | None = None
    ctas_per_sm: int | None = None


class GateDecision(Record):
    """The gate's decision on one candidate for one workload, before any GPU work."""

    candidate_id: str
    workload_id: str
    template: str
    passed: bool
    findings: list[GateFinding] = Field(default_factory=list)
    resources: GateResources = Field(default_factory=GateResources)
    schedule: str | None = Field(None, description="The name of the schedule the candidate was lowered from.")
    build_status: str = Field("", description="The ahead-of-time build's status ('' when none was given).")
    target: str = Field("sm_90", description="What the build was for.")
    checked: Checked = Field("schedule", description="What the decision rests on: the schedule's own checks, the "
                                                     "sm_90 build's, or both.")
    note: str = Field("", description="Why a check was not made (e.g. an interpreter run has no sm_90 build).")
    budget: Budget | None = Field(None, description="The budget the build was (or is to be) held to.")
    enforced: bool = Field(True, description="False when the decision is only recorded (audit mode): the candidate "
                                             "ran anyway, so a rejection can be compared with its GPU verdict.")

    @property
    def first(self) -> GateFinding | None:
        return self.findings[0] if self.findings else None

    def message(self) -> str:
        """One paragraph for a verdict or a proposer: every finding with its field."""
        return "; ".join(f"{f.field + ': ' if f.field else ''}{f.message}" for f in self.findings) or "passed"


__all__ = ["Budget", "Check", "Checked", "GateDecision", "GateFinding", "GateResources"]
