"""Scoring of strategies on a set of spaces (the held-out split): per space and aggregated, against baselines.

Input: per-run records (`RunRecord`: evaluations to within 2 % and 5 % of the optimum, None when the run never got
there inside the budget; P@50) keyed by (strategy label, space, condition) and seed, as
benchmarks/strategies_failures.py caches them. A censored run counts budget + 1 evaluations, as in every table.

- `cells`: per (strategy, space, condition): seeds, median evaluations to 2 % and 5 %, mean P@50 and P@100, the
  share of runs that got within 2 % inside the budget; `aggregate`: the same over every run of every space;
- `compare`: per candidate and baseline, per (space, condition) both ran: the ratio of median evaluations to 2 %
  (candidate / baseline; below 1: the candidate needs fewer) with a paired percentile-bootstrap interval, the seeds
  resampled in pairs (a seed's two runs share the space; `core.bench.stats.bootstrap_interval`, paired) at
  confidence 1 - alpha / m, m the number of (space, condition) cells compared for that pair in that condition
  (Bonferroni: the intervals hold jointly over the spaces); and per condition the geometric mean of those ratios
  over the spaces with a 1 - alpha interval, the seeds common to every space resampled together.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

from kernelloop.core.bench.stats import bootstrap_interval

TARGETS = ("e2", "e5")


class RunRecord(BaseModel):
    """One run's figures (the fields of a strategies_failures.py run line that the scoring reads)."""

    model_config = ConfigDict(extra="ignore")
    seed: int
    e2: int | None
    e5: int | None
    p50: float
    p100: float | None = None   # runs recorded before P@100 was kept lack it


class Cell(BaseModel):
    """One strategy on one space in one condition."""

    label: str
    space: str
    condition: str
    seeds: int
    median_e2: float
    median_e5: float
    p50: float
    p100: float | None
    reached_2pct: float


class Ratio(BaseModel):
    """Median evaluations to 2 %, candidate over baseline, with its bootstrap interval."""

    candidate: str
    baseline: str
    space: str
    condition: str
    seeds: int
    ratio: float
    low: float
    high: float
    confidence: float


Runs = dict[tuple[str, str, str], dict[int, RunRecord]]


def censored(values: list[int | None], budget: int) -> np.ndarray:
    """Evaluations to a target, a run that never got there counting budget + 1."""
    return np.array([budget + 1 if v is None else v for v in values], dtype=np.float64)


def _cell(label: str, space: str, condition: str, rs: list[RunRecord], budget: int) -> Cell:
    e2 = censored([r.e2 for r in rs], budget)
    p100 = [r.p100 for r in rs]
    return Cell(label=label, space=space, condition=condition, seeds=len(rs), median_e2=float(np.median(e2)),
                median_e5=float(np.median(censored([r.e5 for r in rs], budget))),
                p50=float(np.mean([r.p50 for r in rs])),
                p100=None if None in p100 else float(np.mean(p100)), reached_2pct=float(np.mean(e2 <= budget)))


def cells(runs: Runs, budget: int) -> list[Cell]:
    return [_cell(label, space, cond, [by_seed[s] for s in sorted(by_seed)], budget)
            for (label, space, cond), by_seed in sorted(runs.items())]


def _median_ratio(ab: list[np.ndarray]) -> np.ndarray:
    return np.median(ab[1], axis=-1) / np.median(ab[0], axis=-1)


def _geomean_ratio(groups: list[np.ndarray]) -> np.ndarray:
    logs = [np.log(_median_ratio([groups[i], groups[i + 1]])) for i in range(0, len(groups), 2)]
    return np.exp(np.mean(logs, axis=0))


def _paired(runs: Runs, candidate: str, baseline: str, condition: str) -> dict[str, list[int]]:
    """Space -> seeds both strategies ran, for the spaces of `condition` both ran."""
    out = {}
    for (label, space, cond), by_seed in runs.items():
        if label == candidate and cond == condition and (baseline, space, cond) in runs:
            common = sorted(set(by_seed) & set(runs[(baseline, space, cond)]))
            if common:
                out[space] = common
    return dict(sorted(out.items()))


def compare(runs: Runs, candidate: str, baseline: str, budget: int, *, alpha: float = 0.05,
            resamples: int = 10000, seed: int = 0) -> tuple[list[Ratio], list[Ratio]]:
    """(per-space ratios, one geometric-mean ratio per condition) of `candidate` against `baseline`."""
    per_space, overall = [], []
    for cond in sorted({c for (_, _, c) in runs}):
        paired = _paired(runs, candidate, baseline, cond)
        if not paired:
            continue
        level = 1 - alpha / len(paired)
        groups = []
        for space, seeds in paired.items():
            ab = [censored([runs[(lab, space, cond)][s].e2 for s in seeds], budget) for lab in (baseline, candidate)]
            point, lo, hi = bootstrap_interval(ab, _median_ratio, resamples=resamples, confidence=level,
                                               seed=seed, paired=True, vectorised=True)
            per_space.append(Ratio(candidate=candidate, baseline=baseline, space=space, condition=cond,
                                   seeds=len(seeds), ratio=point, low=lo, high=hi, confidence=level))
        common = sorted(set.intersection(*(set(s) for s in paired.values())))
        if not common:
            continue
        for space in paired:
            groups += [censored([runs[(lab, space, cond)][s].e2 for s in common], budget)
                       for lab in (baseline, candidate)]
        point, lo, hi = bootstrap_interval(groups, _geomean_ratio, resamples=resamples, confidence=1 - alpha,
                                           seed=seed, paired=True, vectorised=True)
        overall.append(Ratio(candidate=candidate, baseline=baseline, space=f"geometric mean over {len(paired)}",
                             condition=cond, seeds=len(common), ratio=point, low=lo, high=hi,
                             confidence=1 - alpha))
    return per_space, overall


def aggregate(runs: Runs, budget: int) -> dict[tuple[str, str], Cell]:
    """Per (strategy, condition): every run of every space pooled (median evaluations, mean P@k, share reached);
    `seeds` of such a cell counts runs."""
    pooled: dict[tuple[str, str], list[RunRecord]] = {}
    spaces: dict[tuple[str, str], set] = {}
    for (label, space, cond), by_seed in runs.items():
        pooled.setdefault((label, cond), []).extend(by_seed.values())
        spaces.setdefault((label, cond), set()).add(space)
    return {key: _cell(key[0], f"all {len(spaces[key])}", key[1], rs, budget) for key, rs in sorted(pooled.items())}
