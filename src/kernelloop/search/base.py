"""The strategy protocol and the first two strategies.

A strategy is built over a finite list of valid configurations and a seed. `ask()` returns a configuration
not asked before (or None when it has nothing left); `tell(config, value)` reports its objective (lower is
better; None = the configuration failed). Same seed and same tells => same trajectory.
"""

from __future__ import annotations

import random
from typing import Protocol

from ..records import canonical_json


def config_key(config: dict) -> str:
    return canonical_json(config)


class Strategy(Protocol):
    name: str

    def ask(self) -> dict | None: ...

    def tell(self, config: dict, value: float | None) -> None: ...


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


STRATEGIES = {"exhaustive": Exhaustive, "random": RandomSearch}


def make_strategy(name: str, space: list[dict], seed: int) -> Strategy:
    try:
        return STRATEGIES[name](space, seed)
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; choose from {sorted(STRATEGIES)}") from None
