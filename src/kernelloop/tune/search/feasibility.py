"""Where kernels fail: failure kinds, a feasibility model over the configuration encoding, and the guard every
strategy puts between its proposals and the evaluator.

- `failure_kind(status)` maps a verdict or recording status to one of the kinds a strategy learns from
  differently: "build" (compile error), "resources" (out of registers / shared memory / a launch limit),
  "runtime" (crash, illegal access), "wrong" (a verification failure), "timeout", "rejected" (a static rule),
  "failed" (no status given). `KIND_WEIGHT` is how strongly each kind says "this region is infeasible": build,
  resources, runtime and rejected are properties of the configuration (1.0); a wrong answer is often one
  combination's bug (0.5); a timeout is as much "very slow" as "broken" (0.25; `Staged` also models it as a
  very slow value).
- `FeasibilityModel`: an L2-regularised logistic regression of "this configuration fails" on the encoding
  (each numeric parameter's scaled level position, so thresholds such as "tile x stages beyond the shared
  memory" are a line, and each parameter's one-hot levels), fitted by Newton steps on the weighted told rows;
  `p_fail()` is its prediction for every row of the space. It is only active once a failure was told.
- `FeasibilityGuard`: what a strategy does with the model. A proposal the model predicts to fail
  (p_fail > `threshold`) is replaced by the nearest unasked configuration predicted feasible (scaled-step
  distance over the encoding, then lower p_fail), except with probability `exploration` (the recorded
  exploration rate), when it is evaluated anyway so a wrong model can be corrected. Both are counted
  (`stats`) and become events ("feasibility": avoid / explore), so the archive keeps how far the search
  strayed into predicted failures and why.
"""

from __future__ import annotations

import numpy as np

from .encoding import SpaceEncoding

KIND_WEIGHT = {"build": 1.0, "resources": 1.0, "runtime": 1.0, "rejected": 1.0, "failed": 1.0,
               "wrong": 0.5, "timeout": 0.25}

_RESOURCE_WORDS = ("resource", "shared memory", "launch limit", "registers", "runtimefailedconfig")


def failure_kind(status: str | None) -> str:
    """The kind of a failed evaluation from its status (a verdict name, a recording's status, or None)."""
    if not status:
        return "failed"
    s = str(status).lower()
    if s.startswith("wrong"):
        return "wrong"
    if "timeout" in s:
        return "timeout"
    if "compil" in s or "build" in s:
        return "build"
    if any(w in s for w in _RESOURCE_WORDS):
        return "resources"
    if "runtime" in s or "error" in s:
        return "runtime"
    if "reject" in s:
        return "rejected"
    return "failed"


def feasibility_features(enc: SpaceEncoding) -> np.ndarray:
    """Feature matrix of every row: scaled level position of each varying numeric parameter (with >2 levels),
    the products of those positions two by two (resource limits couple parameters: tile x stages), and the
    one-hot levels of each varying parameter."""
    cols, ords = [], []
    for j, p in enumerate(enc.params):
        if not enc.varying[j]:
            continue
        if p.ordinal and len(p.levels) > 2:
            cols.append(enc.pos[:, j:j + 1])
            ords.append(j)
        cols.append((enc.X[:, j:j + 1] == np.arange(len(p.levels))[None, :]).astype(np.float64))
    for a in range(len(ords)):
        for b in range(a + 1, len(ords)):
            cols.append(enc.pos[:, ords[a]:ords[a] + 1] * enc.pos[:, ords[b]:ords[b] + 1])
    return np.hstack(cols) if cols else np.zeros((len(enc), 0))


