"""An extremely-randomised-trees regression forest in numpy (experimental surrogate)."""

from __future__ import annotations

import numpy as np


class Forest:
    def __init__(self, n_trees: int = 20, min_leaf: int = 2, n_try: int = 8, bootstrap: bool = True):
        self.n_trees, self.min_leaf, self.n_try, self.bootstrap = n_trees, min_leaf, n_try, bootstrap

    def fit(self, X: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        self.trees = [self._tree(X, y, rng) for _ in range(self.n_trees)]

    def _tree(self, X, y, rng):
        n, d = X.shape
        idx0 = rng.integers(0, n, n) if self.bootstrap else np.arange(n)
        feat, thr, left, right, val = [], [], [], [], []
        stack = [(idx0, 0)]
        # nodes are appended in creation order; children filled later
        def new():
            feat.append(-1); thr.append(0.0); left.append(-1); right.append(-1); val.append(0.0)
            return len(feat) - 1
        root = new()
        work = [(root, idx0)]
        while work:
            node, idx = work.pop()
            yy = y[idx]
            val[node] = float(yy.mean())
            if idx.size < 2 * self.min_leaf or np.ptp(yy) < 1e-12:
                continue
            Xi = X[idx]
            lo, hi = Xi.min(0), Xi.max(0)
            cand = np.flatnonzero(hi > lo)
            if cand.size == 0:
                continue
            fs = rng.choice(cand, min(self.n_try, cand.size), replace=False)
            best, bf, bt = np.inf, -1, 0.0
            for f in fs:
                t = rng.uniform(lo[f], hi[f])
                m = Xi[:, f] <= t
                nl = m.sum()
                if nl < self.min_leaf or idx.size - nl < self.min_leaf:
                    continue
                sse = yy[m].var() * nl + yy[~m].var() * (idx.size - nl)
                if sse < best:
                    best, bf, bt = sse, f, t
            if bf < 0:
                continue
            m = Xi[:, bf] <= bt
            feat[node], thr[node] = int(bf), float(bt)
            l, r = new(), new()
            left[node], right[node] = l, r
            work.append((l, idx[m])); work.append((r, idx[~m]))
        return (np.array(feat), np.array(thr), np.array(left), np.array(right), np.array(val))

    def predict_all(self, X: np.ndarray) -> np.ndarray:
        out = np.empty((self.n_trees, len(X)))
        rows = np.arange(len(X))
        for k, (feat, thr, left, right, val) in enumerate(self.trees):
            node = np.zeros(len(X), dtype=np.int64)
            while True:
                f = feat[node]
                inner = f >= 0
                if not inner.any():
                    break
                go = np.where(X[rows, np.maximum(f, 0)] <= thr[node], left[node], right[node])
                node = np.where(inner, go, node)
            out[k] = val[node]
        return out

    def predict(self, X):
        P = self.predict_all(X)
        return P.mean(0), P.std(0)
