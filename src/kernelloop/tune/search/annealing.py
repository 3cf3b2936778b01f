"""Simulated annealing over parameter neighbourhoods, with restarts from the supervisor.

The walk moves from the current configuration to a random unasked neighbour (one parameter changed; two when
the one-step neighbourhood is used up) and accepts it if better, or worse with probability
exp(-(log v_new - log v_cur) / T). T starts at the spread of the first log values and cools geometrically.
When the supervisor sees no gain beyond noise for `patience` evaluations, the walk restarts from a random
unasked configuration (reheated), and the restart is an event.
"""

from __future__ import annotations

import math

import numpy as np

from .base import EXPLORATION, SearchStrategy
from .encoding import SpaceEncoding
from .supervisor import Supervisor


class Annealing(SearchStrategy):
    name = "annealing"

    def __init__(self, space: list[dict], seed: int = 0, encoding: SpaceEncoding | None = None,
                 exploration: float = EXPLORATION, cooling: float = 0.97, patience: int = 30):
        super().__init__(space, seed, encoding, exploration)
        self.cooling = cooling
        self.current: int | None = None
        self.T: float | None = None
        self.T0: float | None = None
        self.supervisor = Supervisor(patience=patience)

    def _propose(self) -> int | None:
        if self.current is None:
            return self.random_unasked()
        if self.supervisor.stagnating:
            self.supervisor.intervened()
            self.T = self.T0
            row = self.random_unasked()
            self.log_event("supervisor", action="restart", reason=f"no gain in {self.supervisor.patience} evaluations",
                           best=self.best_value, target=row)
            self.current = None
            return row
        for radius in (1, 2, 3):
            near = self.enc.neighbours(self.current, radius=radius)
            near = near[~self.asked[near]]
            if near.size:
                return int(near[self.rng.integers(near.size)])
        return self.random_unasked()

    def _observe(self, row: int, value: float | None) -> None:
        self.supervisor.observe(value)
        if value is None:
            return
        if self.current is None or self.failed[self.current]:
            self.current = row
            return
        cur = math.log(self.values[self.current])
        new = math.log(value)
        if self.T is None:
            self.T0 = self.T = max(abs(new - cur), 0.05)
        if new <= cur or self.rng.random() < math.exp(-(new - cur) / max(self.T, 1e-9)):
            self.current = row
        self.T *= self.cooling
