"""The summary record of a run (`base/records/summary.py`'s `RunSummary`), built from its archive. `show --json`
prints exactly this record; the terminal (`terminal.py`) and HTML (`html.py`) writers render it directly."""

from __future__ import annotations

from ...base.records import Workload
from ...base.records.device import Device
from ...base.records.events import PruneEvent, SanitizeEvent
from ...base.records.llm import LLMSection
from ...base.records.summary import (BaselineSummary, BestSummary, ConfirmedSummary, CostSummary, FailedTrial,
                                     FailureGroup, FrontEntry, HypothesisSummary, MeasurementSummary, PruneSummary,
                                     RunnerUp, RunSummary, SanitizerCheck, WorkloadSummary)
from ...core.archive import Archive
from ...tune.select.pareto import best_per_workload, runner_up_per_workload
from ...tune.loop.throughput import throughput


def run_summary(archive: Archive, run_id: str | None = None, run_dir: str | None = None) -> RunSummary:
    """The `RunSummary` of a run in an open archive (its first run unless `run_id` names one); `run_dir` is the run
    folder optimize names in its output."""
    runs = archive.runs()
    if not runs:
        raise LookupError("the archive holds no run")
    run = next((r for r in runs if r["id"] == run_id), None) if run_id else runs[0]
    if run is None:
        raise LookupError(f"no run {run_id!r} in the archive")
    rid = run["id"]
    trials = archive.trials(rid)
    planner = run["options"].get("strategy") == "planner"
    workloads = workload_summaries(archive, run, trials, planner)
    env = run["environment"]
    evidence = [e["payload"] for e in archive.events(rid, "evidence")] if planner else []
    return RunSummary(
        run=rid, op=run["op"], status=run["status"], manifest_hash=run["manifest_hash"],
        device=env.get("device"), gpu=env.get("gpu"), torch=env.get("torch"), triton=env.get("triton"),
        interpreter=not Device.of_environment(env).is_cuda,
        prior=run["options"].get("prior"),   # the recording that warm-started the search (None: none did)
        counts=archive.count(rid),
        costs=CostSummary(compile_s=sum(t.costs.compile_s for t in trials),
                          verify_s=sum(t.costs.verify_s for t in trials),
                          bench_s=sum(t.costs.bench_s for t in trials),
                          wall_s=sum(t.costs.wall_s for t in trials),
                          profile_s=sum(e.get("seconds", 0.0) for e in evidence) if planner else None),
        throughput=throughput(archive, rid),
        pruning=[PruneSummary.model_validate(e.payload.model_dump() if isinstance(e.event, PruneEvent) else e.payload)
                 for e in archive.event_records(rid, "prune")],
        workloads=workloads,
        failures=failure_groups(archive, rid, trials),
        llm=_llm_section(archive, rid, trials),
        run_dir=run_dir,
        integrity=archive.integrity(rid),
    )


def workload_summaries(archive: Archive, run: dict, trials: list, planner: bool) -> list[WorkloadSummary]:
    """Each workload of the run: its trials, best (with runner-up), confirmation, front, sanitizer checks and, with
    the planner, how its hypotheses fared."""
    from ...tune.select.sanitize import SANITIZE_EVENT, rejected, without_rejected
    rid = run["id"]
    checks = [SanitizerCheck.model_validate(e.event.payload if isinstance(e.event, SanitizeEvent) else e.payload)
              for e in archive.event_records(rid, SANITIZE_EVENT)]
    usable = without_rejected(trials, rejected(archive, rid))   # compute-sanitizer's findings are REJECTED
    best = best_per_workload(usable)
    second = runner_up_per_workload(usable)
    finals = archive.finals(rid)
    confirmations = archive.confirmations(rid)
    out = []
    for wd in run["options"].get("workloads", []):
        w = Workload.model_validate(wd)
        mine = [t for t in trials if t.workload_id == w.id]
        best_w = confirmed = None
        if w.id in best:
            t = best[w.id]
            cand = archive.get_candidate(t.candidate_id)
            best_w = BestSummary(
                candidate=t.candidate_id, label=cand.label if cand else "", trial=t.id,
                search=MeasurementSummary.of(t.measurement), registers=getattr(t.build, "registers", None),
                spills=getattr(t.build, "spills", None),
                runner_up=runner_up_record(archive, t, second[w.id]) if w.id in second else None)
        if w.id in finals:
            cid, m = finals[w.id]
            baselines = {name: (BaselineSummary(**MeasurementSummary.of(bm).model_dump(), note=note) if bm
                                else BaselineSummary(note=note))
                         for name, (bm, note) in archive.baselines(rid, w.id).items()}
            confirmed = ConfirmedSummary(candidate=cid, **MeasurementSummary.of(m).model_dump(), baselines=baselines,
                                         across_processes=confirmations.get(w.id))
        entry = WorkloadSummary(
            id=w.id, label=w.label, axes=w.axes, dtype=w.dtype.value, weight=w.weight, trials=len(mine),
            passed=sum(1 for t in mine if t.verdict.status.value == "PASSED"), best=best_w, confirmed=confirmed,
            front=[FrontEntry(candidate=cid, **obj) for cid, obj in archive.front(rid, w.id)],
            sanitizer=[c for c in checks if c.workload_id == w.id],
            hypotheses=hypothesis_record(archive, rid, mine) if planner else None)
        out.append(entry)
    return out


