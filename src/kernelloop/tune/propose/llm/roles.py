"""The three roles (planner, coder, debugger) and the conversation that validates what they answer.

A role call is a short conversation: the rendered prompt goes out; the answer is parsed and validated locally;
an invalid answer goes back with the validation error (the `repair` template), at most `max_invalid` times;
a transport failure (timeout, refused connection, HTTP error) re-sends the same request at most
`LLMConfig.retries` times. Every attempt is one recorded exchange. The outcome is data: a value, or the
reason there is none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from ....base.records import Candidate, Workload
from ....base.records.llm import PlanGap, PlanStep
from ..proposal import (KernelProposal, ProposalHypothesis, ProposalInvalid, ScheduleRefused, extract_json,
                        format_validation_error, materialize, parse_proposal, proposal_json_schema)
from .context import Context, Outcome
from .prompts import PromptSet
from .providers import Message
from .recorder import Exchange, LLMClient

T = TypeVar("T")


@dataclass
class RoleResult(Generic[T]):
    """A role's value, or why there is none, with every exchange it took."""

    role: str
    value: T | None
    exchanges: list[Exchange] = field(default_factory=list)
    error: str = ""
    invalid: list[str] = field(default_factory=list)   # validation errors sent back, in order


@dataclass(frozen=True)
class Limits:
    """Bounds of one role call."""

    max_invalid: int = 2   # invalid answers sent back for repair (re-sends after transport failures: LLMConfig.retries)


def converse(client: LLMClient, prompts: PromptSet, role: str, system: str, user: str, key: str,
             validate: Callable[[str], T], limits: Limits) -> RoleResult[T]:
    """Run one role call to a validated value (or a reason)."""
    result: RoleResult[T] = RoleResult(role=role, value=None)
    messages = [Message(role="user", content=user)]
    failures = 0
    while True:
        ex = client.call(client.request(system, messages), f"{key}|{role}|answer{len(result.invalid)}")
        result.exchanges.append(ex)
        if not ex.response.ok:
            failures += 1
            if failures > client.config.retries:
                result.error = f"provider failed {failures} times; last: {ex.response.error}"
                return result
            continue
        try:
            result.value = validate(ex.response.text)
            return result
        except ProposalInvalid as e:
            result.invalid.append(str(e))
            if len(result.invalid) > limits.max_invalid:
                result.error = f"{len(result.invalid)} invalid answers; last: {e}"
                return result
            messages = [*messages, Message(role="assistant", content=ex.response.text),
                        Message(role="user", content=prompts.render("repair", error=str(e)))]


def _schema(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), separators=(",", ":"))


def example_proposal(ctx: Context) -> str:
    """A schema-valid example answer (a one-line patch), shown to the coder."""
    seed = next(iter(ctx.seeds), "c-0123456789abcdef")
    ex = KernelProposal(
        patch="@@ -1,1 +1,1 @@\n-old line\n+new line\n", parent_ids=[seed], config={"num_warps": 4},
        rationale="One sentence on why, naming the evidence.",
        hypothesis=ProposalHypothesis(metrics=[{"metric": "registers", "direction": "down"}],
                                      latency_change_pct=-10.0))
    return ex.model_dump_json(exclude_none=True)


class Roles:
    """Planner, coder and debugger over one client, prompt set and context."""

    def __init__(self, client: LLMClient, prompts: PromptSet, ctx: Context, proposer_name: str,
                 limits: Limits = Limits(), known_cites: set[str] | None = None):
        self.client = client
        self.prompts = prompts
        self.ctx = ctx
        self.proposer_name = proposer_name
        self.limits = limits
        self.known_cites = known_cites
        self.system = prompts.render("system", op=ctx.spec.name)
        self.refused: list[tuple[str, ScheduleRefused, KernelProposal]] = []   # (workload, refusal, proposal)

    def _common(self, workload: Workload) -> dict:
        from ..interface import workload_shapes
        return {"interface": self.ctx.interface_json(),
                "workload": json.dumps(workload_shapes(self.ctx.spec, workload), sort_keys=True)}

    # -- validators ------------------------------------------------------------------------------------------
    def _plan_validator(self, text: str) -> PlanStep:
        value = extract_json(text)
        try:
            step = PlanStep.model_validate(value)
        except ValidationError as e:
            raise ProposalInvalid("the plan does not match the schema:\n" + format_validation_error(e)) from None
        unknown = [p for p in step.parent_ids if p not in self.ctx.candidates()]
        if unknown:
            raise ProposalInvalid(f"unknown parent id(s) {unknown}; choose among the candidates listed")
        return step

    def _proposal_validator(self, workload: Workload) -> Callable[[str], tuple[KernelProposal, list[Candidate]]]:
        def validate(text: str) -> tuple[KernelProposal, list[Candidate]]:
            proposal = parse_proposal(text)
            try:
                cands = materialize(proposal, self.ctx.spec, self.ctx.candidates(), proposer=self.proposer_name,
                                    known_cites=self.known_cites)
            except ScheduleRefused as e:   # sent back for repair; kept as a capability gap
                self.refused.append((workload.id, e, proposal))
                raise
            tried = {o.candidate.id: o.status.value for o in self.ctx.outcomes if o.workload.id == workload.id}
            fresh = [c for c in cands if c.id not in tried]
            if not fresh:
                done = ", ".join(f"{c.id} ({tried[c.id]})" for c in cands)
                raise ProposalInvalid(f"every configuration of this proposal was already evaluated on this workload: "
                                      f"{done}; change the code or the configuration")
            return proposal, fresh
        return validate

    # -- roles -----------------------------------------------------------------------------------------------
    def plan(self, workload: Workload, key: str) -> RoleResult[PlanStep]:
        user = self.prompts.render(
            "planner", **self._common(workload), hardware=self.ctx.hardware_json(),
            knowledge=self.ctx.knowledge_text(), history=self.ctx.history_text(),
            candidates=self.ctx.candidates_text(workload), plan_schema=_schema(PlanStep))
        return converse(self.client, self.prompts, "planner", self.system, user, key, self._plan_validator,
                        self.limits)

    def code(self, workload: Workload, step: PlanStep, key: str) -> RoleResult[tuple[KernelProposal, list[Candidate]]]:
        user = self.prompts.render(
            "coder", **self._common(workload), plan=step.model_dump_json(),
            parents=self.ctx.parents_text(step.parent_ids, workload),
            proposal_schema=json.dumps(proposal_json_schema(), separators=(",", ":")),
            example=example_proposal(self.ctx))
        return converse(self.client, self.prompts, "coder", self.system, user, key,
                        self._proposal_validator(workload), self.limits)

    def debug(self, workload: Workload, failed: Outcome, attempt: int, budget: int, key: str
              ) -> RoleResult[tuple[KernelProposal, list[Candidate]]]:
        ids = [failed.candidate.id, *failed.candidate.parent_ids]
        user = self.prompts.render(
            "debugger", **self._common(workload), failure=json.dumps(failed.failure_report(), indent=1),
            parents=self.ctx.parents_text(ids, workload), attempt=attempt, budget=budget,
            proposal_schema=json.dumps(proposal_json_schema(), separators=(",", ":")))
        return converse(self.client, self.prompts, "debugger", self.system, user, key,
                        self._proposal_validator(workload), self.limits)


__all__ = ["Limits", "PlanGap", "PlanStep", "RoleResult", "Roles", "converse", "example_proposal"]
