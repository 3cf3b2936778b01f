"""Robustness across shapes of a space recorded on several workloads (`kernelloop record` with a workload file
of several shapes; `kernelloop replay SPACE --shapes`).

From the full table (every configuration timed on every shape) it reports what tuning on one shape and
shipping for all would cost, and what serving them costs instead:

- per shape, its own best configuration and time;
- the best single configuration by weighted geometric-mean speed-up over the per-shape baseline (the space
  file's `baseline`, else each shape's median over the space), and its worst shape;
- overfitting: each shape's winner run on every other shape, as a ratio to that shape's own best (1.0 = no
  loss), and the largest loss of each winner;
- specialization: a few configurations and the shape -> configuration assignment (a dispatcher over shape
  clusters), added greedily while each improves the geometric mean by more than `min_gain`.
"""

from __future__ import annotations

from ...tune.replay.space_file import space_baseline
from ...tune.search.encoding import config_key
from ...tune.search.objectives import best_per_workload, geomean_speedup, overfitting, specialize, worst_speedup


def shape_robustness(doc: dict, max_configs: int = 4, min_gain: float = 0.01) -> dict:
    """The report (a JSON-able dict) for a kernelloop space document with at least two workloads."""
    wls = doc["workloads"]
    if len(wls) < 2:
        raise ValueError(f"{doc.get('name')}: robustness across shapes needs at least two workloads, it has "
                         f"{len(wls)}")
    wids = [w["id"] for w in wls]
    labels = {w["id"]: w.get("label") or w["id"] for w in wls}
    weights = {w["id"]: float(w.get("weight", 1.0)) for w in wls}
    configs = {config_key(r["config"]): r["config"] for r in doc["records"]}
    table = {config_key(r["config"]): {wid: r["results"].get(wid, {}).get("value") for wid in wids}
             for r in doc["records"]}
    baseline = space_baseline(doc)
    best = best_per_workload(table, wids)
    singles = []
    for key, times in table.items():
        g = geomean_speedup(times, baseline, weights)
        if g is not None:
            singles.append((g, key))
    if not singles:
        raise ValueError(f"{doc.get('name')}: no configuration ran on every workload")
    g0, k0 = max(singles, key=lambda gk: (gk[0], gk[1]))
    worst, where = worst_speedup(table[k0], baseline)
    winners = {}
    for wid in wids:
        if wid not in best:
            continue
        key = best[wid][0]
        cost = overfitting(table, key, wids)
        losses = [c["ratio_to_best"] for c in cost.values() if c["ratio_to_best"] is not None]
        failed = [labels[w] for w, c in cost.items() if c["ratio_to_best"] is None]   # failed or pruned there
        winners[labels[wid]] = {"config": configs[key], "time": best[wid][1],
                                "on_other_shapes": {labels[w]: c["ratio_to_best"] for w, c in cost.items()},
                                "largest_loss": max(losses) if losses else None, "not_run_on": failed}
    spec = specialize(table, baseline, weights, max_configs=max_configs, min_gain=min_gain)
    return {
        "space": doc.get("name"), "workloads": [labels[w] for w in wids], "configurations": len(table),
        "baseline": {labels[w]: baseline[w] for w in wids},
        "baseline_source": "the space file's baseline" if doc.get("baseline") else "each shape's median over the space",
        "best_per_shape": {labels[w]: {"config": configs[best[w][0]], "time": best[w][1]} for w in wids if w in best},
        "best_single": {"config": configs[k0], "geomean_speedup": g0, "worst_speedup": worst,
                        "worst_shape": labels.get(where, where),
                        "ratio_to_best": {labels[w]: (table[k0][w] / best[w][1]) if w in best else None
                                          for w in wids}},
        "overfitting": winners,
        "specialization": {"configs": [configs[k] for k in spec.configs],
                           "assignment": {labels[w]: spec.configs.index(k) for w, k in spec.assignment.items()},
                           "geomean_speedup": spec.geomean_speedup, "worst_speedup": spec.worst_speedup,
                           "steps": [{"added": configs[s["added"]], "geomean_speedup": s["geomean_speedup"]}
                                     for s in spec.steps]},
    }


__all__ = ["shape_robustness"]