def runner_up_record(archive: Archive, best, second) -> RunnerUp:
    """The next-fastest candidate beside the best: its kernel time and interval, and whether the two intervals
    overlap (then the search's ranking of the two is not resolved by its measurements)."""
    cand = archive.get_candidate(second.candidate_id)
    a, b = best.measurement.kernel, second.measurement.kernel
    return RunnerUp(candidate=second.candidate_id, label=cand.label if cand else "", trial=second.id,
                    kernel_us=b.median_us, kernel_ci_us=(b.ci_low_us, b.ci_high_us),
                    overlaps=a.ci_low_us <= b.ci_high_us and b.ci_low_us <= a.ci_high_us)


def failure_groups(archive: Archive, run_id: str, trials: list) -> list[FailureGroup]:
    """The run's failed trials grouped by reason (kernelloop.core.verify.explain.failure_reason), most frequent first;
    each trial with its stage, its case (shape, dtype, distribution, seed, check index, held-out class) and, for a
    crash, where it was and the signal: the user's record, in full."""
    from ...core.verify.explain import failure_reason, failures_by_trial
    events = failures_by_trial(archive, run_id)
    labels = {}
    groups: dict[tuple[str, str], list[FailedTrial]] = {}
    for t in trials:
        v = t.verdict
        if v.status.value == "PASSED":
            continue
        if t.candidate_id not in labels:
            c = archive.get_candidate(t.candidate_id)
            labels[t.candidate_id] = c.label if c else ""
        e = events.get(t.id, {})
        entry = FailedTrial(trial=t.id, index=t.index, candidate=t.candidate_id, label=labels[t.candidate_id],
                            workload_id=t.workload_id, stage=e.get("stage"), case=e.get("case") or v.case,
                            case_label=v.case, message=v.message[:500], at=e.get("at"), signal=e.get("signal"),
                            exitcode=e.get("exitcode"))
        groups.setdefault((failure_reason(v), v.status.value), []).append(entry)
    out = [FailureGroup(reason=r, status=s, count=len(ts), trials=ts) for (r, s), ts in groups.items()]
    return sorted(out, key=lambda g: (-g.count, g.reason))


def hypothesis_record(archive: Archive, run_id: str, trials: list) -> HypothesisSummary:
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
    return HypothesisSummary(**counts, hit_rate=counts["confirmed"] / decided if decided else None, trials=with_hyp,
                             reports=reports, profiled=profiled, by_metric=by_metric)


def _llm_section(archive: Archive, run_id: str, trials: list) -> LLMSection | None:
    """LLM calls of the run (tokens, cached tokens, latency, price per call, trial and run); None without any."""
    from ...tune.propose.llm.costs import summarize_llm
    events = [e for kind in ("llm-proposer", "llm-call", "llm-stop") for e in archive.event_records(run_id, kind)]
    return summarize_llm(sorted(events, key=lambda e: e.seq), trials)
