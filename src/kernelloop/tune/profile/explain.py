"""What `kernelloop profile` says about a run's trials and baselines, as JSON-able records.

For each selected trial (default: the best passing trial of every workload), and for each named baseline on the
workloads of those trials: the bottleneck class with the evidence kept for it, the roofline position, the launches
of the profiled call (summed when there are several; the class is the longest launch's), the fraction of the
bandwidth roof seen by Nsight Compute next to the one seen by the timer, the build resources and the hypothesis
record (what the proposal predicted, and what moved relative to its parent). A subject without an archived profile
gets the roofline of its measurement (roofs: the measured-ceilings cache of the run's device, else the run's
device-copy baseline of the same bytes) and a note that no Nsight Compute profile is archived. Profiling on demand
is `on_demand.py`; the terminal view `cli/profile.py`.
"""

from __future__ import annotations

from typing import Any

from ...core.archive import Archive
from ...base.records import Measurement, OpSpec, ProfileReport, Trial, Workload
from ...base.records.device import Device
from ..select.pareto import best_per_workload
from .aggregate import aggregate, agreement
from .ceilings import CeilingsCacheError, cached_ceilings
from .classify import classify
from .evidence import build_resources, parent_observations
from .hypothesis import evaluate_hypotheses, observations, parse_hypotheses
from .report import cross_check, roofline_for

NO_PROFILE = "no Nsight Compute profile is archived for this trial"
NO_BASELINE_PROFILE = "no Nsight Compute profile is archived for this baseline"
BUILTIN_BASELINES = ("eager", "torch.compile", "copy", "copy-kernel")   # = kernelloop.core.execute.worker.BUILTIN_BASELINES


def select_trials(trials: list[Trial], wanted: str | None) -> list[Trial]:
    """The trial `wanted` names (id, unique id prefix or index; LookupError otherwise), or without it the best
    passing trial of every workload."""
    if wanted is None:
        return sorted(best_per_workload(trials).values(), key=lambda t: t.index)
    if wanted.isdigit():
        hit = [t for t in trials if t.index == int(wanted)]
    else:
        hit = [t for t in trials if t.id == wanted] or [t for t in trials if t.id.startswith(wanted)]
    if len(hit) != 1:
        raise LookupError(f"{'no' if not hit else 'more than one'} trial matches {wanted!r} "
                          f"(give a trial id, a unique prefix, or a trial index)")
    return hit


def run_roofs(archive: Archive, run: dict, workload_id: str) -> tuple[Any, float | None, list[str]]:
    """(measured ceilings of the run's device or None, the run's copy baseline in us or None, notes)."""
    env, notes = run["environment"], []
    ceilings = None
    if Device.of_environment(env).is_cuda and env.get("gpu"):
        try:
            ceilings = cached_ceilings(env["gpu"], env.get("driver", ""), env.get("torch", ""))
        except CeilingsCacheError as e:
            notes.append(f"ceilings cache unreadable: {e}")
    copy = archive.baselines(run["id"], workload_id).get("copy", (None, ""))[0]
    return ceilings, (copy.kernel.median_us if copy is not None else None), notes


def _parent_observations(archive: Archive, run_id: str, trial: Trial, candidate) -> tuple[dict | None, str]:
    for pid in candidate.parent_ids if candidate else []:
        got = parent_observations(archive, run_id, pid, trial.workload_id)
        if got[0] is not None:
            return got
    return None, ""


def timing_of(archive: Archive, run: dict, trial: Trial) -> tuple[Measurement | None, str]:
    """The timing a trial's roof fractions use: the run's confirmation measurement of the trial's candidate (taken
    in the same session as the baselines and the copy roof), else the trial's own measurement."""
    final = archive.finals(run["id"]).get(trial.workload_id)
    if final is not None and final[0] == trial.candidate_id:
        m = final[1]
        return m, f"confirmation measurement ({m.policy.name}, {m.kernel.n} samples)"
    m = trial.measurement
    return m, (f"trial measurement ({m.policy.name}, {m.kernel.n} samples)" if m is not None else "")


def _profile_fields(report: ProfileReport, spec: OpSpec, workload: Workload | None, timed: Measurement | None,
                    source: str) -> dict:
    """aggregate / agreement of a report, computed now for reports archived without them."""
    agg = report.aggregate
    if agg is None and report.kernel is not None:
        agg = aggregate([report.kernel])
    agree = report.agreement
    if agree is None and agg is not None and workload is not None:
        agree = agreement(spec, workload, report.roofline, profile_bytes=agg.dram_bytes, profile_ns=agg.duration_ns,
                          timing_us=timed.kernel.median_us if timed is not None else None, timing_source=source)
    return {"aggregate": agg.model_dump(mode="json") if agg is not None else None,
            "agreement": agree.model_dump(mode="json") if agree is not None else None}


