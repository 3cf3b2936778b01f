"""The pruning audit: does pruning remove what would fail, and only that?

Pruning runs before anything is compiled, on the template's constraints and resource estimates (`space.prune`).
The audit checks it against ground truth: every configuration of the *unpruned* space is built ahead of time for
the target (`aot.build_configs`), and each one is classed
- `fails`: it would not run (the compiler refused it, the template's launcher refused it, the build hung or crashed,
  or the device would refuse the launch: shared memory, threads or registers per program over the limits);
- `spills`: it builds and launches but uses local memory (register spills);
- `runs`: it builds and launches with no local memory.
Then:
- recall = the share of `fails` that pruning removes (what pruning is for: each one would cost a compile and a
  failed trial);
- kept failures: configurations pruning keeps that fail (a run spends a compile on each);
- pruned twins: configurations pruning removes whose launches are identical to a kept configuration's (the same
  cubin, grid and scalar arguments: e.g. a parameter the launcher ignores in that case); they cannot beat their twin;
- pruned runners: the other configurations pruning removes that build and launch (spilling or not: a mild spill
  can still be fast), one per distinct launch
  (the others with the same launches listed under it); only a GPU can say whether one of them is fast, so they are
  listed for timing (`kernelloop record --configs`), and `top_share` checks those timings against the best
  configurations the pruner kept;
- the resource estimates against the compiled kernels (shared memory exact to the byte, registers).
"""

from __future__ import annotations

from collections import Counter

from ...core.build.aot import BUILT, BuildOutcome, launch_limits
from ...base.records import TemplateSpec, Workload, evaluate_expression
from ...base.records.device import DeviceProperties
from ...core.spec.space import why_pruned, workload_names

FAILS, SPILLS, RUNS = "fails", "spills", "runs"


def build_class(outcome: BuildOutcome, props: DeviceProperties) -> tuple[str, str]:
    """(`fails` | `spills` | `runs`, why) for one ahead-of-time build."""
    if outcome.status != BUILT:
        return FAILS, f"{outcome.status}: {outcome.error.splitlines()[0] if outcome.error else ''}"[:300]
    limits = launch_limits(outcome, props)
    if limits:
        return FAILS, "launch limit: " + "; ".join(limits)
    if outcome.spills:
        return SPILLS, f"local memory (registers {outcome.registers})"
    return RUNS, ""


def _estimate(template: TemplateSpec, names: dict, config: dict) -> dict:
    env = {**names, **config}
    r = template.resources
    try:
        return {"shared": evaluate_expression(r.shared_bytes, env), "regs": evaluate_expression(r.regs_per_thread, env)}
    except Exception:  # noqa: BLE001 - an estimate that cannot be evaluated is reported as missing
        return {"shared": None, "regs": None}


