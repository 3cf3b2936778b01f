"""The LLM proposer's records (tune/propose/llm): what its roles answer, the events it archives (`llm-proposer`,
`llm-call`, `llm-step`, `llm-stop`, base/records/events.py) and the `llm` section of a run summary built from them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .base import Record
from .profile import LATENCY, Direction, Hypothesis


class PlanGap(BaseModel):
    """What the planner needs and cannot express."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    need: str = Field(min_length=1, max_length=1000, description="The missing capability, concretely.")
    field: str = Field("", max_length=200, description="The schedule field, template parameter or area it concerns.")
    expected_change_pct: float | None = Field(None, allow_inf_nan=False, description=(
        "The latency change expected if it existed (percent, negative = faster)."))


class PlanStep(BaseModel):
    """The planner's answer: the next direction and the parents it starts from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    direction: str = Field(min_length=1, max_length=2000, description="What to change, concretely.")
    parent_ids: list[str] = Field(default_factory=list, description="Candidate ids to start from.")
    rationale: str = Field(min_length=1, max_length=4000, description="Why, citing the evidence.")
    cites: list[str] = Field(default_factory=list, description="Knowledge-base ids relied on.")
    stop: bool = Field(False, description="True when nothing promising is left to try.")
    gap: PlanGap | None = Field(None, description="Set when the direction cannot be expressed (in the kernel "
                                                  "language, the op's templates or a schedule edit): what the "
                                                  "representation would need.")


class LatencyHypothesis(BaseModel):
    """A falsifiable expectation: metric moves, and the kernel-latency change relative to the first parent
    (without a parent: relative to the eager PyTorch baseline)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metrics: list[Hypothesis] = Field(
        min_length=1, description="Metrics expected to move: canonical profile keys (e.g. 'sol_dram_pct', "
                                  "'registers', 'spills') or 'latency_us', each 'up', 'down' or 'same'.")
    latency_change_pct: float = Field(
        allow_inf_nan=False, description="Expected change of the kernel-time median in percent (negative = faster, e.g. -15).")

    @model_validator(mode="after")
    def _consistent(self):
        want = Direction.SAME if self.latency_change_pct == 0 else (
            Direction.DOWN if self.latency_change_pct < 0 else Direction.UP)
        for h in self.metrics:
            if h.metric == LATENCY and h.direction is not want:
                raise ValueError(f"'latency_us {h.direction.value}' contradicts latency_change_pct="
                                 f"{self.latency_change_pct:g}")
        return self


class LLMSettings(Record):
    """Provider, model, endpoint and request settings of the LLM proposer: what may be archived (no prices, no key).
    `tune/propose/llm/config.py`'s `LLMConfig` adds the prices."""

    provider: Literal["openai", "anthropic"] = Field(description="SDK to use: 'openai' (any OpenAI-compatible "
                                                                 "server through base_url) or 'anthropic'.")
    model: str = Field(min_length=1, description="Model name as the server knows it.")
    base_url: str | None = Field(None, description="Endpoint; None = the SDK's default (api.openai.com, "
                                                   "api.anthropic.com).")
    api_key_env: str | None = Field(None, description="Name of the environment variable holding the API key "
                                                      "(default OPENAI_API_KEY / ANTHROPIC_API_KEY).")
    timeout_s: float = Field(120.0, gt=0, description="Deadline of one request.")
    retries: int = Field(2, ge=0, description="Re-sends of a request that timed out or failed in transport.")
    max_tokens: int = Field(8192, ge=1, description="Output token limit per request.")
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_tokens", description="How an OpenAI-compatible server names the output limit "
                                  "(OpenAI's reasoning models need 'max_completion_tokens').")
    temperature: float | None = Field(0.0, ge=0, description="Sampling temperature; None = the server's default.")
    seed: int | None = Field(None, description="Sampling seed where the server honours one.")
    json_mode: bool = Field(False, description="Ask an OpenAI-compatible server for a JSON object response.")


class LLMBudgetPayload(Record):
    candidates: int | None = Field(description="Candidates proposed per workload (None: the controller's limit).")
    calls: int = Field(description="LLM calls per workload, every role and attempt included.")
    debug_attempts: int = Field(description="Debugger rounds per failing lineage.")


class LLMProposerPayload(Record):
    """`llm-proposer`: the proposer of a run, once, before its first call."""

    name: str
    prompt_version: str
    prompt_hash: str
    config: LLMSettings
    mode: Literal["record", "replay"] = Field(description="Calls made and recorded, or served from a recording.")
    budget: LLMBudgetPayload


class LLMCallPayload(Record):
    """`llm-call`: one call (every attempt of a role is one): tokens, latency, price, hashes, the candidates its step
    led to."""

    step: str
    role: str
    workload: str
    candidates: list[str] = Field(default_factory=list)
    provider: str
    model: str
    answered_by: str = Field("", description="The model the server says answered.")
    prompt_hash: str = ""
    prompt_version: str = ""
    key: str
    occurrence: int
    request: str = Field(description="sha256 of the request.")
    response: str = Field(description="sha256 of the response.")
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    latency_s: float = 0.0
    usd: float | None = Field(None, description="Price in USD; None when the model has no configured price.")
    error: str | None = None
    rejected: str = Field("", description="The validation error the answer was sent back with ('' accepted).")
    replayed: bool = False
    exact: bool = Field(True, description="Replay only: the request equals the recorded one byte for byte.")


class LLMStepPayload(Record):
    """`llm-step`: one step of the proposer (planner and coder, or debugger) and what it produced."""

    step: str
    workload: str
    roles: list[str]
    candidates: list[str] = Field(default_factory=list)
    error: str = ""
    invalid: list[str] = Field(default_factory=list, description="Validation errors sent back for repair, in order.")
    plan: PlanStep | None = None
    rationale: str = ""
    cites: list[str] = Field(default_factory=list)
    hypothesis: LatencyHypothesis | None = None


class LLMStopPayload(Record):
    """`llm-stop`: the proposer stopped proposing for a workload."""

    workload: str
    reason: str


class LLMCost(Record):
    """Calls, tokens, latency and price summed over some LLM calls (shares of a call: fractions)."""

    calls: float = 0
    errors: float = 0
    input_tokens: float = 0
    output_tokens: float = 0
    cached_tokens: float = 0
    cache_write_tokens: float = 0
    latency_s: float = 0
    usd: float = 0.0
    unpriced_calls: float = 0


class LLMSection(Record):
    """The `llm` section of a run summary (tune/propose/llm/costs.py, from the run's `llm-*` events)."""

    total: LLMCost
    by_role: dict[str, LLMCost] = Field(default_factory=dict)
    by_model: dict[str, LLMCost] = Field(default_factory=dict)
    per_trial: dict[str, LLMCost] = Field(default_factory=dict, description="A step's calls split evenly over "
                                                                            "the trials of its candidates.")
    unattributed: LLMCost = Field(default_factory=LLMCost, description="Calls of steps that produced nothing.")
    replayed_calls: int = 0
    inexact_replays: int = 0
    prompt_hashes: list[str] = Field(default_factory=list)
    proposers: list[str] = Field(default_factory=list)
    stops: list[LLMStopPayload] = Field(default_factory=list)


__all__ = ["LLMBudgetPayload", "LLMCallPayload", "LLMCost", "LLMProposerPayload", "LLMSection", "LLMSettings",
           "LLMStepPayload", "LLMStopPayload", "LatencyHypothesis", "PlanGap", "PlanStep"]
