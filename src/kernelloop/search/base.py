"""The strategy protocol, the base class of the model-based strategies, and the first two strategies.

A strategy is built over a finite list of valid configurations and a seed: `Cls(space, seed, **options)`.
`ask()` returns a configuration not asked before (or None when it has nothing left); `tell(config, value)`
reports its objective (lower is better; None = the configuration failed to build, verify or run). Same seed
and same tells => same trajectory. Strategies see configurations and numbers only: never the GPU, the
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


class Strategy(Protocol):
    name: str

    def ask(self) -> dict | None: ...

    def tell(self, config: dict, value: float | None) -> None: ...


def is_failure(value: float | None) -> bool:
    """None, NaN and infinities are failed evaluations."""
    return value is None or not math.isfinite(value)


class _OrderedStrategy:
    """Walks a fixed order of the space; subclasses choose the order."""

    name = "ordered"

    def __init__(self, space: list[dict], seed: int = 0):
        self.space = list(space)
        self.seed = seed
        self._order = self._make_order()
        self._pos = 0
        self._asked: set[str] = set()
        self.history: list[tuple[dict, float | None]] = []
        self.events: list[dict] = []

    def _make_order(self) -> list[int]:
        return list(range(len(self.space)))

    def ask(self) -> dict | None:
        while self._pos < len(self._order):
            cfg = self.space[self._order[self._pos]]
            self._pos += 1
            key = config_key(cfg)
            if key not in self._asked:
                self._asked.add(key)
                return dict(cfg)
        return None

    def tell(self, config: dict, value: float | None) -> None:
        self.history.append((dict(config), value))


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

    def __init__(self, space: list[dict], seed: int = 0, encoding: SpaceEncoding | None = None):
        self.space = list(space)
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.enc = encoding if encoding is not None else SpaceEncoding(self.space)
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
        self.asked[row] = True
        self.n_asked += 1
        self._unasked_cache = None
        return dict(self.space[row])

    def tell(self, config: dict, value: float | None) -> None:
        self.history.append((dict(config), value))
        row = self.enc.row_of(config)
        if row is None or self.told[row]:
            return  # a configuration from outside the space (or told twice) teaches nothing here
        if not self.asked[row]:
            self.asked[row] = True
            self.n_asked += 1
            self._unasked_cache = None
        self.told[row] = True
        self.order.append(row)
        if is_failure(value):
            self.failed[row] = True
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