def audit(templates: dict[str, TemplateSpec], workload: Workload, props: DeviceProperties,
          outcomes: list[BuildOutcome]) -> dict:
    """The audit of pruning on `workload` and `props` against the builds of every configuration in `outcomes`."""
    rows = []
    names = workload_names(workload, props)
    for o in outcomes:
        t = templates[o.template]
        why = why_pruned(t, workload, props, o.config)
        cls, reason = build_class(o, props)
        est = _estimate(t, names, o.config)
        rows.append({"template": o.template, "config": o.config, "pruned": why, "class": cls, "why": reason,
                     "kernels": o.kernels, "status": o.status, "error": o.error,
                     "shared": o.shared_bytes if o.status == BUILT else None,
                     "registers": o.registers if o.status == BUILT else None,
                     "estimate": est, "build_s": round(o.seconds, 3)})
    # a pruned configuration whose launches (binaries, grids, scalar arguments) equal a kept one's does the same
    # work on the GPU: it cannot be faster than its kept twin, so it needs no timing
    kept_launches = {}
    for o, r in zip(outcomes, rows):
        if not r["pruned"] and r["class"] in (RUNS, SPILLS) and o.launches is not None:
            kept_launches.setdefault(o.launches, {"template": o.template, **o.config})
    groups: dict[tuple, list[dict]] = {}  # pruned runners with the same launches: one timing serves them all
    for o, r in zip(outcomes, rows):
        r["twin_of"] = kept_launches.get(o.launches) if r["pruned"] and o.launches is not None else None
        if r["pruned"] and r["class"] in (RUNS, SPILLS) and r["twin_of"] is None:
            groups.setdefault(o.launches if o.launches is not None else ("row", len(groups)), []).append(r)
    representatives = []
    for members in groups.values():
        head = members[0]
        head["same_launches"] = [m["config"] for m in members[1:]]
        representatives.append(head)
    fails = [r for r in rows if r["class"] == FAILS]
    caught = [r for r in fails if r["pruned"]]
    by_reason: dict[str, Counter] = {}
    for r in rows:
        if r["pruned"]:
            by_reason.setdefault(r["pruned"], Counter())[r["class"]] += 1
    shared_err = [abs(r["estimate"]["shared"] - r["shared"]) for r in rows
                  if r["shared"] is not None and r["estimate"]["shared"] is not None]
    reg_rows = [r for r in rows if r["registers"] is not None and r["estimate"]["regs"] is not None]
    over_255 = [r for r in reg_rows if r["estimate"]["regs"] > props.max_regs_per_thread]
    return {
        "workload": workload.label, "device": props.name, "configurations": len(rows),
        "pruned": sum(1 for r in rows if r["pruned"]), "kept": sum(1 for r in rows if not r["pruned"]),
        "classes": dict(Counter(r["class"] for r in rows)),
        "fails": len(fails), "fails_pruned": len(caught),
        "recall": len(caught) / len(fails) if fails else None,
        "kept_failures": [{k: r[k] for k in ("template", "config", "why")} for r in fails if not r["pruned"]],
        "pruned_runners": [{k: r[k] for k in ("template", "config", "pruned", "same_launches")}
                           for r in representatives],
        "pruned_runner_configurations": sum(len(v) for v in groups.values()),
        "pruned_twins": sum(1 for r in rows if r["pruned"] and r["class"] in (RUNS, SPILLS)
                            and r["twin_of"] is not None),
        "pruned_spillers": sum(1 for r in rows if r["pruned"] and r["class"] == SPILLS),
        "kept_spillers": sum(1 for r in rows if not r["pruned"] and r["class"] == SPILLS),
        "by_reason": {k: dict(v) for k, v in sorted(by_reason.items())},
        "estimates": {
            "shared_abs_error_max": max(shared_err) if shared_err else None,
            "shared_exact_share": sum(e == 0 for e in shared_err) / len(shared_err) if shared_err else None,
            "shared_within_64_share": sum(e <= 64 for e in shared_err) / len(shared_err) if shared_err else None,
            "regs_over_limit_estimated": len(over_255),
            "regs_over_limit_that_spill": sum(1 for r in over_255 if r["class"] == SPILLS),
        },
        "rows": rows,
    }


