"""The LLM proposer: planner -> coder, debugger on failures, behind the controller's Proposer protocol.

    ask(workload):
        a queued candidate (the rest of a proposal's space, or a kernel that passed on another workload)?  -> it
        the latest candidate it proposed for the workload failed, and its lineage has debug budget left?
            debugger(failure report)                                   -> validated proposal -> candidates
        else planner(evidence, knowledge, history) -> coder(plan)     -> validated proposal -> candidates
        nothing valid within the call budget, the planner says stop, or the provider is down -> None

It never compiles, runs, times or archives anything: the controller does, and `tell` hands back the archived
trial. Every LLM call becomes an `llm-call` event (tokens, cached tokens, latency, price, prompt hash, request and
response hashes, the candidates it led to), handed to `sink(run_id, [event, ...])` (records of base/records/events.py) once the run id is known
(the first `tell`, or `finish`). Replay keys name the discrete state only (model, prompt set, workload, step, the
candidates and verdicts seen so far), so a replayed run gets the recorded answers while it follows the
recorded run, and stops with ReplayMiss the moment it does not.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

from ....base.records import Candidate, Record, Status, Trial, Workload, content_hash
from ....base.records.events import (CapabilityGapEvent, LLMCallEvent, LLMProposerEvent, LLMStepEvent,
                                     LLMStopEvent)
from ....base.records.gaps import CapabilityGap
from ....base.records.llm import (LLMBudgetPayload, LLMCallPayload, LLMProposerPayload, LLMStepPayload,
                                  LLMStopPayload)
from ....core.spec import OpBundle
from .context import Context, Outcome, hardware_facts
from .prompts import PromptSet
from .recorder import Exchange, LLMClient
from .roles import Limits, RoleResult, Roles

Sink = Callable[[str, list[Record]], None]   # the run id and its events
DEBUGGABLE = {Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.TIMEOUT, Status.REJECTED, Status.WRONG_SHAPE,
              Status.WRONG_VALUES, Status.WRONG_NONFINITE, Status.WRONG_INCOMPLETE, Status.WRONG_INPUT_MUTATED,
              Status.WRONG_NONDETERMINISTIC}


@dataclass(frozen=True)
class LLMBudget:
    """How much the proposer may spend, per workload."""

    candidates: int | None = 8   # candidates proposed (the controller's per-workload limit is the smaller one)
    calls: int = 40              # LLM calls, every role and attempt included
    debug_attempts: int = 2      # debugger rounds per failing lineage


class LLMProposer:
    """Planner, coder and debugger as one proposer."""

    def __init__(self, bundle: OpBundle, workloads: list[Workload], client: LLMClient, prompts: PromptSet, *,
                 device: str, kb=None, budget: LLMBudget = LLMBudget(), limits: Limits = Limits(),
                 sink: Sink | None = None):
        self.bundle = bundle
        self.client = client
        self.prompts = prompts
        self.budget = budget
        self.sink = sink
        self.name = f"llm:{client.config.model}:{prompts.tag}"
        spec = bundle.spec
        seeds = {}
        for t in spec.templates:
            c = Candidate(op=spec.name, template=t.name, source=bundle.template_sources[t.name], config={},
                          proposer="template")
            seeds[c.id] = c
        props, entries = hardware_facts(device, kb)
        self.ctx = Context(spec=spec, workloads=list(workloads), hardware=props, knowledge=entries, seeds=seeds)
        cites = set(kb.facts) | set(kb.experience) if kb is not None else None
        self.roles = Roles(client, prompts, self.ctx, self.name, limits, known_cites=cites)
        self.queues: dict[str, list[Candidate]] = defaultdict(list)
        self.calls: dict[str, int] = defaultdict(int)
        self.mine: dict[tuple[str, str], bool] = {}        # (candidate, workload) proposed by a role, not transferred
        self.debug_root: dict[str, str] = {}               # candidate -> the failing ancestor its fix descends from
        self.debug_used: dict[tuple[str, str], int] = defaultdict(int)
        self.handled: set[tuple[str, str]] = set()         # failures already sent to the debugger
        self.done: dict[str, str] = {}                     # workload -> why it stopped
        self.step = 0
        self.pending: list[Record] = [LLMProposerEvent(payload=LLMProposerPayload(
            name=self.name, prompt_version=prompts.version, prompt_hash=prompts.hash, config=client.config.public(),
            mode=client.cassette.mode, budget=LLMBudgetPayload(candidates=budget.candidates, calls=budget.calls,
                                                               debug_attempts=budget.debug_attempts)))]

    # -- Proposer protocol -----------------------------------------------------------------------------------
    def size(self, workload: Workload) -> int | None:
        return self.budget.candidates

    def ask(self, workload: Workload) -> Candidate | None:
        wid = workload.id
        if self.queues[wid]:
            return self.queues[wid].pop(0)
        while wid not in self.done:
            if self.calls[wid] >= self.budget.calls:
                self._stop(workload, f"call budget of {self.budget.calls} spent")
                break
            failed = self._to_debug(workload)
            if failed is not None:
                result = self._debug(workload, failed)
            else:
                result = self._plan_and_code(workload)
            if result is None:
                break
            if result.value is not None:
                _, cands = result.value
                for c in cands:
                    self.mine[(c.id, wid)] = True
                    if failed is not None:
                        self.debug_root[c.id] = self.debug_root.get(failed.candidate.id, failed.candidate.id)
                self.queues[wid].extend(cands)
                return self.queues[wid].pop(0)
            if result.error.startswith("provider failed"):
                self._stop(workload, f"{result.role}: {result.error}")
        return None

    def tell(self, candidate: Candidate, workload: Workload, trial: Trial) -> None:
        outcome = Outcome(candidate=candidate, workload=workload, trial=trial)
        self.ctx.outcomes.append(outcome)
        if trial.verdict.status is Status.PASSED and (candidate.id, workload.id) in self.mine:
            for w in self.ctx.workloads:   # a kernel that passed on one workload is tried on the others, once
                tried = {o.candidate.id for o in self.ctx.outcomes if o.workload.id == w.id}
                if w.id != workload.id and candidate.id not in tried and candidate not in self.queues[w.id]:
                    self.queues[w.id].insert(0, candidate)
        self.flush(trial.run_id)

    def finish(self, run_id: str) -> None:
        """Hand over what is still pending (calls of asks that produced no candidate, stop reasons)."""
        self.flush(run_id)

    # -- steps -----------------------------------------------------------------------------------------------
    def _key(self, workload: Workload) -> str:
        self.step += 1
        seen = [(o.candidate.id, o.workload.id, o.status.value) for o in self.ctx.outcomes]
        return content_hash({"model": self.client.config.model, "prompts": self.prompts.hash, "workload": workload.id,
                             "step": self.step, "seen": seen})

    def _to_debug(self, workload: Workload) -> Outcome | None:
        mine = [o for o in self.ctx.outcomes if o.workload.id == workload.id
                and (o.candidate.id, workload.id) in self.mine]
        if not mine or mine[-1].status not in DEBUGGABLE:
            return None
        last = mine[-1]
        root = self.debug_root.get(last.candidate.id, last.candidate.id)
        if (last.candidate.id, workload.id) in self.handled or \
                self.debug_used[(root, workload.id)] >= self.budget.debug_attempts:
            return None
        return last

    def _debug(self, workload: Workload, failed: Outcome) -> RoleResult:
        root = self.debug_root.get(failed.candidate.id, failed.candidate.id)
        self.handled.add((failed.candidate.id, workload.id))
        self.debug_used[(root, workload.id)] += 1
        step = self._key(workload)
        result = self.roles.debug(workload, failed, self.debug_used[(root, workload.id)], self.budget.debug_attempts,
                                  step)
        self._account(workload, step, [result])
        return result

    def _plan_and_code(self, workload: Workload) -> RoleResult | None:
        step = self._key(workload)
        plan = self.roles.plan(workload, step)
        if plan.value is None:
            self._account(workload, step, [plan])
            return plan
        if plan.value.stop:
            self._account(workload, step, [plan])
            self._stop(workload, f"planner: stop ({plan.value.rationale[:200]})")
            return None
        code = self.roles.code(workload, plan.value, step)
        self._account(workload, step, [plan, code], plan=plan.value)
        return code

    def _gaps(self, workload: Workload, plan=None) -> None:
        """Capability gaps as events: the planner's stated need, and schedule edits refused on the way."""
        op = self.ctx.spec.name
        if plan is not None and plan.gap is not None:
            g = plan.gap
            self.pending.append(CapabilityGapEvent(payload=CapabilityGap(
                op=op, kind="inexpressible", need=g.need, field=g.field, source=self.name, workload_id=workload.id,
                expected_change_pct=g.expected_change_pct, detail=plan.direction[:200])))
        for wid, refusal, proposal in self.roles.refused:
            self.pending.append(CapabilityGapEvent(payload=CapabilityGap(
                op=op, kind="inexpressible" if refusal.check == "lowering" else "refused_edit", need=str(refusal)[:300],
                field=refusal.field, source=self.name, workload_id=wid,
                expected_change_pct=proposal.hypothesis.latency_change_pct)))
        self.roles.refused.clear()

    def _stop(self, workload: Workload, why: str) -> None:
        self.done[workload.id] = why
        self.pending.append(LLMStopEvent(payload=LLMStopPayload(workload=workload.id, reason=why)))

    # -- accounting ------------------------------------------------------------------------------------------
    def _account(self, workload: Workload, step: str, results: list[RoleResult], plan=None) -> None:
        first = results[0].value if results and results[0].role == "planner" else None
        self._gaps(workload, first)
        last = results[-1]
        produced = last.value if isinstance(last.value, tuple) else None
        cands = [c.id for c in produced[1]] if produced is not None else []
        proposal = produced[0] if produced is not None else None
        for r in results:
            invalid = list(r.invalid)
            for ex in r.exchanges:
                self.calls[workload.id] += 1
                self.pending.append(LLMCallEvent(payload=self._call_event(ex, r.role, workload, step, cands,
                                                                          invalid)))
                if ex.response.ok and invalid:
                    invalid = invalid[1:]
        self.pending.append(LLMStepEvent(payload=LLMStepPayload(
            step=step, workload=workload.id, roles=[r.role for r in results], candidates=cands, error=last.error,
            invalid=[i for r in results for i in r.invalid], plan=plan,
            rationale=proposal.rationale if proposal else "", cites=proposal.cites if proposal else [],
            hypothesis=proposal.hypothesis if proposal else None)))

    def _call_event(self, ex: Exchange, role: str, workload: Workload, step: str, cands: list[str],
                    invalid: list[str]) -> LLMCallPayload:
        r, u = ex.response, ex.response.usage
        rejected = invalid[0] if (r.ok and invalid) else ""
        return LLMCallPayload(
            step=step, role=role, workload=workload.id, candidates=cands, provider=ex.request.provider,
            model=ex.request.model, answered_by=r.model, prompt_hash=self.prompts.hash,
            prompt_version=self.prompts.version, key=ex.key, occurrence=ex.occurrence, request=ex.request_sha,
            response=ex.response_sha, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
            cached_tokens=u.cached_tokens, cache_write_tokens=u.cache_write_tokens, latency_s=r.latency_s,
            usd=ex.usd, error=r.error, rejected=rejected, replayed=ex.replayed, exact=ex.exact)

    def flush(self, run_id: str) -> None:
        if self.sink is None or not self.pending:
            return
        pending, self.pending = self.pending, []
        self.sink(run_id, pending)


__all__ = ["DEBUGGABLE", "LLMBudget", "LLMProposer", "Sink"]
