"""How well a search did on a recorded space: best-so-far curves and the numbers computed from them.

- `evals_to_within`: evaluations until the best found is within `tol` (5 %) of the space's optimum;
- `fraction_of_optimum` (P@k): optimum / best found after k evaluations (1.0 = found the optimum);
- `methodology_score`: the score of Willemsen, van Nieuwpoort and van Werkhoven, "A methodology for comparing
  optimization algorithms for auto-tuning" (FGCS 2024; the `autotuning_methodology` package): the best-so-far
  curve standardised against the calculated curve of random search without replacement,
  (curve - random) / (optimum - random), averaged over the evaluations between the points where random search
  is expected to have covered 1 % and 95 % of the distance from the space's median to its optimum. 0 is random
  search, 1 is finding the optimum at once, below 0 is worse than random. Here the x-axis is evaluations (the
  package's default is time; a replay has no time axis worth the name), and the range is capped at the budget.
- `bootstrap_ci`: percentile bootstrap of a statistic over seeds, resampled within each space
  (`kernelloop.core.bench.stats.bootstrap_interval`, stratified).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from kernelloop.core.bench.stats import bootstrap_interval


def best_so_far(values: list[float | None], budget: int) -> np.ndarray:
    """Cumulative minimum after 1..budget evaluations; inf before the first success; flat after the run stopped."""
    v = np.array([np.inf if x is None else x for x in values[:budget]], dtype=np.float64)
    out = np.full(budget, np.inf if v.size == 0 else np.nan)
    if v.size:
        out[: v.size] = np.minimum.accumulate(v)
        out[v.size:] = out[v.size - 1]
    return out


def evals_to_within(curve: np.ndarray, optimum: float, tol: float = 0.05) -> int | None:
    """1-based number of evaluations until the best-so-far is <= (1 + tol) * optimum; None if never."""
    hit = np.flatnonzero(curve <= optimum * (1 + tol) * (1 + 1e-12))
    return int(hit[0]) + 1 if hit.size else None


def fraction_of_optimum(curve: np.ndarray, optimum: float, k: int) -> float:
    """P@k: optimum / best-so-far after k evaluations (0 when nothing succeeded yet)."""
    b = curve[min(k, curve.size) - 1]
    return 0.0 if not math.isfinite(b) else float(optimum / b)


# -- random search without replacement, as calculated by the methodology ------------------------------------
def random_curve(sorted_values: np.ndarray, fevals: np.ndarray) -> np.ndarray:
    """Expected best-so-far of random search after M evaluations, for each M in `fevals`.

    The methodology's closed form: of N ascending values, the best of M draws without replacement sits on
    average at rank (N + 1) / (M + 1) from the best, i.e. at index round(M (N + 1) / (M + 1)) of the values in
    descending order.
    """
    desc = np.asarray(sorted_values, dtype=np.float64)[::-1]
    n = desc.size
    idx = np.minimum(n - 1, np.round(np.asarray(fevals) * (n + 1) / (np.asarray(fevals) + 1)).astype(np.int64))
    return desc[idx]


def cutoff_fevals(sorted_values: np.ndarray, percentile: float) -> int:
    """Evaluations random search needs (in expectation) to cover `percentile` of the way median -> optimum."""
    vals = np.asarray(sorted_values, dtype=np.float64)
    opt, med = vals[0], float(np.median(vals))
    target = opt + (med - opt) * (1 - percentile)
    desc = vals[::-1]
    n = desc.size
    i = int(np.argmax(desc <= target))
    if percentile != 1.0 and desc[i] == opt and i > 0:
        i -= 1
    return math.ceil(i / (n + 1 - i))


def score_range(sorted_values: np.ndarray, budget: int | None = None, start: float = 0.01,
                end: float = 0.95) -> np.ndarray:
    """The evaluations (1-based) over which the methodology score is averaged, capped at `budget`."""
    a, b = cutoff_fevals(sorted_values, start), cutoff_fevals(sorted_values, end)
    a = max(a, 1)
    if b - a < 2:
        b = a + 2
    if budget is not None:
        b = min(b, budget)
        a = min(a, b)
    return np.arange(a, b + 1)


def methodology_score(curve: np.ndarray, sorted_values: np.ndarray, fevals: np.ndarray | None = None) -> float:
    """Mean of (curve - random) / (optimum - random) over `fevals` (default: `score_range` at the curve's length).

    A best-so-far still infinite (nothing succeeded yet) counts as the worst value of the space there.
    """
    vals = np.asarray(sorted_values, dtype=np.float64)
    if fevals is None:
        fevals = score_range(vals, budget=curve.size)
    rnd = random_curve(vals, fevals)
    opt = vals[0]
    c = np.minimum(curve[np.asarray(fevals) - 1], vals[-1])
    denom = opt - rnd
    ok = denom != 0
    if not ok.any():
        return 0.0
    return float(np.mean((c[ok] - rnd[ok]) / denom[ok]))


# -- intervals ----------------------------------------------------------------------------------------------
def bootstrap_ci(samples: list[np.ndarray], statistic: Callable[[list[np.ndarray]], float], n_boot: int = 2000,
                 confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """Point estimate and percentile-bootstrap interval of `statistic(samples)`.

    `samples` holds one array per space (one entry per seed); each bootstrap replicate resamples the seeds
    of every space independently (a stratified bootstrap), so the spaces stay fixed and the seeds vary.
    """
    return bootstrap_interval(samples, statistic, resamples=n_boot, confidence=confidence, seed=seed)
