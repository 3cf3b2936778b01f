"""The strategy protocol, the base class of the model-based strategies, and the first two strategies.

A strategy is built over a finite list of valid configurations and a seed: `Cls(space, seed, **options)`.
`ask()` returns a configuration not asked before (or None when it has nothing left); `tell(config, value)`
reports its objective (lower is better; None = the configuration failed to build, verify or run). `tell` also
takes, by keyword, `status` (the verdict or recording status of a failure: COMPILE_ERROR, OUT_OF_RESOURCES,
WRONG_VALUES, TIMEOUT, ...; see `feasibility.failure_kind`) and `costs` (what the evaluation cost in GPU seconds:
a number, or a mapping such as {"compile_s": .., "verify_s": .., "bench_s": ..} that is summed); both default to
None, so a caller that passes neither keeps working. Same seed and same tells => same trajectory.

Every strategy is failure-aware: once failures were told, a `FeasibilityGuard` (a logistic model of failure over
the configuration encoding) keeps its proposals out of the region predicted to fail, except at the recorded
exploration rate (`exploration`, 0.1 by default); `feasibility_stats` counts what it avoided and explored. Strategies see configurations and numbers only: never the GPU, the
compiler or the archive. What a strategy wants archived (supervisor interventions, lineage) it appends to
`events`, a list of JSON-able dicts the controller may copy into the archive.
"""

from __future__ import annotations

import inspect
import math
import random
from typing import Protocol

import numpy as np

from .encoding import SpaceEncoding, config_key
from .feasibility import FeasibilityGuard, failure_kind

EXPLORATION = 0.1   # default rate at which a proposal predicted to fail is evaluated anyway


class Strategy(Protocol):
    name: str

    def ask(self) -> dict | None: ...

    def tell(self, config: dict, value: float | None, *, status: str | None = None,
             costs: float | dict | None = None) -> None: ...


def is_failure(value: float | None) -> bool:
    """None, NaN and infinities are failed evaluations."""
    return value is None or not math.isfinite(value)


def cost_seconds(costs: float | dict | None) -> float | None:
    """GPU seconds of one evaluation from what `tell` was given (a number, or a mapping of parts summed)."""
    if costs is None:
        return None
    if isinstance(costs, dict):
        parts = [float(v) for k, v in costs.items() if isinstance(v, (int, float)) and k != "wall_s"]
        return sum(parts) if parts else None
    return float(costs)


class _OrderedStrategy:
    """Walks a fixed order of the space; subclasses choose the order.

    Failure-aware: once failures were told, a configuration the feasibility model predicts to fail is deferred
    (walked after the rest of the order) unless the exploration draw keeps it; the encoding and the model are
    built at the first failure, from everything told so far."""

    name = "ordered"

    def __init__(self, space: list[dict], seed: int = 0, exploration: float = EXPLORATION):
        self.space = list(space)
        self.seed = seed
        self.exploration = exploration
        self._order = self._make_order()
        self._pos = 0
        self._deferred: list[int] = []
        self._asked: set[str] = set()
        self._row = {config_key(c): i for i, c in enumerate(self.space)}
        self.history: list[tuple[dict, float | None]] = []
        self.events: list[dict] = []
        self.guard: FeasibilityGuard | None = None
        self._rng = np.random.default_rng([seed, 0xFEA5])
        self.spent_s = 0.0

    def _make_order(self) -> list[int]:
        return list(range(len(self.space)))

    @property
    def feasibility_stats(self) -> dict:
        base = {"proposals": 0, "predicted_infeasible": 0, "avoided": 0, "explored": 0}
        return dict(self.guard.stats) if self.guard else base

    def _next(self) -> int | None:
        while self._pos < len(self._order):
            i = self._order[self._pos]
            self._pos += 1
            if config_key(self.space[i]) in self._asked:
                continue
            if self.guard is not None and self.guard.active:
                ok, event = self.guard.accept(i)
                if event:
                    self.events.append({"kind": "feasibility", "strategy": self.name,
                                        "evaluations": len(self.history), "proposed": self.space[i], **event})
                if not ok:
                    self._deferred.append(i)
                    continue
            return i
        while self._deferred:
            i = self._deferred.pop(0)
            if config_key(self.space[i]) not in self._asked:
                return i
        return None

    def ask(self) -> dict | None:
        i = self._next()
        if i is None:
            return None
        self._asked.add(config_key(self.space[i]))
        return dict(self.space[i])

    def tell(self, config: dict, value: float | None, *, status: str | None = None,
             costs: float | dict | None = None) -> None:
        self.history.append((dict(config), value))
        self.spent_s += cost_seconds(costs) or 0.0
        row = self._row.get(config_key(config))
        if row is None:
            return
        failed = is_failure(value)
        if self.guard is None and failed:
            self.guard = FeasibilityGuard(SpaceEncoding(self.space), self._rng, self.exploration)
            for c, v in self.history[:-1]:
                r = self._row.get(config_key(c))
                if r is not None:
                    self.guard.observe(r, is_failure(v))
        if self.guard is not None:
            self.guard.observe(row, failed, failure_kind(status) if failed else None)


class Exhaustive(_OrderedStrategy):
    """Every configuration in declaration order."""

    name = "exhaustive"


class RandomSearch(_OrderedStrategy):
    """A seeded random permutation of the space (sampling without replacement)."""

    name = "random"

    def _make_order(self) -> list[int]:
        order = list(range(len(self.space)))
        random.Random(self.seed).shuffle(order)
        return order


