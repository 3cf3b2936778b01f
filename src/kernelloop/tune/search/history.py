"""History pruning: regions learnt to be bad during a run, and a transfer prior from earlier runs.

- `BadRegions` watches a run: a parameter value whose evaluated configurations all failed, or all sit in
  the worst part of what was seen, after at least `min_count` of them, is marked bad; `mask()` says which
  rows of the space avoid every bad value. Strategies use it softly (prefer rows outside bad regions while any
  are left), so a wrong judgement costs ordering, never reachability.
- `TransferPrior` learns from another recording of the same kernel (another shape or GPU): an additive model
  of log(objective) over parameter values (ridge regression on one-hot levels), fitted on the configurations
  the other recording measured; `scores(space)` predicts every configuration of the new space, and `top(k)`
  gives the k it predicts best. Values it never saw fall back to the mean. `warm_start(k)` is what a search
  starts from: first (up to half of k) the configurations the recording itself measured best that the new space
  holds, then the model's picks. The model alone is not enough: a value the recording never saw predicts the
  mean, which beats every measured value worse than the mean, so a recording that varied a few parameters
  around a tuned optimum ranks unseen configurations above its own measured best. `from_spaces` pools the
  workloads of a recording, each normalised by its own best (what `optimize --prior` learns from); it also keeps
  each recorded workload's own measurements (a workload recorded twice on one device, e.g. in two runs, has them
  merged, each configuration at its faster time; on two devices, each normalised by its own best and averaged in
  logs), and `for_workload` gives the prior whose measured-first warm start is
  that of the target workload itself when it was recorded, else of the recorded workload nearest in shape, so a
  suite of very different shapes does not start every shape from the configurations that were best on average.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from .encoding import SpaceEncoding, config_key


class BadRegions:
    """Parameter values that, on the evidence of this run, only lead to failures or poor results."""

    def __init__(self, enc: SpaceEncoding, min_count: int = 4, quantile: float = 0.5):
        self.enc = enc
        self.min_count = min_count
        self.quantile = quantile
        self.bad: set[tuple[int, int]] = set()      # (column, level)

    def update(self, rows: np.ndarray, values: np.ndarray) -> set[tuple[int, int]]:
        """Re-judge from all told rows (`values` inf for failures); return the newly marked (column, level)s."""
        ok = np.isfinite(values)
        cut = np.quantile(values[ok], self.quantile) if ok.sum() >= 2 * self.min_count else None
        newly = set()
        for j in np.flatnonzero(self.enc.varying):
            lv = self.enc.X[rows, j]
            for level in np.unique(lv):
                sel = lv == level
                if sel.sum() < self.min_count:
                    continue
                v = values[sel]
                if np.all(~np.isfinite(v)) or (cut is not None and np.all(v > cut)):
                    if (int(j), int(level)) not in self.bad:
                        newly.add((int(j), int(level)))
        self.bad |= newly
        return newly

    def mask(self) -> np.ndarray:
        """True for rows that use no bad value."""
        keep = np.ones(len(self.enc), dtype=bool)
        for j, level in self.bad:
            keep &= self.enc.X[:, j] != level
        return keep

    def describe(self) -> list[dict]:
        return [{"param": self.enc.params[j].name, "value": self.enc.params[j].levels[lv]}
                for j, lv in sorted(self.bad)]


class TransferPrior:
    """An additive model of log(objective) over parameter values, learnt from another recording."""

    def __init__(self, configs: list[dict], values: list[float | None], ridge: float = 1.0):
        pairs = [(c, v) for c, v in zip(configs, values) if v is not None and v > 0 and math.isfinite(v)]
        self.configurations = len({config_key(c) for c, _ in pairs})   # distinct ones it learnt from
        if self.configurations < 2:
            raise ValueError(f"a transfer prior needs at least two measured configurations, got {self.configurations}")
        cols = sorted({(n, _key(v)) for c, _ in pairs for n, v in c.items()}, key=repr)
        self.col_of = {c: i for i, c in enumerate(cols)}
        A = np.zeros((len(pairs), len(cols)))
        for i, (c, _) in enumerate(pairs):     # a parameter a configuration lacks (another template's) is no level
            for n, v in c.items():
                A[i, self.col_of[(n, _key(v))]] = 1.0
        y = np.log([v for _, v in pairs])
        self.mean = float(y.mean())
        logs: dict[str, list[float]] = {}
        for (c, _), lv in zip(pairs, y):
            logs.setdefault(config_key(c), []).append(float(lv))
        self.measured = {k: float(np.mean(v)) for k, v in logs.items()}   # mean log objective of each measured one
        self.w = np.linalg.solve(A.T @ A + ridge * np.eye(len(cols)), A.T @ (y - self.mean))
        self.workloads: dict[str, dict[str, float]] = {}   # recorded workload -> its own log(objective / best)
        self.axes: dict[str, dict[str, float]] = {}        # recorded workload -> its shape, where known
        self.dtypes: dict[str, str] = {}                   # recorded workload -> its dtype, where known
        self.source = "pooled"                             # whose measurements warm_start tries first

    @classmethod
    def from_space(cls, space) -> "TransferPrior":
        """From a RecordedSpace (kernelloop.tune.replay) of another shape or GPU."""
        return cls(space.configs, space.values)

    @classmethod
    def from_spaces(cls, spaces) -> "TransferPrior":
        """From several RecordedSpaces (the workloads of one or more recordings) pooled: each workload's objective
        divided by its best, so shapes of different cost share one scale.

        Spaces that name the same workload (meta "workload") on the same device (meta "device") are merged first,
        each configuration at its faster time; a space that names no workload is never merged. A workload measured
        on several devices is normalised per device, and its own table (`workloads`) is the mean over devices of
        each configuration's log(objective / that device's best)."""
        groups: dict[tuple, dict[str, tuple[dict, float]]] = {}
        shapes: dict[str, tuple[dict, str | None]] = {}
        for n, space in enumerate(spaces):
            wid = space.meta.get("workload")
            group = (wid, _device_of(space.meta)) if wid else (None, n)
            got = groups.setdefault(group, {})
            for c, v in zip(space.configs, space.values):
                if v is None or not v > 0 or not math.isfinite(v):
                    continue
                key = config_key(c)
                if key not in got or v < got[key][1]:
                    got[key] = (c, v)
            axes = space.meta.get("axes")
            if wid and isinstance(axes, dict) and axes and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) for x in axes.values()):
                shapes[wid] = (dict(axes), space.meta.get("dtype"))
        configs, values = [], []
        logs: dict[str, dict[str, list[float]]] = {}   # workload -> configuration -> its log ratio on each device
        for (wid, _), got in groups.items():
            if not got:
                continue
            best = min(v for _, v in got.values())
            configs += [c for c, _ in got.values()]
            values += [v / best for _, v in got.values()]
            if wid is not None:
                mine = logs.setdefault(wid, {})
                for key, (_, v) in got.items():
                    mine.setdefault(key, []).append(math.log(v / best))
        prior = cls(configs, values)
        prior.workloads = {w: {k: float(np.mean(v)) for k, v in t.items()} for w, t in logs.items()}
        prior.axes = {w: a for w, (a, _) in shapes.items() if w in logs}
        prior.dtypes = {w: d for w, (_, d) in shapes.items() if w in logs and d}
        return prior

    def nearest(self, workload: str | None = None, axes: dict | None = None, dtype: str | None = None) -> str | None:
        """The recorded workload a target should start from: itself when recorded, else the recorded workload with
        the same axis names nearest to `axes` (the same dtype first, when both are known; then the sum over axes
        of |log(recorded / target)|; ties by id), else None."""
        if workload is not None and workload in self.workloads:
            return workload
        if not isinstance(axes, dict) or not axes or any(
                not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0 for v in axes.values()):
            return None
        best = None
        for wid, rec in sorted(self.axes.items()):
            if set(rec) != set(axes) or any(v <= 0 for v in rec.values()):
                continue
            other = dtype is not None and self.dtypes.get(wid) not in (None, dtype)
            rank = (other, sum(abs(math.log(rec[k] / axes[k])) for k in axes), wid)
            if best is None or rank < best:
                best = rank
        return None if best is None else best[2]

    def for_workload(self, workload: str | None = None, axes: dict | None = None,
                     dtype: str | None = None) -> "TransferPrior":
        """This prior with `warm_start`'s measured-first part taken from the recorded workload `nearest` to the
        target (the same model of parameter values); the pooled prior itself when none matches."""
        wid = self.nearest(workload, axes, dtype)
        if wid is None:
            return self
        view = copy.copy(self)
        view.measured = self.workloads[wid]
        view.source = wid
        return view

    def predict(self, config: dict) -> float:
        """Predicted log(objective); parameters or values the recording never saw contribute nothing."""
        return self.mean + sum(float(self.w[self.col_of[(n, _key(v))]])
                               for n, v in config.items() if (n, _key(v)) in self.col_of)

    def scores(self, space: list[dict]) -> np.ndarray:
        return np.array([self.predict(c) for c in space])

    def top(self, space: list[dict], k: int) -> list[int]:
        """Rows of `space` with the k lowest predicted objectives (ties by row)."""
        s = self.scores(space)
        return np.lexsort((np.arange(len(s)), s))[:k].tolist()

    def warm_start(self, space: list[dict], k: int) -> list[int]:
        """k rows of `space` to try first: the recording's best measured configurations that `space` holds (at most
        half of k, rounded up; by mean measured log objective, ties by row), then the model's best of the rest."""
        held = sorted((self.measured[key], i) for i, key in enumerate(config_key(c) for c in space)
                      if key in self.measured)
        chosen = [i for _, i in held[:(k + 1) // 2]]
        for i in self.top(space, len(space)):
            if len(chosen) >= k:
                break
            if i not in chosen:
                chosen.append(i)
        return chosen


def _key(v):
    return tuple(v) if isinstance(v, list) else v


def _device_of(meta: dict) -> str:
    """The device a recording was measured on, as far as its meta says ("" when it does not): a name, or the name
    in a device-properties mapping."""
    d = meta.get("device")
    if isinstance(d, dict):
        d = d.get("name") or d.get("gpu")
    return "" if d is None else str(d)
