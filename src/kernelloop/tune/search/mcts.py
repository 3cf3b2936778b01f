"""Monte-Carlo tree search with progressive widening over parameter assignments.

The tree assigns one parameter per level (parameters with more values first). A node may have at most
ceil(c * visits ** alpha) children (progressive widening): a node visited often gets to try more values, one
seldom visited concentrates on the values it has. Selection uses UCB1 on a reward in [0, 1] (the fraction of
evaluated configurations this one beats, so the scale of the objective does not matter); a leaf is completed
by a random unasked configuration that matches its prefix (the rollout), and the reward is backed up along
every prefix of that configuration. Failed configurations get reward 0.
"""

from __future__ import annotations

import math

import numpy as np

from .base import EXPLORATION, SearchStrategy
from .encoding import SpaceEncoding


class MCTS(SearchStrategy):
    name = "mcts"

    def __init__(self, space: list[dict], seed: int = 0, encoding: SpaceEncoding | None = None,
                 exploration: float = EXPLORATION, widening: float = 1.0, alpha: float = 0.5, ucb: float = 0.5):
        super().__init__(space, seed, encoding, exploration)
        cols = np.flatnonzero(self.enc.varying)
        self.cols = cols[np.argsort(-self.enc.n_levels[cols], kind="stable")]
        self.widening, self.alpha, self.ucb = widening, alpha, ucb
        self.stats: dict[tuple, list[float]] = {(): [0, 0.0]}     # prefix -> [visits, total reward]
        self.children: dict[tuple, list[int]] = {}                 # prefix -> expanded level values
        self._told_sorted: list[float] = []

    def _matching(self, prefix: tuple) -> np.ndarray:
        free = self.unasked()
        if not prefix:
            return free
        X = self.enc.X[np.ix_(free, self.cols[: len(prefix)])]
        return free[(X == np.array(prefix)).all(axis=1)]

    def _propose(self) -> int | None:
        prefix: tuple = ()
        while len(prefix) < self.cols.size:
            rows = self._matching(prefix)
            if rows.size == 0:
                return None
            col = self.cols[len(prefix)]
            available = np.unique(self.enc.X[rows, col])
            kids = [v for v in self.children.setdefault(prefix, []) if v in set(available.tolist())]
            visits = self.stats.get(prefix, [0, 0.0])[0]
            limit = math.ceil(self.widening * (visits + 1) ** self.alpha)
            fresh = [int(v) for v in available if int(v) not in self.children[prefix]]
            if fresh and len(kids) < limit:
                v = fresh[self.rng.integers(len(fresh))]
                self.children[prefix].append(v)
                prefix = prefix + (v,)
                break
            if not kids:
                kids = [int(v) for v in available]
            logn = math.log(max(visits, 1))

            def ucb(v):
                n, total = self.stats.get(prefix + (v,), [0, 0.0])
                return math.inf if n == 0 else total / n + self.ucb * math.sqrt(logn / n)

            scores = [ucb(v) for v in kids]
            best = max(scores)
            ties = [v for v, s in zip(kids, scores) if s == best]
            prefix = prefix + (ties[self.rng.integers(len(ties))],)
        rows = self._matching(prefix)
        return int(rows[self.rng.integers(rows.size)]) if rows.size else None

    def _observe(self, row: int, value: float | None) -> None:
        if value is None:
            reward = 0.0
        else:
            import bisect
            worse = len(self._told_sorted) - bisect.bisect_right(self._told_sorted, value)
            reward = (worse + 1) / (len(self._told_sorted) + 1)
            bisect.insort(self._told_sorted, value)
        levels = tuple(int(v) for v in self.enc.X[row, self.cols])
        for depth in range(len(levels) + 1):
            s = self.stats.setdefault(levels[:depth], [0, 0.0])
            s[0] += 1
            s[1] += reward
