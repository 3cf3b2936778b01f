"""The archive's event log as records: one payload record per event kind, in a union discriminated on `kind`.

An event is `{kind, payload}`: `kind` is the archive's `events.kind` column, `payload` its JSON. `Archive.log_event`
writes an `Event` (or a kind and a mapping, validated through the union first); `Archive.event_records` reads each row
back through it (`read_event`). Every kind kernelloop writes is typed here: the loop's own, the static gate's
decisions (`gate`: `GateDecision`, base/records/gate.py), capability gaps (`capability-gap`: `CapabilityGap`,
base/records/gaps.py) and the LLM proposer's `llm-proposer`, `llm-call`, `llm-step`, `llm-stop` (base/records/llm.py).
Two fallbacks keep every archive readable:

- a kind the union does not know (one an extension writes) is an `OtherEvent` holding its payload as written;
- a payload of a known kind that does not fit its record (written by an older kernelloop) reads back as an
  `OtherEvent` too, so an old archive still loads; writing one is refused.

A payload is written with the keys its writer set (`exclude_unset`), so the JSON is what the mapping it replaced
held, and read back to the same mapping (`payload_dict`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError

from .base import Record
from .gaps import GAP_EVENT, CapabilityGap
from .gate import GateDecision
from .llm import LLMCallPayload, LLMProposerPayload, LLMStepPayload, LLMStopPayload
from .summary import SanitizerCheck


class PrunePayload(Record):
    """`prune`: one template's pruning on one workload (core/spec/space.py's PruneReport with where it ran)."""

    workload: str
    label: str
    template: str
    total: int
    kept: int
    pruned: int
    reasons: dict[str, int] = Field(default_factory=dict, description="Removals by the rule that removed them.")


class EmptySpacePayload(Record):
    """`empty-space`: every configuration of a workload was pruned."""

    workload: str
    label: str
    message: str


class BudgetPayload(Record):
    """`budget`: a wall-time or GPU-seconds budget ended the search."""

    reason: Literal["wall time", "gpu seconds"]
    seconds: float
    spent: float | None = Field(None, description="GPU seconds the trials used (gpu seconds only).")
    evaluations: int | None = Field(None, description="Trials counted against the GPU budget (gpu seconds only).")


class TransportPayload(Record):
    """`transport`: a GPU whose tensors could not be shared by CUDA IPC fell back to the host arena."""

    device: str
    transport: str
    reason: str
    trial: str | None = None
    phase: str | None = Field(None, description="'confirm' when it happened in the confirmation.")


class FailurePayload(Record):
    """`failure`: where a non-PASSED trial failed (its case, and for a crash the stage and signal)."""

    trial: str
    candidate: str
    workload: str
    status: str
    reason: str = Field(description="core.verify.explain.failure_reason of the verdict.")
    stage: str | None = None
    case: dict[str, Any] | None = Field(None, description="The failing case: shape, dtype, distribution, seed, check.")
    at: str | None = None
    signal: str | None = None
    exitcode: int | None = None


class SessionPayload(Record):
    """`search-session`: one invocation's search phase (the wall time throughput is measured over)."""

    started: float
    finished: float
    evaluated: int
    replayed: int
    devices: list[str] = Field(default_factory=list)
    build_wait_s: float = 0.0
    builds_ahead: bool | int = Field(False, description="Whether the build stage compiled ahead of the devices.")


class HalvingPayload(Record):
    eta: int
    margin: float
    screen_samples: int
    screened: int
    promoted: int
    stopped: int


class ScreenPayload(Record):
    """`screen`: the screened timing of a run (tune/search/budget.py) and each workload's successive halving."""

    samples: int
    eta: int
    margin: float
    direct: int
    workloads: dict[str, HalvingPayload] = Field(default_factory=dict)


class ConfirmFailedPayload(Record):
    """`confirm-failed`: a workload's winner could not be confirmed."""

    workload: str
    candidate: str | None
    status: str
    error: str
    process: int | None = None


class ThreadCensusPayload(Record):
    """`confirm-thread-census`: a confirmation left a thread; the winner timed alone says whose it was."""

    workload: str
    candidate: str
    confirm_verdict: str
    threads: str
    alone: str
    attributed_to: Literal["baselines", "candidate"]


class EvidenceSourcePayload(Record):
    """`evidence-source`: where the planner's evidence comes from."""

    source: str
    note: str = ""


class EvidencePayload(Record):
    """`evidence`: one profile report collected for the planner."""

    workload: str
    trial: str
    candidate: str
    source: str
    error: str = ""
    seconds: float
    profiled: bool
    bottleneck: str | None = None
    parent: str | None = None
    hypotheses: str = ""
    outcomes: dict[str, int] = Field(default_factory=dict)


class SearchDecision(Record):
    """`search`: a strategy's or the planner's decision (what it did and why). The fields every decision has are
    typed; each strategy adds its own (`action`, `reason`, `config`, `fired`, ...), kept as written."""

    model_config = ConfigDict(extra="allow")
    workload: str | None = None
    kind: str | None = Field(None, description="What was decided: feasibility, prior, history, supervisor, ...")
    strategy: str | None = None
    evaluations: int | None = Field(None, description="Evaluations the strategy had seen.")


class PruneEvent(Record):
    kind: Literal["prune"] = "prune"
    payload: PrunePayload


class EmptySpaceEvent(Record):
    kind: Literal["empty-space"] = "empty-space"
    payload: EmptySpacePayload