class SearchStrategy:
    """Base of the strategies that model the space: bookkeeping of asked rows, told values and events.

    Subclasses implement `_propose() -> row | None` (any row; an asked or invalid one is replaced by a random
    unasked row, so the contract holds even when a heuristic misfires) and may override `_observe(row, value)`.
    Values are kept as told; `failed[row]` marks failures. Randomness comes only from `self.rng`, seeded.
    """

    name = "base"

    guard_proposals = True   # whether `ask` passes every proposal through the feasibility guard
    guard_threshold = 0.5    # predicted probability of failure above which the guard replaces a proposal

    def __init__(self, space: list[dict], seed: int = 0, encoding: SpaceEncoding | None = None,
                 exploration: float = EXPLORATION):
        self.space = list(space)
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.enc = encoding if encoding is not None else SpaceEncoding(self.space)
        self.exploration = exploration
        # its own generator: the exploration draws must not shift the strategy's own random stream
        self.guard = FeasibilityGuard(self.enc, np.random.default_rng([seed, 0xFEA5]), exploration,
                                      threshold=self.guard_threshold)
        self.kinds: dict[int, str] = {}        # row -> failure kind of a failed row
        self.costs = np.full(len(self.space), np.nan)   # GPU seconds of each told row, where told
        self.spent_s = 0.0
        n = len(self.space)
        self.asked = np.zeros(n, dtype=bool)
        self.told = np.zeros(n, dtype=bool)
        self.failed = np.zeros(n, dtype=bool)
        self.values = np.full(n, np.inf)
        self.order: list[int] = []             # rows in the order they were told
        self.history: list[tuple[dict, float | None]] = []
        self.events: list[dict] = []
        self.best_row: int | None = None
        self.n_asked = 0
        self._unasked_cache: np.ndarray | None = None

    # -- the protocol ---------------------------------------------------------------------------------------
    def ask(self) -> dict | None:
        if self.n_asked >= len(self.space):
            return None
        row = self._propose()
        if row is None or not (0 <= row < len(self.space)) or self.asked[row]:
            row = self.random_unasked()
        if self.guard_proposals:
            row = self._guarded(row)
        self.asked[row] = True
        self.n_asked += 1
        self._unasked_cache = None
        return dict(self.space[row])

    def _guarded(self, row: int) -> int:
        new, event = self.guard.check(row, self.unasked())
        if event:
            self.log_event("feasibility", proposed=self.space[row],
                           **({"instead": self.space[new]} if new != row else {}), **event)
        if new != row:
            self._withdrawn(row)
        return new

    @property
    def feasibility_stats(self) -> dict:
        return dict(self.guard.stats)

    def tell(self, config: dict, value: float | None, *, status: str | None = None,
             costs: float | dict | None = None) -> None:
        self.history.append((dict(config), value))
        spent = cost_seconds(costs)
        self.spent_s += spent or 0.0
        row = self.enc.row_of(config)
        if row is None or self.told[row]:
            return  # a configuration from outside the space (or told twice) teaches nothing here
        if not self.asked[row]:
            self.asked[row] = True
            self.n_asked += 1
            self._unasked_cache = None
        self.told[row] = True
        self.order.append(row)
        if spent is not None:
            self.costs[row] = spent
        failed = is_failure(value)
        self.guard.observe(row, failed, failure_kind(status) if failed else None)
        if failed:
            self.failed[row] = True
            self.kinds[row] = failure_kind(status)
        else:
            self.values[row] = float(value)
            if self.best_row is None or value < self.values[self.best_row]:
                self.best_row = row
        self._observe(row, None if is_failure(value) else float(value))

    # -- hooks ----------------------------------------------------------------------------------------------
    def _propose(self) -> int | None:
        return None

    def _observe(self, row: int, value: float | None) -> None:
        pass

    def _withdrawn(self, row: int) -> None:
        """`row`, proposed by `_propose`, was replaced by the feasibility guard (it will not be evaluated now)."""

    # -- helpers --------------------------------------------------------------------------------------------
    @property
    def best_value(self) -> float:
        return math.inf if self.best_row is None else float(self.values[self.best_row])

    def unasked(self) -> np.ndarray:
        """Rows not asked yet (cached until the next ask)."""
        if self._unasked_cache is None:
            self._unasked_cache = np.flatnonzero(~self.asked)
        return self._unasked_cache

    def random_unasked(self) -> int:
        free = self.unasked()
        return int(free[self.rng.integers(free.size)])

    def log_event(self, kind: str, **data) -> None:
        """Record something the archive should keep (what, when, why)."""
        self.events.append({"kind": kind, "strategy": self.name, "evaluations": len(self.order), **data})


def _registry() -> dict[str, type]:
    return {"exhaustive": Exhaustive, "random": RandomSearch}


STRATEGIES: dict[str, type] = _registry()


def takes_prior(name: str) -> bool:
    """Whether strategy `name` can be warm-started by a transfer prior (its constructor has `prior=`)."""
    return name in STRATEGIES and "prior" in inspect.signature(STRATEGIES[name]).parameters


def make_strategy(name: str, space: list[dict], seed: int, **options) -> Strategy:
    """Build strategy `name` over `space`; `options` go to its constructor (e.g. a transfer prior)."""
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; choose from {sorted(STRATEGIES)}") from None
    return cls(space, seed, **options)
