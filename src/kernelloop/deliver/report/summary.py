"""One JSON-able summary of a run, read from its archive. `show --json` prints exactly this."""

from __future__ import annotations

from ...base.records.device import Device

from ...core.archive import Archive
from ...tune.select.pareto import best_per_workload, runner_up_per_workload
from ...tune.loop.throughput import throughput


def _ratio_dict(m) -> dict:
    return {r.baseline: {"speedup": r.speedup, "ci": [r.ci_low, r.ci_high], "verdict": r.verdict.value}
            for r in m.ratios}


def _measure_dict(m) -> dict:
    return {"kernel_us": m.kernel.median_us, "kernel_ci_us": [m.kernel.ci_low_us, m.kernel.ci_high_us],
            "call_us": m.call.median_us, "call_ci_us": [m.call.ci_low_us, m.call.ci_high_us],
            "gbps": m.gbps, "roofline_fraction": m.roofline_fraction, "speedups": _ratio_dict(m),
            "policy": m.policy.name, "samples": m.kernel.n}


def run_summary(archive: Archive, run_id: str | None = None) -> dict:
    runs = archive.runs()
    if not runs:
        raise LookupError("the archive holds no run")
    run = next((r for r in runs if r["id"] == run_id), None) if run_id else runs[0]
    if run is None:
        raise LookupError(f"no run {run_id!r} in the archive")
    rid = run["id"]
    trials = archive.trials(rid)
    from ...tune.select.sanitize import SANITIZE_EVENT, rejected, without_rejected
    checks = [e["payload"] for e in archive.events(rid, SANITIZE_EVENT)]
    usable = without_rejected(trials, rejected(archive, rid))   # compute-sanitizer's findings are REJECTED
    best = best_per_workload(usable)
    second = runner_up_per_workload(usable)
    planner = run["options"].get("strategy") == "planner"
    finals = archive.finals(rid)
    confirmations = archive.confirmations(rid)
    workloads = []
    for wd in run["options"].get("workloads", []):
        from ...base.records import Workload
        w = Workload.model_validate(wd)
        entry = {"id": w.id, "label": w.label, "axes": w.axes, "dtype": w.dtype.value, "weight": w.weight,
                 "trials": sum(1 for t in trials if t.workload_id == w.id),
                 "passed": sum(1 for t in trials if t.workload_id == w.id and t.verdict.status.value == "PASSED")}
        if w.id in best:
            t = best[w.id]
            cand = archive.get_candidate(t.candidate_id)
            entry["best"] = {"candidate": t.candidate_id, "label": cand.label if cand else "", "trial": t.id,
                             "search": _measure_dict(t.measurement),
                             "registers": getattr(t.build, "registers", None),
                             "spills": getattr(t.build, "spills", None)}
            if w.id in second:
                entry["best"]["runner_up"] = runner_up_record(archive, t, second[w.id])
        if w.id in finals:
            cid, m = finals[w.id]
            entry["confirmed"] = {"candidate": cid, **_measure_dict(m),
                                  "baselines": {name: ({**_measure_dict(bm), "note": note} if bm else {"note": note})
                                                for name, (bm, note) in archive.baselines(rid, w.id).items()}}
            if w.id in confirmations:   # confirmed in several fresh processes (tune/select/confirm.py)
                entry["confirmed"]["across_processes"] = confirmations[w.id].model_dump(mode="json")
        entry["front"] = [{"candidate": cid, **obj} for cid, obj in archive.front(rid, w.id)]
        entry["sanitizer"] = [c for c in checks if c.get("workload_id") == w.id]
        if planner:
            entry["hypotheses"] = hypothesis_record(archive, rid, [t for t in trials if t.workload_id == w.id])
        workloads.append(entry)
    env = run["environment"]
    evidence = [e["payload"] for e in archive.events(rid, "evidence")] if planner else []
    return {
        "run": rid, "op": run["op"], "status": run["status"], "manifest_hash": run["manifest_hash"],
        "device": env.get("device"), "gpu": env.get("gpu"), "torch": env.get("torch"), "triton": env.get("triton"),
        "interpreter": not Device.of_environment(env).is_cuda,
        "prior": run["options"].get("prior"),   # the recording that warm-started the search (None: none did)
        "counts": archive.count(rid),
        "costs": {"compile_s": sum(t.costs.compile_s for t in trials),
                  "verify_s": sum(t.costs.verify_s for t in trials),
                  "bench_s": sum(t.costs.bench_s for t in trials),
                  "wall_s": sum(t.costs.wall_s for t in trials),
                  **({"profile_s": sum(e.get("seconds", 0.0) for e in evidence)} if planner else {})},
        "throughput": throughput(archive, rid).model_dump(mode="json"),
        "pruning": [e["payload"] if "payload" in e else e for e in archive.events(rid, "prune")],
        "workloads": workloads,
        "failures": failure_groups(archive, rid, trials),
        "llm": _llm_section(archive, rid, trials),
        "integrity": archive.integrity(rid).model_dump(mode="json"),
    }


