"""Capability gaps: where the representation, not the search, was the obstacle — recorded, collected across runs,
and ranked.

Recorded during a run (archive events):
- `inexpressible`: a proposer said what it needs and cannot express (the LLM planner's `gap`), or a schedule edit
  the lowering refused (its field);
- `outside_space`: a rule of the planner fired but no template's pruned space holds a configuration its moves reach;
- `refused_edit`: a proposed schedule edit the static gate refused (the field and check).
Derived from the trials of the archives read: `failure_class`, a failure reason (kernelloop.core.verify.explain) of one
template that recurs in more than one run or op.

`rank(archives)` groups gaps by what they need (kind, field, need) and orders them by the tasks (op, workload) they
block, then the gain their proposals expected (the largest expected latency reduction, in percent), then how often
they occurred.
"""

from __future__ import annotations

from collections import defaultdict
from pydantic import Field

from ...base.records.base import Record
from ...base.records.events import CapabilityGapEvent
from ...base.records.gaps import GAP_EVENT, CapabilityGap, GapKind

class GapRank(Record):
    """Gaps that need the same thing, over every archive read."""

    kind: GapKind
    need: str
    field: str
    tasks_blocked: int = Field(description="Distinct (op, workload) it occurred on.")
    occurrences: int
    runs: int
    ops: list[str]
    expected_gain_pct: float | None = Field(None, description="The largest expected latency reduction (percent).")
    sources: list[str] = Field(default_factory=list)
    example: str = ""


def record_gap(archive, run_id: str, gap: CapabilityGap) -> None:
    archive.log_event(run_id, CapabilityGapEvent(payload=gap))


def gaps_of(archive, run_id: str) -> list[CapabilityGap]:
    """The run's recorded gaps: its 'capability-gap' events and those a strategy logged among its search events."""
    out = [CapabilityGap.model_validate(e.payload) for e in archive.event_records(run_id, GAP_EVENT)]
    for e in archive.events(run_id, "search"):
        if e["payload"].get("kind") == GAP_EVENT:
            out.append(CapabilityGap.model_validate(e["payload"]["gap"]))
    return out


def failure_gaps(archive, run_id: str) -> list[CapabilityGap]:
    """Every failed trial of the run as a `failure_class` occurrence (template + failure reason)."""
    from ..profile.hypothesis import LATENCY, parse_hypotheses
    from ...base.records import Status
    from ...core.verify.explain import failure_reason
    run = archive.get_run(run_id) or {}
    op = run.get("op", "")
    out = []
    for t in archive.trials(run_id):
        if t.verdict.status is Status.PASSED:
            continue
        cand = archive.get_candidate(t.candidate_id)
        expected = None
        try:
            lat = [h for h in parse_hypotheses(cand.hypothesis if cand else "") if h.metric == LATENCY]
            expected = lat[0].magnitude * 100 if lat and lat[0].magnitude is not None else None
        except ValueError:
            expected = None     # a hypothesis that does not parse states no expected change
        template = cand.template if cand else "?"
        out.append(CapabilityGap(op=op, kind="failure_class", need=failure_reason(t.verdict), field=template,
                                 source="trials", workload_id=t.workload_id, expected_change_pct=expected,
                                 detail=(t.verdict.message or "")[:200]))
    return out


def rank(archives: list, min_recurrence: int = 2) -> list[GapRank]:
    """Every gap of every run of `archives` (open Archive objects), grouped and ranked; a failure class is kept only
    when it recurs in at least `min_recurrence` (run, op) pairs."""
    groups: dict[tuple, list[tuple[str, CapabilityGap]]] = defaultdict(list)
    for a in archives:
        for run in a.runs():
            rid = run["id"]
            for g in gaps_of(a, rid) + failure_gaps(a, rid):
                groups[(g.kind, g.field, g.need)].append((f"{a.path}:{rid}", g))
    out = []
    for (kind, field, need), found in groups.items():
        runs = {r for r, _ in found}
        if kind == "failure_class" and len({(r, g.op) for r, g in found}) < min_recurrence:
            continue
        gains = [-g.expected_change_pct for _, g in found if g.expected_change_pct is not None]
        out.append(GapRank(kind=kind, need=need, field=field,
                           tasks_blocked=len({(g.op, g.workload_id) for _, g in found}), occurrences=len(found),
                           runs=len(runs), ops=sorted({g.op for _, g in found}),
                           expected_gain_pct=max(gains) if gains else None,
                           sources=sorted({g.source for _, g in found}),
                           example=next((g.detail for _, g in found if g.detail), "")))
    out.sort(key=lambda r: (-r.tasks_blocked, -(r.expected_gain_pct if r.expected_gain_pct is not None else -1e9),
                            -r.occurrences, r.kind, r.field, r.need))
    return out


__all__ = ["CapabilityGap", "GAP_EVENT", "GapRank", "failure_gaps", "gaps_of", "rank", "record_gap"]
