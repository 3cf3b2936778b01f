"""The answer of `kernelloop submit` and of the MCP tools `submit_kernel` / `submit_proposal` (`SubmitAnswer`): one
record whose JSON (`as_json`) is what agents read. Keys that only some answers carry (a failure's evidence, the best
on the workload, parents, the profile on CUDA, a rejected candidate's static rule hits) are present exactly when
they were set; the JSON schema (`answer_schema()`) is published in docs/agents.md.

    python -m kernelloop.deliver.agent.answer      # prints the schema docs/agents.md holds
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import Field, model_serializer

from ...base.records import Costs, Record, Status
from ...base.records.build import BuildArtifact, BuildFailure
from ...base.records.profile import ProfileReport
from ...base.records.summary import MeasurementSummary
from ...base.records.verdict import ErrorMetrics


class OnlyWhenSet(Record):
    """A record whose OPTIONAL fields appear in its JSON only when they were set."""

    @model_serializer(mode="wrap")
    def _present(self, handler):
        data = handler(self)
        optional = getattr(type(self), "OPTIONAL", ())
        return {k: v for k, v in data.items() if k not in optional or k in self.model_fields_set}


class StaticRuleHit(OnlyWhenSet):
    """One static rule a candidate's source breaks."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("detail",)
    rule: str
    line: int | None = Field(description="Line of the source (1-based), when the rule points at one.")
    source: str = Field(description="The offending source line.")
    why: str = Field(description="Why the rule exists.")
    detail: str | None = None


class ProfileOutcome(OnlyWhenSet):
    """A result's Nsight Compute profile (CUDA only): ok with the report, failed or unavailable with a note, or not
    profiled."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("note", "report")
    status: Literal["ok", "failed", "unavailable", "not profiled"]
    note: str | None = Field(None, description="Why there is no report.")
    report: ProfileReport | None = None


class AnswerCandidate(OnlyWhenSet):
    """A submitted candidate, with its lineage; the static rules it breaks when they rejected it."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("static_rules",)
    id: str
    label: str
    template: str
    config: dict[str, Any]
    parent_ids: list[str]
    proposer: str
    hypothesis: str
    static_rules: list[StaticRuleHit] | None = None


class BestOnWorkload(Record):
    candidate: str
    kernel_us: float
    is_this: bool = Field(description="This trial is the fastest PASSED one on the workload.")


class ParentResult(OnlyWhenSet):
    OPTIONAL: ClassVar[tuple[str, ...]] = ("speedup_over_parent",)
    candidate: str
    status: Status
    kernel_us: float | None
    speedup_over_parent: float | None = Field(None, description="The parent's kernel time over this one's.")


class WorkloadAnswer(OnlyWhenSet):
    """One workload's part of the answer: the verdict with its evidence, or the measurement and its context."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("reason", "failing_case", "error_metrics", "log_tail", "best_on_workload", "parents", "profile",
                "previously_archived")
    workload: str
    workload_id: str
    candidate: str
    label: str
    trial: str
    index: int
    status: Status
    message: str
    build: BuildArtifact | BuildFailure | None = Field(discriminator="kind")
    measurement: MeasurementSummary | None
    costs: Costs
    reason: str | None = Field(None, description="Failures only: why, in one line.")
    failing_case: str | None = Field(None, description="Failures only: the case as the proposer may see it (a "
                                                       "held-out case by its class only, no seeds).")
    error_metrics: list[ErrorMetrics] | None = None
    log_tail: str | None = None
    on_front: bool
    best_on_workload: BestOnWorkload | None = None
    parents: list[ParentResult] | None = None
    profile: ProfileOutcome | None = Field(None, description="CUDA only: status ok (with the report), failed, "
                                                             "unavailable or not profiled.")
    previously_archived: bool | None = Field(None, description="The same code and configuration was judged "
                                                               "before this submission.")


class SubmitAnswer(Record):
    """The JSON answer of a submission: the run it went into, the overall verdict (the first non-PASSED status of
    the results, else PASSED), the candidates and one result per candidate and workload."""

    workspace: str
    run: str
    device: str
    interpreter: bool
    verdict: Status
    candidates: list[AnswerCandidate]
    results: list[WorkloadAnswer]

    def as_json(self) -> dict[str, Any]:
        """The answer as the JSON agents read (what `kernelloop submit` prints and the MCP tools return)."""
        return self.model_dump(mode="json")


def answer_schema() -> dict[str, Any]:
    """The JSON schema of the answer (docs/agents.md publishes it)."""
    return SubmitAnswer.model_json_schema(mode="serialization")


if __name__ == "__main__":
    print(json.dumps(answer_schema(), indent=2))