def trial_record(archive: Archive, run: dict, trial: Trial) -> dict:
    """The JSON-able record `profile --json` prints for one trial."""
    spec = OpSpec.model_validate(run["spec"])
    workload = archive.get_workload(trial.workload_id)
    candidate = archive.get_candidate(trial.candidate_id)
    report = archive.profile(run["id"], trial.id)
    notes: list[str] = []
    if report is None:
        notes.append(NO_PROFILE)
        ceilings, copy_us, more = run_roofs(archive, run, trial.workload_id)
        notes += more
        kernel_us = trial.measurement.kernel.median_us if trial.measurement is not None else None
        roof = roofline_for(spec, workload, kernel_us, ceilings=ceilings, copy_us=copy_us)
        report = ProfileReport(trial_id=trial.id, candidate_id=trial.candidate_id, workload_id=trial.workload_id,
                               roofline=roof, build=build_resources(trial))
    elif report.classification is None and report.kernel is not None:
        report = report.model_copy(update={"classification": classify(report.kernel, build=report.build)})
    hypotheses = list(report.hypotheses)
    if not hypotheses and candidate is not None and candidate.hypothesis:
        try:
            hypotheses = parse_hypotheses(candidate.hypothesis)
        except ValueError as e:
            notes.append(f"candidate hypothesis not in the structured form: {e}")
    outcomes = list(report.outcomes)
    parent_trial = ""
    if hypotheses and not outcomes:
        parent_obs, parent_trial = _parent_observations(archive, run["id"], trial, candidate)
        if parent_obs is not None:
            outcomes = evaluate_hypotheses(hypotheses, parent_obs, observations(report, trial.measurement))
        else:
            notes.append("no parent trial on this workload: hypotheses cannot be evaluated")
    c = report.classification
    note = cross_check(report)
    if note is not None and note not in report.notes:
        notes.append(note)
    return {
        "trial": trial.id, "index": trial.index, "workload": workload.label if workload else trial.workload_id,
        "candidate": trial.candidate_id, "config": candidate.config if candidate else {},
        "proposer": candidate.proposer if candidate else "", "status": trial.verdict.status.value,
        "kernel_us": trial.measurement.kernel.median_us if trial.measurement is not None else None,
        "profiled": report.kernel is not None, "artifact": report.artifact,
        "classification": c.model_dump(mode="json") if c is not None else None,
        "roofline": report.roofline.model_dump(mode="json") if report.roofline is not None else None,
        **_profile_fields(report, spec, workload, *timing_of(archive, run, trial)),
        "build": ({**report.build.model_dump(mode="json"), "ldg128_fraction": report.build.ldg128_fraction}
                  if report.build is not None else None),
        "hypothesis_text": candidate.hypothesis if candidate else "",
        "hypotheses": [h.model_dump(mode="json") for h in hypotheses],
        "outcomes": [o.model_dump(mode="json") for o in outcomes], "parent_trial": parent_trial,
        "cites": report.cites, "notes": [*report.notes, *notes],
    }


def baseline_record(archive: Archive, run: dict, workload: Workload, name: str) -> dict:
    """The JSON-able record `profile --json` prints for one baseline on one workload."""
    spec = OpSpec.model_validate(run["spec"])
    measured, why = archive.baselines(run["id"], workload.id).get(name, (None, ""))
    report = archive.baseline_profile(run["id"], workload.id, name)
    notes: list[str] = []
    if measured is None:
        notes.append(f"the run has no timing of baseline {name!r} on this workload" + (f" ({why})" if why else ""))
    source = f"run's {name} baseline measurement ({measured.policy.name}, {measured.kernel.n} samples)" \
        if measured is not None else ""
    if report is None:
        notes.append(NO_BASELINE_PROFILE)
        ceilings, copy_us, more = run_roofs(archive, run, workload.id)
        notes += more
        roof = roofline_for(spec, workload, measured.kernel.median_us if measured is not None else None,
                            ceilings=ceilings, copy_us=copy_us)
        report = ProfileReport(trial_id="", workload_id=workload.id, baseline=name, roofline=roof)
    elif report.classification is None and report.kernel is not None:
        report = report.model_copy(update={"classification": classify(report.kernel)})
    c = report.classification
    return {
        "baseline": name, "workload": workload.label, "workload_id": workload.id,
        "kernel_us": measured.kernel.median_us if measured is not None else None,
        "profiled": report.kernel is not None, "artifact": report.artifact,
        "classification": c.model_dump(mode="json") if c is not None else None,
        "roofline": report.roofline.model_dump(mode="json") if report.roofline is not None else None,
        **_profile_fields(report, spec, workload, measured, source),
        "notes": [*report.notes, *notes],
    }


def first_run(archive: Archive) -> dict:
    """The archive's first run (LookupError when it holds none)."""
    runs = archive.runs()
    if not runs:
        raise LookupError("the archive holds no run")
    return runs[0]


def workloads_of(archive: Archive, trials: list[Trial]) -> list[Workload]:
    """The archived workloads of `trials`, each once, in the trials' order."""
    seen: dict[str, Workload] = {}
    for t in trials:
        if t.workload_id not in seen:
            w = archive.get_workload(t.workload_id)
            if w is not None:
                seen[t.workload_id] = w
    return list(seen.values())


def recorded_baselines(archive: Archive, run: dict) -> list[str]:
    """Names of the baselines the run measured (on any workload)."""
    names: set[str] = set()
    for w in {t.workload_id for t in archive.trials(run["id"])}:
        names |= {n for n, (m, _) in archive.baselines(run["id"], w).items() if m is not None}
    return sorted(names)


def profile_summary(archive: Archive, trial: str | None = None, baselines: list[str] | tuple[str, ...] = ()) -> dict:
    """Records of the selected trials of the archive's (first) run, and of the named baselines on their workloads."""
    run = first_run(archive)
    trials = archive.trials(run["id"])
    chosen = select_trials(trials, trial)
    env = run["environment"]
    return {"run": run["id"], "op": run["op"], "device": env.get("device"), "gpu": env.get("gpu"),
            "interpreter": not Device.of_environment(env).is_cuda,
            "trials": [trial_record(archive, run, t) for t in chosen],
            "baselines": [baseline_record(archive, run, w, name) for w in workloads_of(archive, chosen)
                          for name in baselines]}
