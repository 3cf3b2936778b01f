"""The rule planner as a proposer of the controller (`kernelloop optimize --strategy planner`).

One `PlannerStrategy` per workload over the workload's pruned space. The first evaluation is the start
configuration (`--start`) or the seeded exploration's first configuration; afterwards each ask plans from the
best evaluated configuration whose evidence has come in, and explores when no entry of the knowledge base fires.

Like every proposer it only submits candidates and learns from the archived trials it is told about. It never
profiles: it asks for evidence (`evidence_request`: the hypotheses of the proposal behind a candidate, the
entries it cites, its parent), the controller has an evidence source build and archive a ProfileReport, and
hands it back (`give_evidence`) before `tell`.

Lineage: a candidate planned from a parent names the parent's candidate id in `parent_ids` and carries the
proposal's hypotheses in `hypothesis` (neither is part of the content-hashed id). Candidates are shared by
every workload of a run and keep their first lineage, so each proposal is also logged as a `proposal` event
with its workload, parent, rule and hypotheses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..knowledge import KnowledgeBase, load_knowledge
from ...base.records import Candidate, ProfileReport, Status, Trial, Workload, canonical_json
from .base import Proposal
from .planner import PlannerStrategy

PLANNER = "planner"
"""Name of the strategy (`--strategy planner`) and of the candidates' proposer."""


def _key(config: dict) -> str:
    return canonical_json(config)


class PlannerProposer:
    """Proposer protocol of kernelloop.tune.loop, plus `evidence_request` / `give_evidence` for evidence."""

    name = PLANNER
    wants_evidence = True

    def __init__(self, op: str, template_sources: Mapping[str, str], workloads: list[Workload],
                 spaces: Mapping[str, list[dict]], seeds: Mapping[str, int], *,
                 start: Mapping[str, dict] | None = None, kb: KnowledgeBase | None = None):
        self.op = op
        self.sources = dict(template_sources)
        self.kb = kb if kb is not None else load_knowledge()
        self.spaces = {w.id: list(spaces[w.id]) for w in workloads}
        self._reports: dict[tuple[str, str], ProfileReport] = {}
        self.strategies: dict[str, PlannerStrategy] = {}
        for w in workloads:
            self.strategies[w.id] = PlannerStrategy(
                self.spaces[w.id], seeds[w.id], evidence=self._evidence_fn(w.id), kb=self.kb, axes=w.axes,
                elem=w.dtype.itemsize, start=(start or {}).get(w.id), schedule=self._schedule)
        self._asked: dict[tuple[str, str], tuple[dict, Proposal | None]] = {}
        self._ids: dict[tuple[str, str], str] = {}      # (workload, config key) -> candidate id
        self._events: list[dict] = []
        self._seen: dict[str, int] = {}

    def _schedule(self, config: dict):
        """The typed schedule a configuration's template was lowered from, bound to it (None: no schedule)."""
        from ..schedule.lower import schedule_of
        source = self.sources.get(config.get("template", ""))
        found = schedule_of(source) if source else None
        return found.bind(config) if found is not None else None

    def _edit_candidate(self, workload: Workload, edit) -> Candidate:
        """A schedule edit as a candidate: the edited schedule lowered, its numbers the config."""
        from ..schedule.lower import lower
        proposal = edit.proposal
        parent_id = self._ids.get((workload.id, _key(proposal.parent)))
        pinned = {k: v for k, v in proposal.parent.items() if k != "template"}
        cand = Candidate(op=self.op, template="schedule", source=lower(edit.schedule),
                         config={**pinned, **edit.schedule.config()}, parent_ids=[parent_id] if parent_id else [],
                         proposer=self.name, hypothesis=proposal.hypothesis_text())
        self._asked[(cand.id, workload.id)] = (None, proposal)
        self._events.append({"workload": workload.id, "kind": "proposal", "candidate": cand.id, "parent": parent_id,
                             "rule": proposal.rule, "cites": list(proposal.cites), "schedule": edit.schedule.name,
                             "hypotheses": proposal.hypothesis_text(), "rationale": proposal.rationale})
        return cand

    def _evidence_fn(self, wid: str):
        def evidence(config: dict) -> ProfileReport | None:
            return self._reports.get((wid, _key(config)))
        return evidence

    # -- the Proposer protocol ------------------------------------------------------------------------------
    def size(self, workload: Workload) -> int | None:
        return len(self.spaces[workload.id])

    def ask(self, workload: Workload) -> Candidate | None:
        strategy = self.strategies[workload.id]
        edit = strategy.next_edit()
        if edit is not None:
            return self._edit_candidate(workload, edit)
        cfg = strategy.ask()
        if cfg is None:
            return None
        proposal = strategy.proposal_for(cfg)
        parent_id = self._ids.get((workload.id, _key(proposal.parent))) if proposal is not None else None
        template = cfg["template"]
        cand = Candidate(op=self.op, template=template, source=self.sources[template],
                         config={k: v for k, v in cfg.items() if k != "template"},
                         parent_ids=[parent_id] if parent_id else [], proposer=self.name,
                         hypothesis=proposal.hypothesis_text() if proposal is not None else "")
        self._asked[(cand.id, workload.id)] = (cfg, proposal)
        self._ids[(workload.id, _key(cfg))] = cand.id
        if proposal is not None:
            self._events.append({"workload": workload.id, "kind": "proposal", "candidate": cand.id,
                                 "parent": parent_id, "rule": proposal.rule, "cites": list(proposal.cites),
                                 "hypotheses": proposal.hypothesis_text(), "rationale": proposal.rationale})
        return cand

    def tell(self, candidate: Candidate, workload: Workload, trial: Trial) -> None:
        cfg, _ = self._asked.pop((candidate.id, workload.id))
        if cfg is None:   # a schedule edit: outside the strategy's space, its trial is archived all the same
            return
        value = None
        if trial.verdict.status is Status.PASSED and trial.measurement is not None:
            value = trial.measurement.kernel.median_us
        self.strategies[workload.id].tell(cfg, value if value is not None and math.isfinite(value) else None)

    # -- evidence -------------------------------------------------------------------------------------------
    def evidence_request(self, candidate: Candidate, workload: Workload):
        """What the proposal behind the candidate predicted (empty for a start or an exploration)."""
        from ..profile.evidence import EvidenceRequest
        _, proposal = self._asked[(candidate.id, workload.id)]
        if proposal is None:
            return EvidenceRequest()
        return EvidenceRequest(hypotheses=tuple(proposal.hypotheses), cites=tuple(proposal.cites),
                               parent_id=self._ids.get((workload.id, _key(proposal.parent))))

    def give_evidence(self, candidate: Candidate, workload: Workload, report: ProfileReport | None) -> None:
        cfg, _ = self._asked[(candidate.id, workload.id)]
        if report is not None and cfg is not None:
            self._reports[(workload.id, _key(cfg))] = report

    def drain_events(self) -> list[dict[str, Any]]:
        """Planner events (plans, explorations) and proposals not yet archived, each with its workload."""
        out = []
        for wid, strat in self.strategies.items():
            seen = self._seen.get(wid, 0)
            out += [{"workload": wid, "strategy": PLANNER, **e} for e in strat.events[seen:]]
            self._seen[wid] = len(strat.events)
        out += [{"strategy": PLANNER, **e} for e in self._events]
        self._events = []
        return out


__all__ = ["PLANNER", "PlannerProposer"]
