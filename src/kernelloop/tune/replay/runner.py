"""The replay executor: the controller's ask -> evaluate -> tell loop, served from a recorded space.

Evaluation is a look-up, so a strategy's whole trajectory on a 18,000-configuration space takes milliseconds
plus the strategy's own time, which is measured separately (`strategy_seconds`, wall time inside ask/tell).
The executor is also a referee: a configuration outside the space or asked twice is a ReplayError (a broken
strategy), never silently served.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..search import make_strategy
from ..search.encoding import config_key
from .metrics import best_so_far
from .space import RecordedSpace


class ReplayError(RuntimeError):
    """A strategy broke the protocol (asked a configuration outside the space, or one twice)."""


@dataclass
class Trajectory:
    """One replayed run: what was evaluated, in order, and what it cost the strategy."""

    space: str
    strategy: str
    seed: int
    budget: int
    values: list[float | None]                 # objective of each evaluation in order (None = failed)
    keys: list[str] = field(default_factory=list)
    strategy_seconds: float = 0.0              # wall time spent inside ask() and tell()
    events: list[dict] = field(default_factory=list)
    costs: list[float | None] = field(default_factory=list)   # GPU seconds of each evaluation, where recorded

    def curve(self) -> np.ndarray:
        """Best-so-far objective after 1..budget evaluations (inf before the first success; flat after a stop)."""
        return best_so_far(self.values, self.budget)

    @property
    def evaluations(self) -> int:
        return len(self.values)

    def as_dict(self) -> dict:
        return {"space": self.space, "strategy": self.strategy, "seed": self.seed, "budget": self.budget,
                "values": self.values, "strategy_seconds": self.strategy_seconds, "events": self.events}


def replay(space: RecordedSpace, strategy: str, seed: int, budget: int, record_keys: bool = False,
           **options) -> Trajectory:
    """Run `strategy` (a registered name) for up to `budget` evaluations on `space` and return its trajectory."""
    strat = make_strategy(strategy, space.configs, seed, **options)
    return drive(strat, space, seed, budget, name=strategy, record_keys=record_keys)


def drive(strat, space: RecordedSpace, seed: int, budget: int, name: str | None = None,
          record_keys: bool = False) -> Trajectory:
    """The loop itself, for an already built strategy object."""
    values: list[float | None] = []
    costs: list[float | None] = []
    keys: list[str] = []
    asked: set[str] = set()
    spent = 0.0
    for _ in range(min(budget, len(space))):
        t0 = time.perf_counter()
        cfg = strat.ask()
        spent += time.perf_counter() - t0
        if cfg is None:
            break
        key = config_key(cfg)
        if key in asked:
            raise ReplayError(f"{name or strat.name} asked {key} twice")
        asked.add(key)
        try:
            row = space.index(cfg)
        except KeyError:
            raise ReplayError(f"{name or strat.name} asked {key}, which is not in {space.name}") from None
        value = space.values[row]
        # as the controller does: a failure's recorded status (its kind) and what the evaluation cost
        status = None if value is not None else space.statuses[row]
        t0 = time.perf_counter()
        strat.tell(cfg, value, status=status, costs=space.costs[row] if space.costs else None)
        spent += time.perf_counter() - t0
        values.append(value)
        costs.append(space.costs[row] if space.costs else None)
        if record_keys:
            keys.append(key)
    return Trajectory(space.name, name or strat.name, seed, budget, values, keys, spent,
                      list(getattr(strat, "events", [])), costs if space.costs else [])