def top_share(pruned_runners: list[dict], space: dict, workload_id: str, share: float = 0.01,
              population: int | None = None, screen: dict | None = None) -> dict:
    """Whether any pruned configuration that runs is among the top `share` of everything measured.

    `space` is a space document (`kernelloop record`) holding, for `workload_id`, the pruned space's measurements
    and the pruned runners' (recorded in the same session with `record --configs`, so the two are comparable).
    The threshold is the time of the k-th best measured configuration, k = ceil(share * population), where
    `population` is the number of configurations that run (default: the number measured). When only part of the
    kept space is measured (e.g. its best from an earlier recording, timed again), the k-th best measured time can
    only be slower than the true k-th best, so the check errs towards flagging: a pruned configuration truly in the
    top k is always flagged.

    `screen` is this workload's summary from `benchmarks/pruning_screen.py` (short unverified timings of every pruned
    configuration that runs, one per distinct launch, beside the kept ones). With it, a pruned configuration this
    recording did not measure counts as checked when the screen timed it more than its margin slower than the top-1 %
    threshold; one the screen flagged (within the margin) must be in the recording. The verdict says "incomplete"
    while any pruned configuration is checked by neither."""
    from math import ceil

    from .encoding import config_key

    pruned = {config_key({"template": r["template"], **r["config"]}) for r in pruned_runners}
    times = []
    for rec in space["records"]:
        res = rec["results"].get(workload_id) or {}
        if res.get("value") is not None:
            times.append((res["value"], config_key(rec["config"]) in pruned, rec["config"]))
    if not times:
        return {"measured": 0, "verdict": "nothing measured"}
    times.sort(key=lambda x: x[0])
    k = max(1, ceil(share * (population or len(times))))
    if k > len(times):
        return {"measured": len(times), "top_k": k, "verdict": f"too few measured for the top {k}"}
    threshold = times[k - 1][0]
    intruders = [{"config": c, "us": v} for v, p, c in times if p and v <= threshold]
    measured_pruned = sum(1 for _, p, _ in times if p)
    best_pruned = next(((v, i + 1) for i, (v, p, _) in enumerate(times) if p), None)
    out = {"measured": len(times), "measured_pruned": measured_pruned, "unmeasured_pruned": len(pruned) - measured_pruned,
           "top_k": k, "population": population or len(times), "threshold_us": threshold, "best_us": times[0][0],
           "best_pruned_us": best_pruned[0] if best_pruned else None,
           "best_pruned_rank": best_pruned[1] if best_pruned else None,
           "pruned_in_top": intruders,
           "verdict": (f"{len(intruders)} pruned configuration(s) in the top share" if intruders
                       else "no pruned configuration was measured" if not measured_pruned
                       else "no measured pruned configuration in the top share" + (
                           f" (incomplete: {len(pruned) - measured_pruned} not measured)"
                           if len(pruned) > measured_pruned else ""))}
    if screen is not None and not intruders:
        out.update(_with_screen(pruned, {config_key(c) for _, p, c in times if p}, screen))
    return out


def _with_screen(pruned: set[str], measured: set[str], screen: dict) -> dict:
    """The verdict over the pruned configurations this recording measured and those a screen checked."""
    from .encoding import config_key

    flagged = {config_key(c["config"]) for c in screen.get("to_confirm", [])}
    rest = pruned - measured
    gaps = []
    if screen.get("pruned_unscreened"):
        gaps.append(f"{screen['pruned_unscreened']} not screened")
    if screen.get("pruned_screened") is not None and screen["pruned_screened"] != len(pruned):
        gaps.append(f"the screen covers {screen['pruned_screened']} pruned launches, the audit lists {len(pruned)}")
    if "threshold_us" not in screen:
        gaps.append(f"the screen has no threshold ({screen.get('verdict', 'no verdict')})")
    flagged_unmeasured = sorted(rest & flagged)
    if flagged_unmeasured:
        gaps.append(f"{len(flagged_unmeasured)} flagged by the screen but not measured here")
    margin = screen.get("margin", 0.0)
    checked = len(rest - flagged)
    verdict = (f"incomplete: {'; '.join(gaps)}" if gaps else
               f"no pruned configuration in the top share: {len(pruned & measured)} measured here, {checked} "
               f"screened more than {margin:.0%} slower than the screen's top-1 % threshold")
    return {"screened_beyond_margin": checked if not gaps else None, "screen_margin": margin,
            "flagged_unmeasured": flagged_unmeasured, "verdict": verdict}


def outcomes_of(report_rows: list[dict]) -> list[BuildOutcome]:
    """The builds an earlier audit report holds (its `rows`), to audit again without building."""
    return [BuildOutcome(template=r["template"], config=r["config"], status=r["status"], kernels=r["kernels"],
                         error=r.get("error", ""), seconds=r.get("build_s", 0.0)) for r in report_rows]
