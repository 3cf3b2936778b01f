"""The options of a run (`RunOptions`: one record, archived whole) and the controller's progress."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from ..execute.evaluate import Timeouts
from ..records import Record, Workload
from ..records.device import Device
from ..search import DEFAULT_STRATEGY, STRATEGIES

PLANNER = "planner"   # `--strategy planner`: the rule planner proposes (kernelloop.propose.planner_proposer)
EXECUTORS = ("local", "ray")


def strategy_names() -> list[str]:
    """Every `--strategy` choice: the ask/tell search strategies and the rule planner."""
    return sorted([*STRATEGIES, PLANNER])


OPTIONS_FORMAT = 2   # archived options: 2 = every RunOptions field; 1 (unmarked): the old as_dict
RUN_KEYS = ("key", "secret", "workloads", "options_format")   # archived beside the options, not options
AS_BEFORE = ("start", "templates", "fixed", "baselines", "prior")   # None on resume: the archived value
KEPT = ("gate",)   # on resume the archived value unless this invocation sets the field
GATE_MODES = ("on", "off", "audit")
GateMode = Literal["on", "off", "audit"]


class RunOptions(Record):
    """The options of a run: one record, archived whole when the run is created (`archived`) and read back whole
    with `model_validate` on resume (`from_archived`); `resumed` says which fields a resuming invocation sets."""

    device: Device                         # the kind of device ('cuda' or 'interpret'); `devices` names which
    budget_evals: int | None = 24          # per workload
    budget_seconds: float | None = None    # whole run (this invocation)
    budget_gpu_seconds: float | None = None  # whole run: compile + verify + timing seconds of its trials
    screen_samples: int | None = None      # time candidates the model ranks poorly with this many samples first;
                                           # full timing only when successive halving promotes (search/budget.py)
    strategy: str = DEFAULT_STRATEGY
    seed: int = 0
    checks: int = 2
    confirm: bool = True
    sanitize: bool = True                  # compute-sanitizer over each winner before its confirmation
    baselines: list[str] | None = None
    static_rules: bool = True              # source rules screen every candidate before it runs
    gate: GateMode = "on"                  # the static gate in the build stage (kernelloop.gate): 'on' rejects,
                                           # 'audit' records its decisions and rejects nothing, 'off': no gate
    timeouts: Timeouts = Field(default_factory=Timeouts)
    start: dict[str, str] | None = None    # planner: first configuration ("NAME": "VALUE"), see spec.start
    profile_timeout_s: float = 300.0       # planner: deadline of one Nsight Compute run
    templates: list[str] | None = None     # search only these templates of the spec (None: all)
    fixed: dict[str, str] | None = None    # pin parameters (NAME: value text): only templates having them, only
                                           # configurations with these values
    prior: dict | None = None              # staged: warm start from recordings, RecordedPrior.as_dict() (files:
                                           # path and sha256 each; configurations), see kernelloop.replay.prior
    devices: list[Device] | None = None    # one evaluation worker each (None: every GPU of GPU 0's model on cuda,
                                           # one interpreter worker in the interpreter), see execute.executor
    executor: str = "local"                # 'local' (worker processes on this host) or 'ray' (actors, one per GPU)
    in_flight: int | None = Field(None, ge=1)  # candidates asked ahead of their results (None: the executor's
                                           # slots, twice that where builds run ahead); equal values give equal
                                           # archives on every executor
    build_jobs: int | None = Field(None, ge=1)  # build processes (None: the host's CPU cores, at most 8)

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


@dataclass
class Progress:
    done: int = 0
    total: int = 0
    passed: int = 0
    replayed: int = 0
    best_us: dict[str, float] = field(default_factory=dict)
    last: str = ""
