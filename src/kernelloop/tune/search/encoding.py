"""A numeric view of a finite configuration space, shared by the strategies that reason about structure.

Every configuration becomes a row of level indices, one column per parameter (the union of the keys of all
configurations, so spaces that mix templates with different parameters work: a missing key is its own level).
Levels of a numeric parameter are sorted, so index distance is "how many steps apart" (16 -> 32 -> 64 is one
step each); other parameters are categorical. On top of that the encoding answers the questions local search
and surrogates ask, vectorised over the whole space: which rows are neighbours of a row, how far every row is
from a row, and the row of a configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...base.records import canonical_json

_MISSING = "<absent>"


def config_key(config: dict) -> str:
    """The identity of a configuration: its canonical JSON."""
    return canonical_json(config)


def _sort_levels(values: set) -> tuple[list, bool]:
    """Numeric levels in numeric order (ordinal); anything else in a stable textual order (categorical)."""
    if all(isinstance(v, (int, float)) for v in values):
        return sorted(values, key=float), True
    return sorted(values, key=lambda v: (type(v).__name__, repr(v))), False


@dataclass(frozen=True)
class Param:
    """One column of the encoding: its name, its levels in order, and whether the order means something."""

    name: str
    levels: tuple
    ordinal: bool


class SpaceEncoding:
    """Level-index rows for a list of configurations, with neighbourhood and distance queries.

    `X[i, j]` is the level index of parameter j in configuration i; `pos[i, j]` is that index scaled to [0, 1]
    (0 for a parameter with one level), the coordinate used by distances and surrogates.
    """

    def __init__(self, space: list[dict]):
        self.space = space
        names: list[str] = []
        seen: set[str] = set()
        for cfg in space:
            for k in cfg:
                if k not in seen:
                    seen.add(k)
                    names.append(k)
        levels = {n: set() for n in names}
        for cfg in space:
            for n in names:
                levels[n].add(cfg.get(n, _MISSING))
        self.params: list[Param] = []
        lookup: list[dict] = []
        for n in names:
            ordered, ordinal = _sort_levels(levels[n])
            self.params.append(Param(n, tuple(ordered), ordinal))
            lookup.append({_hashable(v): i for i, v in enumerate(ordered)})
        self._lookup = lookup
        self._names = set(names)
        d = len(names)
        self.X = np.zeros((len(space), d), dtype=np.int32)
        for i, cfg in enumerate(space):
            for j, n in enumerate(names):
                self.X[i, j] = lookup[j][_hashable(cfg.get(n, _MISSING))]
        self.n_levels = np.array([len(p.levels) for p in self.params], dtype=np.int32)
        scale = np.maximum(self.n_levels - 1, 1).astype(np.float64)
        self.pos = self.X / scale
        self.ordinal = np.array([p.ordinal for p in self.params], dtype=bool)
        self._row_of = {tuple(r): i for i, r in enumerate(self.X.tolist())}
        # Columns that vary carry information; constant ones are ignored by distances.
        self.varying = self.n_levels > 1

    # -- identity -----------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.space)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def encode(self, config: dict) -> tuple[int, ...] | None:
        """Level indices of a configuration, or None if it uses a value the space does not have."""
        out = []
        for j, p in enumerate(self.params):
            idx = self._lookup[j].get(_hashable(config.get(p.name, _MISSING)))
            if idx is None:
                return None
            out.append(idx)
        return tuple(out)

    def row_of(self, config: dict) -> int | None:
        """The row of a configuration in the space, or None when it is not one of them."""
        if any(k not in self._names for k in config):
            return None
        enc = self.encode(config)
        return None if enc is None else self._row_of.get(enc)

    def row_of_levels(self, levels) -> int | None:
        """The row with exactly these level indices, or None when that combination is not in the space."""
        return self._row_of.get(tuple(int(v) for v in levels))

    # -- geometry -----------------------------------------------------------------------------------------------
    def distances(self, row: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Distance of every row (or of `rows`) to `row`: scaled steps on ordinal columns, 0/1 on categorical ones."""
        return self.distances_to(self.pos[row], rows)

    def point(self, levels) -> np.ndarray:
        """Scaled coordinates of a level-index vector (which need not be a row of the space)."""
        return np.asarray(levels, dtype=np.float64) / np.maximum(self.n_levels - 1, 1)

    def distances_to(self, point: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Distance of every row (or of `rows`) to a point in scaled coordinates (see `distances`)."""
        X = self.pos if rows is None else self.pos[rows]
        diff = np.abs(X - point)
        cat = ~self.ordinal
        if cat.any():
            diff[:, cat] = (diff[:, cat] > 0).astype(np.float64)
        return diff[:, self.varying].sum(axis=1)

    def hamming(self, row: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Number of parameters in which every row (or `rows`) differs from `row`."""
        X = self.X if rows is None else self.X[rows]
        return (X != self.X[row]).sum(axis=1)

    def neighbours(self, row: int, radius: int = 1) -> np.ndarray:
        """Rows that differ from `row` in 1..radius parameters, nearest (in scaled steps) first, ties by row."""
        ham = self.hamming(row)
        rows = np.flatnonzero((ham >= 1) & (ham <= radius))
        if rows.size == 0:
            return rows
        dist = self.distances(row, rows)
        return rows[np.lexsort((rows, dist))]

    def step_neighbours(self, row: int) -> np.ndarray:
        """For each parameter and direction, the nearest row that changes only that parameter (an ordinal
        parameter moves to the nearest valid level up and down; a categorical one to every other level)."""
        ham = self.hamming(row)
        rows = np.flatnonzero(ham == 1)
        if rows.size == 0:
            return rows
        col = np.argmax(self.X[rows] != self.X[row], axis=1)
        delta = self.X[rows, col] - self.X[row, col]
        keep = []
        for j in np.unique(col):
            mask = col == j
            r, d = rows[mask], delta[mask]
            if self.ordinal[j]:
                for sign in (-1, 1):
                    side = np.flatnonzero(np.sign(d) == sign)
                    if side.size:
                        keep.append(r[side[np.argmin(np.abs(d[side]))]])
            else:
                keep.extend(r.tolist())
        return np.array(sorted(keep), dtype=np.int64)


def _hashable(v):
    """Lists (JSON arrays) as tuples, so any JSON value can be a level."""
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v
