"""The options of a run (`RunOptions`: one record, archived whole) and the controller's progress."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ...core.execute.evaluate import Timeouts
from ...base.records import Record, Workload
from ...base.records.device import Device
from ...base.records.summary import WarmStart
from ..search import DEFAULT_STRATEGY, STRATEGIES
from ...base.usage import UsageError
from . import checks
from .budget import Budget

PLANNER = "planner"   # `--strategy planner`: the rule planner proposes (kernelloop.tune.propose.planner_proposer)
EXECUTORS = ("local", "ray")


def strategy_names() -> list[str]:
    """Every `--strategy` choice: the ask/tell search strategies and the rule planner."""
    return sorted([*STRATEGIES, PLANNER])


OPTIONS_FORMAT = 3   # archived options: 3 = every RunOptions field, the budget one record; 2: the budget as
                     # budget_evals / budget_seconds / budget_gpu_seconds; 1 (unmarked): the old as_dict
OLD_BUDGET_KEYS = {"budget_evals": "evals", "budget_seconds": "seconds", "budget_gpu_seconds": "gpu_seconds"}
RUN_KEYS = ("key", "secret", "workloads", "options_format")   # archived beside the options, not options
AS_BEFORE = ("start", "templates", "fixed", "baselines", "prior")   # None on resume: the archived value
KEPT = ("gate",)   # on resume the archived value unless this invocation sets the field
GATE_MODES = ("on", "off", "audit")
GateMode = Literal["on", "off", "audit"]


class RunOptions(Record):
    """The options of a run: one record, archived whole when the run is created (`archived`) and read back whole
    with `model_validate` on resume (`from_archived`); `resumed` says which fields a resuming invocation sets.

    It checks itself: every value on its own and against the others (strategy, executor, devices of the device's
    kind, a screen of at least 3 samples, a positive profiling deadline, a start only for the planner, a prior only
    for a strategy that takes one); validated with `context={"bundle": OpBundle, "workloads": [...]}` (what
    `checked` and `kernelloop.tune.loop.run` do) also against the op and workloads (`kernelloop.tune.loop.checks`). A failed
    check is a UsageError inside pydantic's ValidationError (`kernelloop.base.usage.usage_error` unwraps it)."""

    device: Device                         # the kind of device ('cuda' or 'interpret'); `devices` names which
    budget: Budget = Field(default_factory=Budget)   # evaluations per workload (default 24), wall seconds of this
                                           # invocation, GPU seconds of the whole run: whichever is spent first
    screen_samples: int | None = None      # time candidates the model ranks poorly with this many samples first;
                                           # full timing only when successive halving promotes (tune/search/budget.py)
    strategy: str = DEFAULT_STRATEGY
    seed: int = 0
    checks: int = 2
    confirm: bool = True
    sanitize: bool = True                  # compute-sanitizer over each winner before its confirmation
    baselines: list[str] | None = None
    static_rules: bool = True              # source rules screen every candidate before it runs
    gate: GateMode = "on"                  # the static gate in the build stage (kernelloop.tune.gate): 'on' rejects,
                                           # 'audit' records its decisions and rejects nothing, 'off': no gate
    timeouts: Timeouts = Field(default_factory=Timeouts)
    start: dict[str, str] | None = None    # planner: first configuration ("NAME": "VALUE"), see spec.start
    profile_timeout_s: float = 300.0       # planner: deadline of one Nsight Compute run
    templates: list[str] | None = None     # search only these templates of the spec (None: all)
    fixed: dict[str, str] | None = None    # pin parameters (NAME: value text): only templates having them, only
                                           # configurations with these values
    prior: WarmStart | None = None         # staged: warm start from recordings (files: path and sha256 each;
                                           # configurations), RecordedPrior.warm_start(), see tune/replay/prior.py;
                                           # an archive's one-recording form (path, sha256 at the top) reads too
    devices: list[Device] | None = None    # one evaluation worker each (None: every GPU of GPU 0's model on cuda,
                                           # one interpreter worker in the interpreter), see execute.executor
    executor: str = "local"                # 'local' (worker processes on this host) or 'ray' (actors, one per GPU)
    in_flight: int | None = Field(None, ge=1)  # candidates asked ahead of their results (None: the executor's
                                           # slots, twice that where builds run ahead); equal values give equal
                                           # archives on every executor
    build_jobs: int | None = Field(None, ge=1)  # build processes (None: the host's CPU cores, at most 8)

    @model_validator(mode="before")
    @classmethod
    def _old_budget_keys(cls, data: Any) -> Any:
        """Archives of format 1 and 2 kept the budget as three fields: read back into the one record."""
        if isinstance(data, dict) and any(k in data for k in OLD_BUDGET_KEYS):
            if "budget" in data:
                raise UsageError("the budget is given both as a record and as budget_* fields")
            data = dict(data)
            data["budget"] = {new: data.pop(old) for old, new in OLD_BUDGET_KEYS.items() if old in data}
        return data

    @field_validator("strategy")
    @classmethod
    def _strategy(cls, v: str, info: ValidationInfo) -> str:
        if v not in strategy_names():
            raise UsageError(f"{_name(info, 'strategy')} {v!r}: choose from {', '.join(strategy_names())}")
        return v

    @field_validator("executor")
    @classmethod
    def _executor(cls, v: str, info: ValidationInfo) -> str:
        if v not in EXECUTORS:
            raise UsageError(f"{_name(info, 'executor')} {v!r}: choose from {', '.join(EXECUTORS)}")
        return v

    @field_validator("profile_timeout_s")
    @classmethod
    def _profile_timeout(cls, v: float, info: ValidationInfo) -> float:
        if not v > 0:
            raise UsageError(f"{_name(info, 'profile_timeout_s')} {v:g}: seconds must be positive")
        return v

    @field_validator("screen_samples")
    @classmethod
    def _screen(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v is not None and v < 3:
            raise UsageError(f"{_name(info, 'screen_samples')} {v}: a screen needs at least 3 timing samples")
        return v

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> "RunOptions":
        """The fields against each other; with a bundle and workloads in the context, against those too."""
        from ..search import STRATEGIES, takes_prior
        names = (info.context or {}).get("names")
        wrong = [str(d) for d in self.devices or () if d.kind != self.device.kind]
        if wrong or self.devices == []:
            raise UsageError(f"{checks.name(names, 'devices')}: a run on {self.device.kind} needs "
                             f"{self.device.kind} devices" + (f", not {', '.join(wrong)}" if wrong else ""))
        by = checks.name(names, "strategy")
        if self.start is not None and self.strategy != PLANNER:
            raise UsageError(f"{checks.name(names, 'start')} is only used by {by} {PLANNER} "
                             f"(got {by} {self.strategy})")
        if self.prior is not None and not takes_prior(self.strategy):
            raise UsageError(f"{checks.name(names, 'prior')} is only used by {by} "
                             f"{', '.join(s for s in STRATEGIES if takes_prior(s))} (got {by} {self.strategy})")
        if info.context and "bundle" in info.context:
            self._check_against(info.context["bundle"], info.context.get("workloads") or [], names)
        return self

    def _check_against(self, bundle, workloads: list, names) -> None:
        checks.check_templates(self.templates, bundle, names)
        checks.check_baselines(self.baselines, bundle, names)
        checks.check_fixed(self.fixed, bundle, self.templates, names)
        checks.check_ray(self.executor)
        if workloads:
            checks.check_space(bundle, workloads, str(self.device), self.templates, self.fixed)
            checks.check_start(self.start, bundle, workloads, str(self.device), names)

    def checked(self, bundle, workloads: list[Workload], names: dict[str, str] | None = None) -> "RunOptions":
        """These options validated again against the op and its workloads (UsageError, unwrapped, when a check
        fails); the fields this invocation set stay the ones it set."""
        from ...base.usage import usage_error
        from pydantic import ValidationError
        try:
            return type(self).model_validate(self.model_dump(exclude_unset=True),
                                             context={"bundle": bundle, "workloads": workloads, "names": names})
        except ValidationError as e:
            raise usage_error(e) from None

    def as_dict(self) -> dict:
        """Every field as JSON (timeouts as {"check", "bench"})."""
        return self.model_dump(mode="json")

    def archived(self, key: dict, workloads: list[Workload]) -> dict:
        """What the archive's `options_json` holds: every field, the run key's record and the workloads."""
        return {**self.as_dict(), "options_format": OPTIONS_FORMAT, "key": key,
                "workloads": [w.model_dump(mode="json") for w in workloads]}

    @classmethod
    def from_archived(cls, stored: dict) -> "RunOptions":
        """The record archived by `archived` (or, unmarked, by the old `as_dict`, whose absent fields were
        defaults or None), validated whole: an unknown key is an error, not dropped."""
        return cls.model_validate({k: v for k, v in stored.items() if k not in RUN_KEYS})

    def resumed(self, stored: "RunOptions") -> "RunOptions":
        """The options a resumed run goes on with: the archived record with this invocation's fields over it, except
        the AS_BEFORE fields this invocation leaves None (the same first ask, space, pins, confirmation and warm
        start as before) and the KEPT fields it does not set (the same gate mode). A prior that differs from the
        archived one is refused by the controller."""
        return stored.model_copy(update={k: getattr(self, k) for k in type(self).model_fields
                                         if (k not in AS_BEFORE or getattr(self, k) is not None)
                                         and (k not in KEPT or k in self.model_fields_set)})


def _name(info: ValidationInfo, field: str) -> str:
    return checks.name((info.context or {}).get("names"), field)


@dataclass
class Progress:
    done: int = 0
    total: int = 0
    passed: int = 0
    replayed: int = 0
    best_us: dict[str, float] = field(default_factory=dict)
    last: str = ""