class BudgetEvent(Record):
    kind: Literal["budget"] = "budget"
    payload: BudgetPayload


class TransportEvent(Record):
    kind: Literal["transport"] = "transport"
    payload: TransportPayload


class FailureEvent(Record):
    kind: Literal["failure"] = "failure"
    payload: FailurePayload


class SessionEvent(Record):
    kind: Literal["search-session"] = "search-session"
    payload: SessionPayload


class ScreenEvent(Record):
    kind: Literal["screen"] = "screen"
    payload: ScreenPayload


class ConfirmFailedEvent(Record):
    kind: Literal["confirm-failed"] = "confirm-failed"
    payload: ConfirmFailedPayload


class ThreadCensusEvent(Record):
    kind: Literal["confirm-thread-census"] = "confirm-thread-census"
    payload: ThreadCensusPayload


class EvidenceSourceEvent(Record):
    kind: Literal["evidence-source"] = "evidence-source"
    payload: EvidenceSourcePayload


class EvidenceEvent(Record):
    kind: Literal["evidence"] = "evidence"
    payload: EvidencePayload


class SanitizeEvent(Record):
    kind: Literal["sanitize"] = "sanitize"
    payload: SanitizerCheck


class SearchEvent(Record):
    kind: Literal["search"] = "search"
    payload: SearchDecision


class GateEvent(Record):
    kind: Literal["gate"] = "gate"
    payload: GateDecision


class CapabilityGapEvent(Record):
    kind: Literal["capability-gap"] = GAP_EVENT
    payload: CapabilityGap


class LLMProposerEvent(Record):
    kind: Literal["llm-proposer"] = "llm-proposer"
    payload: LLMProposerPayload


class LLMCallEvent(Record):
    kind: Literal["llm-call"] = "llm-call"
    payload: LLMCallPayload


class LLMStepEvent(Record):
    kind: Literal["llm-step"] = "llm-step"
    payload: LLMStepPayload


class LLMStopEvent(Record):
    kind: Literal["llm-stop"] = "llm-stop"
    payload: LLMStopPayload


KNOWN = (PruneEvent, EmptySpaceEvent, BudgetEvent, TransportEvent, FailureEvent, SessionEvent, ScreenEvent,
         ConfirmFailedEvent, ThreadCensusEvent, EvidenceSourceEvent, EvidenceEvent, SanitizeEvent, SearchEvent,
         GateEvent, CapabilityGapEvent, LLMProposerEvent, LLMCallEvent, LLMStepEvent, LLMStopEvent)
KINDS: dict[str, type] = {e.model_fields["kind"].default: e for e in KNOWN}
OTHER = "other"


class OtherEvent(Record):
    """An event of a kind the union does not type (or an older payload that does not fit its kind's record)."""

    kind: str
    payload: dict[str, Any] = Field(default_factory=dict)
    other: Literal[True] = Field(True, description="Marks the fallback, so a known kind's misfit payload read back "
                                                   "from JSON stays one.")


def _tag(value: Any) -> str:
    if isinstance(value, dict):
        kind, other = value.get("kind"), value.get("other", False)
    else:
        kind, other = getattr(value, "kind", None), isinstance(value, OtherEvent)
    return kind if kind in KINDS and not other else OTHER


Event = Annotated[Union[tuple(Annotated[e, Tag(k)] for k, e in KINDS.items()) + (Annotated[OtherEvent, Tag(OTHER)],)],
                  Discriminator(_tag)]
EVENT: TypeAdapter = TypeAdapter(Event)


def event_of(kind: str, payload: dict[str, Any] | Record) -> Any:
    """The event record of a kind and its payload, for writing: a known kind's payload must fit its record
    (ValidationError otherwise); any other kind is an `OtherEvent`."""
    if isinstance(payload, Record):
        payload = payload.model_dump(mode="json", exclude_unset=True)
    return EVENT.validate_python({"kind": kind, "payload": payload})


def read_event(kind: str, payload: dict[str, Any]) -> Any:
    """The event record of an archived row; a known kind whose payload does not fit its record (an older
    kernelloop's) reads back as an `OtherEvent`."""
    try:
        return EVENT.validate_python({"kind": kind, "payload": payload})
    except ValidationError:
        return OtherEvent(kind=kind, payload=payload)


def payload_dict(event: Any) -> dict[str, Any]:
    """The payload as the mapping it is stored as (the keys its writer set)."""
    if isinstance(event, OtherEvent):
        return dict(event.payload)
    return event.payload.model_dump(mode="json", exclude_unset=True)


class ArchivedEvent(Record):
    """One row of a run's event log: its order, time and event."""

    seq: int
    t: float
    event: Event

    @property
    def kind(self) -> str:
        return self.event.kind

    @property
    def payload(self) -> Any:
        """The typed payload (a mapping for an `OtherEvent`)."""
        return self.event.payload


__all__ = ["ArchivedEvent", "BudgetPayload", "ConfirmFailedPayload", "EVENT", "EmptySpacePayload", "Event",
           "EvidencePayload", "EvidenceSourcePayload", "FailurePayload", "HalvingPayload", "KINDS", "OtherEvent",
           "PrunePayload", "ScreenPayload", "SearchDecision", "SessionPayload", "ThreadCensusPayload",
           "TransportPayload", "event_of", "payload_dict", "read_event"] + [e.__name__ for e in KNOWN]
