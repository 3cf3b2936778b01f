"""A genetic/evolutionary population with lineage: tournament selection, uniform crossover, step mutation.

The population is every configuration evaluated so far (an elitist (mu + lambda) scheme: a child competes
with all its ancestors). A child is built on level indices: each parameter is taken from one of two parents
chosen by tournament, then each parameter mutates with probability 1/d — a numeric one by one or two levels,
a categorical one to any level. A child that is not in the space, or already asked, is replaced by the
nearest unasked configuration (scaled-step distance). Every child's parents are recorded in `lineage` and as
a 'lineage' event, so the archive can hold the family tree. Failed configurations never become parents.
"""

from __future__ import annotations

import numpy as np

from .base import EXPLORATION, SearchStrategy
from .encoding import SpaceEncoding


class Evolution(SearchStrategy):
    name = "evolution"

    def __init__(self, space: list[dict], seed: int = 0, encoding: SpaceEncoding | None = None,
                 exploration: float = EXPLORATION, population: int = 16, tournament: int = 3, elite_pool: int = 32):
        super().__init__(space, seed, encoding, exploration)
        self.population = min(population, len(self.space))
        self.tournament = tournament
        self.elite_pool = elite_pool
        self.lineage: dict[int, tuple[int, int]] = {}
        self.generation = 0

    def _pick(self, pool: np.ndarray) -> int:
        contenders = self.rng.choice(pool, min(self.tournament, pool.size), replace=False)
        return int(contenders[np.argmin(self.values[contenders])])

    def _propose(self) -> int | None:
        told = np.array(self.order, dtype=np.int64)
        ok = told[~self.failed[told]] if told.size else told
        if ok.size < min(self.population, 4):
            return self.random_unasked()
        pool = ok[np.argsort(self.values[ok], kind="stable")[: self.elite_pool]]
        a, b = self._pick(pool), self._pick(pool)
        X, d = self.enc.X, self.enc.X.shape[1]
        child = np.where(self.rng.random(d) < 0.5, X[a], X[b])
        for j in np.flatnonzero(self.enc.varying):
            if self.rng.random() < 1.0 / max(1, self.enc.varying.sum()):
                n = int(self.enc.n_levels[j])
                if self.enc.ordinal[j]:
                    child[j] = int(np.clip(child[j] + self.rng.choice([-2, -1, 1, 2]), 0, n - 1))
                else:
                    child[j] = int(self.rng.integers(n))
        row = self.enc.row_of_levels(child)
        if row is None or self.asked[row]:
            free = self.unasked()
            dist = self.enc.distances_to(self.enc.point(child), free)
            row = int(free[np.argmin(dist)])
        self.lineage[row] = (a, b)
        if len(self.order) % self.population == 0:
            self.generation += 1
        self.log_event("lineage", child=self.space[row], parents=[self.space[a], self.space[b]],
                       generation=self.generation)
        return row
