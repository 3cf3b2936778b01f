"""The answer of `kernelloop agent status` and of the MCP tool `status` (`WorkspaceStatus`), and the workspace's
`baseline.json` (`BaselineFile`): records whose JSON (`as_json`) is what agents read. Keys that only some answers
carry (a note before the first submission, the run's integrity, a workload's trial counts and best, its confirmed
best) are present exactly when they were set; the JSON schema (`status_schema()`) is published in docs/agents.md.

    python -m kernelloop.deliver.agent.status_records     # prints the schema docs/agents.md holds
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_serializer

from ...base.records import Record, Status
from ...base.records.integrity import RunIntegrity
from ...base.records.summary import FrontEntry, MeasurementSummary
from .answer import OnlyWhenSet


class BaselineTimes(OnlyWhenSet):
    """A baseline's kernel and call medians (µs); a baseline that could not be measured has only its note in the
    status, and no figure in baseline.json."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("kernel_us", "call_us", "note")
    kernel_us: float | None = None
    call_us: float | None = None
    note: str | None = Field(None, description="Why the baseline has no figures.")


class BaselineBest(Record):
    """The best trial of the run `agent init --run` read."""

    candidate: str
    label: str
    kernel_us: float
    call_us: float


class BaselineWorkload(OnlyWhenSet):
    """One workload's figures to beat: its best trial and the baselines measured beside its confirmed best."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("best", "baselines")
    workload: str = Field(description="The workload's label.")
    id: str
    best: BaselineBest | None = None
    baselines: dict[str, BaselineTimes] | None = None


class NotMeasured(Record):
    """baseline.json of a workspace made without a run archive."""

    status: Literal["not measured"]
    note: str


class Measured(Record):
    """baseline.json of a workspace made with `agent init --run`: the figures of that run."""

    status: Literal["measured"]
    run: str
    source: str = Field(description="The run archive read.")
    device: str | None
    gpu: str | None
    interpreter: bool
    workloads: list[BaselineWorkload]


BaselineFile = Annotated[NotMeasured | Measured, Field(discriminator="status")]


class Lead(Record):
    """A record extending another whose JSON names its own identity first (`LEAD`), as the status always did."""

    LEAD: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _lead(self, handler):
        data = handler(self)
        return {k: data[k] for k in self.LEAD if k in data} | {k: v for k, v in data.items() if k not in self.LEAD}


class FrontCandidate(Lead, FrontEntry):
    """A candidate on the workload's Pareto front, with its lineage and its objectives (every one minimised)."""

    LEAD: ClassVar[tuple[str, ...]] = ("candidate", "label", "proposer", "parent_ids", "hypothesis")

    label: str
    proposer: str
    parent_ids: list[str]
    hypothesis: str


class BestTrial(Lead, MeasurementSummary):
    """The workload's fastest PASSED trial: its candidate, configuration and figures."""

    LEAD: ClassVar[tuple[str, ...]] = ("candidate", "label", "config")

    candidate: str
    label: str
    config: dict[str, Any]


class ConfirmedBest(Lead, MeasurementSummary):
    """After `submit --confirm`: the best re-measured beside every baseline."""

    LEAD: ClassVar[tuple[str, ...]] = ("candidate",)

    candidate: str
    baselines: dict[str, BaselineTimes]


class WorkloadStatus(OnlyWhenSet):
    """One workload: before the first submission only its id, label and an empty front."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("trials", "passed", "best", "confirmed")
    id: str
    label: str
    trials: int | None = None
    passed: int | None = None
    front: list[FrontCandidate]
    best: BestTrial | None = Field(None, description="None while no trial PASSED.")
    confirmed: ConfirmedBest | None = None


class RecentTrial(Record):
    """A recent submission's verdict, as a proposer may see it (a held-out case by its class only)."""

    trial: str
    index: int
    candidate: str
    workload_id: str
    status: Status
    message: str = Field(description="The verdict's message, cut at 200 characters.")
    proposer: str
    kernel_us: float | None


class WorkspaceStatus(OnlyWhenSet):
    """The workspace's run: the figures to beat, counts by verdict, per workload the front, best and confirmed best,
    and the most recent submissions, newest first."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("note", "integrity")
    workspace: str
    op: str
    device: str
    interpreter: bool
    baseline: BaselineFile
    run: str | None = Field(description="The run id; None before the first submission.")
    counts: dict[str, int] = Field(description="Trials per verdict status.")
    workloads: list[WorkloadStatus]
    recent: list[RecentTrial]
    note: str | None = Field(None, description="Before the first submission: 'nothing submitted yet'.")
    integrity: RunIntegrity | None = Field(None, description="Whether the run's rows carry good MACs; edited rows "
                                                             "are TAMPERED, never PASSED or best.")

    def as_json(self) -> dict[str, Any]:
        """The status as the JSON agents read (what `kernelloop agent status` prints and the MCP tool returns)."""
        return self.model_dump(mode="json")


def status_schema() -> dict[str, Any]:
    """The JSON schema of the status (docs/agents.md publishes it)."""
    return WorkspaceStatus.model_json_schema(mode="serialization")


__all__ = ["BaselineBest", "BaselineFile", "BaselineTimes", "BaselineWorkload", "BestTrial", "ConfirmedBest",
           "FrontCandidate", "Measured", "NotMeasured", "RecentTrial", "WorkloadStatus", "WorkspaceStatus",
           "status_schema"]


if __name__ == "__main__":
    print(json.dumps(status_schema(), indent=2))