def runner_up_record(archive: Archive, best, second) -> dict:
    """The next-fastest candidate beside the best: its kernel time and interval, and whether the two intervals
    overlap (then the search's ranking of the two is not resolved by its measurements)."""
    cand = archive.get_candidate(second.candidate_id)
    a, b = best.measurement.kernel, second.measurement.kernel
    return {"candidate": second.candidate_id, "label": cand.label if cand else "", "trial": second.id,
            "kernel_us": b.median_us, "kernel_ci_us": [b.ci_low_us, b.ci_high_us],
            "overlaps": a.ci_low_us <= b.ci_high_us and b.ci_low_us <= a.ci_high_us}


def failure_groups(archive: Archive, run_id: str, trials: list) -> list[dict]:
    """The run's failed trials grouped by reason (kernelloop.core.verify.explain.failure_reason), most frequent first;
    each trial with its stage, its case (shape, dtype, distribution, seed, check index, held-out class) and, for a
    crash, where it was and the signal: the user's record, in full."""
    from ...core.verify.explain import failure_reason, failures_by_trial
    events = failures_by_trial(archive, run_id)
    labels = {}
    groups: dict[tuple[str, str], list[dict]] = {}
    for t in trials:
        v = t.verdict
        if v.status.value == "PASSED":
            continue
        if t.candidate_id not in labels:
            c = archive.get_candidate(t.candidate_id)
            labels[t.candidate_id] = c.label if c else ""
        e = events.get(t.id, {})
        entry = {"trial": t.id, "index": t.index, "candidate": t.candidate_id, "label": labels[t.candidate_id],
                 "workload_id": t.workload_id, "stage": e.get("stage"), "case": e.get("case") or v.case,
                 "case_label": v.case, "message": v.message[:500]}
        for k in ("at", "signal", "exitcode"):
            if e.get(k) is not None:
                entry[k] = e[k]
        groups.setdefault((failure_reason(v), v.status.value), []).append(entry)
    out = [{"reason": r, "status": s, "count": len(ts), "trials": ts} for (r, s), ts in groups.items()]
    return sorted(out, key=lambda g: (-g["count"], g["reason"]))


def hypothesis_record(archive: Archive, run_id: str, trials: list) -> dict:
    """How the planner's predictions fared on a workload's trials: outcome counts over every archived report
    (overall and by metric), trials with hypotheses, and the hit rate confirmed / (confirmed + refuted)."""
    counts = {"confirmed": 0, "refuted": 0, "inconclusive": 0}
    by_metric: dict[str, dict[str, int]] = {}
    with_hyp = profiled = reports = 0
    for t in trials:
        rep = archive.profile(run_id, t.id)
        if rep is None:
            continue
        reports += 1
        profiled += rep.kernel is not None
        with_hyp += bool(rep.hypotheses)
        for o in rep.outcomes:
            counts[o.status] += 1
            m = by_metric.setdefault(o.hypothesis.metric, {"confirmed": 0, "refuted": 0, "inconclusive": 0})
            m[o.status] += 1
    decided = counts["confirmed"] + counts["refuted"]
    return {**counts, "hit_rate": counts["confirmed"] / decided if decided else None, "trials": with_hyp,
            "reports": reports, "profiled": profiled, "by_metric": by_metric}


def _llm_section(archive: Archive, run_id: str, trials: list) -> dict | None:
    """LLM calls of the run (tokens, cached tokens, latency, price per call, trial and run); None without any."""
    from ...tune.propose.llm.costs import summarize_llm
    events = [e for kind in ("llm-proposer", "llm-call", "llm-stop") for e in archive.events(run_id, kind)]
    return summarize_llm(sorted(events, key=lambda e: e["seq"]), trials)
