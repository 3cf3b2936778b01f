"""Objectives over several workloads (shapes) and specialization when one configuration cannot serve them all.

A configuration measured on every shape of a served distribution is judged by its weighted geometric-mean
speed-up over a baseline, subject to a worst-shape limit: a configuration that makes any shape slower than
`min_speedup` times the baseline is not acceptable, however good its mean is. When no single configuration
serves every shape well, `specialize` picks a few configurations and assigns each shape to its best one (a
dispatcher over shape clusters). `overfitting` says, for a configuration chosen on one shape, what it costs
on the others, so tuning on one shape and shipping for many is visible in a report.

Times are "lower is better" numbers (µs); None marks a failure on that shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Table = dict[str, dict[str, float | None]]   # configuration key -> workload id -> time (None = failed)


def geomean_speedup(times: dict[str, float | None], baseline: dict[str, float],
                    weights: dict[str, float] | None = None) -> float | None:
    """Weighted geometric mean of baseline/time over the workloads of `baseline`; None if any of them failed."""
    total, acc = 0.0, 0.0
    for wid, base in baseline.items():
        t = times.get(wid)
        if t is None or not math.isfinite(t) or t <= 0:
            return None
        w = 1.0 if weights is None else weights.get(wid, 0.0)
        acc += w * math.log(base / t)
        total += w
    if total <= 0:
        raise ValueError("the weights of the workloads sum to zero")
    return math.exp(acc / total)


def worst_speedup(times: dict[str, float | None], baseline: dict[str, float]) -> tuple[float | None, str | None]:
    """The smallest per-workload speed-up over the baseline and the workload it happens on (None if one failed)."""
    worst, where = math.inf, None
    for wid, base in baseline.items():
        t = times.get(wid)
        if t is None or not math.isfinite(t) or t <= 0:
            return None, wid
        s = base / t
        if s < worst:
            worst, where = s, wid
    return worst, where


@dataclass(frozen=True)
class MultiWorkloadObjective:
    """Turns per-workload times into one number a strategy minimises: 1 / weighted geometric-mean speed-up.

    A configuration whose worst per-workload speed-up is below `min_speedup` (e.g. 0.95: no shape more than
    5 % slower than the baseline) counts as failed (None), as does one that failed on any workload.
    """

    baseline: dict[str, float]
    weights: dict[str, float] | None = None
    min_speedup: float | None = None

    def __call__(self, times: dict[str, float | None]) -> float | None:
        g = geomean_speedup(times, self.baseline, self.weights)
        if g is None:
            return None
        if self.min_speedup is not None:
            worst, _ = worst_speedup(times, self.baseline)
            if worst is None or worst < self.min_speedup:
                return None
        return 1.0 / g


@dataclass
class Specialization:
    """A few configurations and the workload -> configuration assignment that serves each shape best."""

    configs: list[str]
    assignment: dict[str, str]
    geomean_speedup: float
    worst_speedup: float
    steps: list[dict] = field(default_factory=list)   # how each added configuration improved the objective


def best_per_workload(table: Table, workloads: list[str]) -> dict[str, tuple[str, float]]:
    """For each workload, the configuration with the lowest time there and that time."""
    best: dict[str, tuple[str, float]] = {}
    for key, times in table.items():
        for wid in workloads:
            t = times.get(wid)
            if t is not None and math.isfinite(t) and (wid not in best or t < best[wid][1]):
                best[wid] = (key, t)
    return best


def specialize(table: Table, baseline: dict[str, float], weights: dict[str, float] | None = None,
               max_configs: int = 4, min_gain: float = 0.01) -> Specialization:
    """Greedy forward selection of up to `max_configs` configurations; each workload uses its best chosen one, and
    a chosen configuration that no workload ends up using (e.g. the first, a compromise) is left out of `configs`
    (`steps` keeps the selection history).

    The first configuration is the best single one by weighted geometric-mean speed-up (among those that ran on
    every workload); each further one is added only while it improves that mean by more than `min_gain`
    (relative). Ties break on the configuration key, so the result is deterministic.
    """
    wids = list(baseline)

    def score(chosen: list[str]) -> tuple[float, dict[str, str]]:
        times, assign = {}, {}
        for wid in wids:
            opts = [(table[k].get(wid), k) for k in chosen]
            opts = [(t, k) for t, k in opts if t is not None and math.isfinite(t)]
            if not opts:
                return -math.inf, {}
            t, k = min(opts)
            times[wid], assign[wid] = t, k
        return geomean_speedup(times, baseline, weights), assign

    keys = sorted(table)
    singles = [(score([k])[0], k) for k in keys]
    singles = [(s, k) for s, k in singles if s > -math.inf]
    if not singles:
        raise ValueError("no configuration ran on every workload")
    s0, k0 = max(singles, key=lambda sk: (sk[0], [-ord(c) for c in sk[1]]))
    chosen, current = [k0], s0
    steps = [{"added": k0, "geomean_speedup": s0}]
    while len(chosen) < max_configs:
        cands = [(score(chosen + [k])[0], k) for k in keys if k not in chosen]
        if not cands:
            break
        s, k = max(cands, key=lambda sk: (sk[0], [-ord(c) for c in sk[1]]))
        if s <= current * (1 + min_gain):
            break
        chosen.append(k)
        current = s
        steps.append({"added": k, "geomean_speedup": s})
    final, assign = score(chosen)
    per = {wid: baseline[wid] / table[assign[wid]][wid] for wid in wids}
    used = [k for k in chosen if k in assign.values()]   # a configuration that ended up serving no shape is dropped
    return Specialization(used, assign, final, min(per.values()), steps)


def overfitting(table: Table, chosen: str, workloads: list[str]) -> dict[str, dict]:
    """Per workload: the chosen configuration's time against that workload's own best (ratio >= 1 is a loss).

    A configuration tuned on one shape and shipped for many shows here as ratios well above 1 on the others;
    a failure on a workload shows as ratio None with the failure noted.
    """
    best = best_per_workload(table, workloads)
    out = {}
    for wid in workloads:
        t = table.get(chosen, {}).get(wid)
        if wid not in best:
            out[wid] = {"ratio_to_best": None, "note": "no configuration ran on this workload"}
        elif t is None or not math.isfinite(t):
            out[wid] = {"ratio_to_best": None, "note": "the chosen configuration failed here",
                        "best": best[wid][0]}
        else:
            out[wid] = {"ratio_to_best": t / best[wid][1], "time": t, "best_time": best[wid][1],
                        "best": best[wid][0]}
    return out
