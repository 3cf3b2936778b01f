"""Selection over trials: non-dominated sets and the fastest passing candidate per workload.

Conventions:

* Every objective is minimised. ``None`` (or a missing key, or NaN) ranks worst: it compares as
  +inf, so it is dominated by any number and equal to another ``None``.
* ``a`` dominates ``b`` when ``a`` is no worse on every objective and strictly better on at least
  one. Items with identical objective vectors never dominate each other, so ties are all kept.
* Only ``Status.PASSED`` trials that carry a measurement are ever selected.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

import numpy as np

from kernelloop.base.records import BuildArtifact, Status, Trial

__all__ = ["OBJECTIVES", "best_per_workload", "front_for_workload", "pareto_front", "runner_up_per_workload"]

#: Objectives of :func:`front_for_workload`, in order (the first one orders the front).
OBJECTIVES: tuple[str, ...] = ("latency_us", "registers", "shared_bytes", "compile_s")


def _rank_value(v: float | None) -> float:
    """Objective value as a float where None/NaN rank worst (+inf)."""
    if v is None:
        return math.inf
    f = float(v)
    return math.inf if math.isnan(f) else f


def pareto_front(
    items: Sequence[tuple[str, Mapping[str, float | None]]],
    minimize: Sequence[str],
) -> list[tuple[str, Mapping[str, float | None]]]:
    """The non-dominated subset of ``items`` over the objectives named in ``minimize``.

    ``items`` are ``(name, objectives)`` pairs; objective values may be None (worst). The returned
    pairs are the input pairs themselves (not copies), sorted by the first objective in
    ``minimize`` (None last) with input order kept among equal values. Items with identical
    objective vectors are all kept. Raises ValueError when ``minimize`` is empty or repeats a name.
    """
    names = list(minimize)
    if not names:
        raise ValueError("pareto_front needs at least one objective to minimise")
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate objective names in {names}")
    items = list(items)
    if not items:
        return []
    values = np.array([[_rank_value(obj.get(k)) for k in names] for _, obj in items], dtype=np.float64)
    dominated = np.zeros(len(items), dtype=bool)
    for i in range(len(items)):
        # Does item i dominate others? (no worse everywhere, strictly better somewhere)
        no_worse = np.all(values[i] <= values, axis=1)
        better = np.any(values[i] < values, axis=1)
        dominated |= no_worse & better
    keep = [i for i in range(len(items)) if not dominated[i]]
    keep.sort(key=lambda i: values[i, 0])  # stable: input order among equal first objectives
    return [items[i] for i in keep]


def _measured_passes(trials: Iterable[Trial]) -> list[Trial]:
    return [t for t in trials if t.verdict.status is Status.PASSED and t.measurement is not None]


def _speed_key(t: Trial) -> tuple[float, int]:
    return (t.measurement.kernel.median_us, t.index)


def best_per_workload(trials: Iterable[Trial]) -> dict[str, Trial]:
    """The fastest PASSED, measured trial of each workload, keyed by workload id.

    Fastest = smallest ``measurement.kernel.median_us``; ties go to the smaller ``index`` (and, if
    that ties too, to the trial seen first). Workloads without such a trial are absent.
    """
    best: dict[str, Trial] = {}
    for t in _measured_passes(trials):
        cur = best.get(t.workload_id)
        if cur is None or _speed_key(t) < _speed_key(cur):
            best[t.workload_id] = t
    return best


def runner_up_per_workload(trials: Iterable[Trial]) -> dict[str, Trial]:
    """The fastest PASSED, measured trial of another candidate than each workload's best (same ordering as
    :func:`best_per_workload`), keyed by workload id. Workloads with fewer than two such candidates are absent."""
    trials = list(trials)
    best = best_per_workload(trials)
    out: dict[str, Trial] = {}
    for t in _measured_passes(trials):
        b = best.get(t.workload_id)
        if b is None or t.candidate_id == b.candidate_id:
            continue
        cur = out.get(t.workload_id)
        if cur is None or _speed_key(t) < _speed_key(cur):
            out[t.workload_id] = t
    return out


def _objectives(t: Trial) -> dict[str, float | None]:
    build = t.build if isinstance(t.build, BuildArtifact) else None
    return {
        "latency_us": t.measurement.kernel.median_us,
        "registers": None if build is None else build.registers,
        "shared_bytes": None if build is None else build.shared_bytes,
        "compile_s": None if build is None else build.compile_s,
    }


def front_for_workload(trials: Iterable[Trial], workload_id: str) -> list[tuple[str, dict[str, float | None]]]:
    """Pareto front of one workload's PASSED, measured trials, keyed by candidate id.

    Objectives (all minimised): ``latency_us`` (kernel median), ``registers``, ``shared_bytes`` and
    ``compile_s`` of the build. Values the build does not have are None and rank worst (registers
    are None in interpreter mode; all of them are None when the trial has no BuildArtifact). When
    one candidate has several such trials, only its fastest (ties: smallest index) is considered.
    Candidates enter in trial-index order, and the front is sorted by latency (stable).
    """
    chosen: dict[str, Trial] = {}
    for t in _measured_passes(trials):
        if t.workload_id != workload_id:
            continue
        cur = chosen.get(t.candidate_id)
        if cur is None or _speed_key(t) < _speed_key(cur):
            chosen[t.candidate_id] = t
    ordered = sorted(chosen.values(), key=lambda t: t.index)
    return pareto_front([(t.candidate_id, _objectives(t)) for t in ordered], OBJECTIVES)