class FeasibilityModel:
    """Logistic regression of failure on the encoding, refitted lazily when new rows were told."""

    def __init__(self, enc: SpaceEncoding, ridge: float = 0.1, steps: int = 12):
        self.enc = enc
        self.F = feasibility_features(enc)
        self.ridge = ridge
        self.steps = steps
        self.rows: list[int] = []
        self.labels: list[float] = []      # 1.0 failed, 0.0 ran
        self.weights: list[float] = []
        self.n_failed = 0
        self._p: np.ndarray | None = None
        self._w = np.zeros(self.F.shape[1] + 1)

    def observe(self, row: int, failed: bool, kind: str | None = None) -> None:
        self.rows.append(int(row))
        self.labels.append(1.0 if failed else 0.0)
        self.weights.append(KIND_WEIGHT.get(kind or "failed", 1.0) if failed else 1.0)
        self.n_failed += bool(failed)
        self._p = None

    @property
    def active(self) -> bool:
        return self.n_failed > 0

    def fit(self) -> None:
        X = np.hstack([self.F[self.rows], np.ones((len(self.rows), 1))])
        y = np.asarray(self.labels)
        sw = np.asarray(self.weights)
        # balance the classes: a few failures among many successes still move the boundary
        pos = (sw * y).sum()
        neg = (sw * (1 - y)).sum()
        if pos > 0 and neg > 0:
            sw = sw * np.where(y > 0, 0.5 * (pos + neg) / pos, 0.5 * (pos + neg) / neg)
        reg = np.full(X.shape[1], self.ridge)
        reg[-1] = 1e-6                         # the intercept is not shrunk
        w = self._w if np.all(np.isfinite(self._w)) and np.abs(self._w).max() < 50 else np.zeros_like(self._w)
        for _ in range(self.steps):
            z = np.clip(X @ w, -30, 30)
            p = 1.0 / (1.0 + np.exp(-z))
            g = X.T @ (sw * (p - y)) + reg * w
            H = (X * (sw * p * (1 - p))[:, None]).T @ X + np.diag(reg)
            try:
                step = np.linalg.solve(H, g)
            except np.linalg.LinAlgError:
                break
            big = np.abs(step).max()
            if not np.isfinite(big):
                w = np.zeros_like(w)
                break
            if big > 4.0:                      # a damped Newton step: no overshoot on separable data
                step = step * (4.0 / big)
            w = w - step
            if np.abs(step).max() < 1e-6:
                break
        self._w = w

    def p_fail(self) -> np.ndarray:
        """Predicted probability of failure of every row (zeros while no failure was told)."""
        if self._p is None:
            if not self.active:
                self._p = np.zeros(len(self.enc))
            else:
                self.fit()
                z = np.clip(self.F @ self._w[:-1] + self._w[-1], -30, 30)
                self._p = 1.0 / (1.0 + np.exp(-z))
        return self._p


class FeasibilityGuard:
    """Keeps proposals out of the region the model predicts to fail, at a recorded exploration rate."""

    def __init__(self, enc: SpaceEncoding, rng: np.random.Generator, exploration: float = 0.1,
                 threshold: float = 0.5, min_failures: int = 2):
        if not 0.0 <= exploration <= 1.0:
            raise ValueError(f"exploration rate must be in [0, 1], got {exploration}")
        self.enc = enc
        self.rng = rng
        self.model = FeasibilityModel(enc)
        self.exploration = exploration
        self.threshold = threshold
        self.min_failures = min_failures
        self.stats = {"proposals": 0, "predicted_infeasible": 0, "avoided": 0, "explored": 0}

    @property
    def active(self) -> bool:
        return self.model.n_failed >= self.min_failures

    def observe(self, row: int, failed: bool, kind: str | None = None) -> None:
        self.model.observe(row, failed, kind)

    def p_fail(self) -> np.ndarray:
        return self.model.p_fail() if self.active else np.zeros(len(self.enc))

    def feasible(self, rows: np.ndarray) -> np.ndarray:
        """The rows of `rows` predicted feasible (all of them while the guard is inactive)."""
        if not self.active:
            return rows
        return rows[self.p_fail()[rows] <= self.threshold]

    def accept(self, row: int) -> tuple[bool, dict | None]:
        """For strategies that walk an order: (evaluate `row` now?, an event or None). A row predicted to fail is
        kept only by the exploration draw; the caller defers it otherwise."""
        self.stats["proposals"] += 1
        if not self.active:
            return True, None
        p = float(self.p_fail()[row])
        if p <= self.threshold:
            return True, None
        self.stats["predicted_infeasible"] += 1
        if self.rng.random() < self.exploration:
            self.stats["explored"] += 1
            return True, {"action": "explore", "p_fail": round(p, 3), "rate": self.exploration}
        self.stats["avoided"] += 1
        return False, {"action": "defer", "p_fail": round(p, 3), "rate": self.exploration}

    def check(self, row: int, free: np.ndarray) -> tuple[int, dict | None]:
        """(the row to evaluate, an event or None) for a proposal `row` among the unasked rows `free`."""
        self.stats["proposals"] += 1
        if not self.active:
            return row, None
        p = self.p_fail()
        if p[row] <= self.threshold:
            return row, None
        self.stats["predicted_infeasible"] += 1
        if self.rng.random() < self.exploration:
            self.stats["explored"] += 1
            return row, {"action": "explore", "p_fail": round(float(p[row]), 3), "rate": self.exploration}
        ok = free[(p[free] <= self.threshold) & (free != row)]
        if ok.size == 0:
            return row, None                   # everything left is predicted to fail: evaluate as proposed
        d = self.enc.distances_to(self.enc.pos[row], ok)
        sub = int(ok[np.lexsort((p[ok], d))[0]])
        self.stats["avoided"] += 1
        return sub, {"action": "avoid", "p_fail": round(float(p[row]), 3), "instead_p_fail": round(float(p[sub]), 3),
                     "rate": self.exploration}
