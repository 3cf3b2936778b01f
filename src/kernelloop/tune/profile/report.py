"""Assemble a ProfileReport for a trial, and profile-and-archive one trial (the controller's hook).

`make_report` is pure: it combines whatever is known (the profiled launches, build resources, ceilings or a copy
baseline, the timing, the parent's observations) into one record; several launches are summed (`aggregate.py`)
and the class is the longest launch's. `make_baseline_report` does the same for a baseline (eager, copy, ...).
`profile_trial` / `profile_baseline` run Nsight Compute on the trial's candidate / on the baseline (GPU host
only), keep the `.ncu-rep` in the run folder under `profiles/`, and store the report in the archive (tables
`profiles` and `baseline_profiles`). With `source_page`, a trial's profile also collects the SourceCounters section
and keeps its source page (counters per SASS instruction) as `profiles/<trial>.source.csv`, which `kernelloop ptx`
weighs a winner's PTX windows with.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from ...base.records import (BuildResources, Ceilings, Hypothesis, KernelProfile, Measurement, OpSpec, ProfileReport,
                       Roofline, Trial, Workload)
from .aggregate import aggregate, agreement
from .classify import DEFAULT_THRESHOLDS, Thresholds, classify
from .hypothesis import DEFAULT_NOISE, Noise, Observation, evaluate_hypotheses, observations
from .roofline import roofline_from_ceilings, roofline_from_copy, roofline_position


def roofline_for(spec: OpSpec, workload: Workload, kernel_us: float | None, *, ceilings: Ceilings | None = None,
                 copy_us: float | None = None, dram_bytes: float | None = None) -> Roofline:
    """Roofline under the best roofs available: measured ceilings, else the run's copy baseline, else none."""
    if ceilings is not None:
        return roofline_from_ceilings(spec, workload, kernel_us, ceilings, dram_bytes=dram_bytes)
    if copy_us is not None and copy_us > 0:
        return roofline_from_copy(spec, workload, kernel_us, copy_us, dram_bytes=dram_bytes)
    return roofline_position(spec, workload, kernel_us, ceiling_source="no ceilings known", dram_bytes=dram_bytes)


def cross_check(report: ProfileReport) -> str | None:
    """A note when the class and the roofline disagree: compute-bound by throughput, memory-bound by intensity."""
    c, r = report.classification, report.roofline
    if c is not None and r is not None and c.bottleneck.value == "compute-bound" and r.bound == "memory":
        return ("classified compute-bound, but the op's arithmetic intensity is below the ridge point: the compute "
                "throughput is instruction overhead (address math, masks, reductions), not FLOPs")
    return None


def _timing_label(m: Measurement, what: str) -> str:
    return f"{what} ({m.policy.name}, {m.kernel.n} samples)"


def _assemble(spec: OpSpec, workload: Workload, launches: list[KernelProfile], *, measurement: Measurement | None,
              timing_source: str, build: BuildResources | None, ceilings: Ceilings | None, copy_us: float | None,
              thresholds: Thresholds, notes: list[str]) -> dict:
    """The fields a report derives from its launches and its timing: kernel, aggregate, class, roofline, agreement."""
    agg = aggregate(launches, thresholds) if launches else None
    kernel = launches[agg.dominant] if agg is not None else None
    kernel_us = measurement.kernel.median_us if measurement is not None else None
    if kernel_us is None and agg is not None and agg.duration_ns is not None:
        kernel_us = agg.duration_ns / 1e3
        notes.append("no timing measurement: the roofline uses Nsight Compute's duration")
    if agg is not None and agg.launches > 1:
        top = agg.kernels[agg.dominant]
        share = f", {top.share:.0%} of the time" if top.share is not None else ""
        notes.append(f"{agg.launches} launches in the profiled call: durations and DRAM bytes are their sums; "
                     f"the class is the longest launch's ({top.kernel[:80]}{share})")
    dram = agg.dram_bytes if agg is not None else None
    roof = roofline_for(spec, workload, kernel_us, ceilings=ceilings, copy_us=copy_us, dram_bytes=dram)
    klass = classify(kernel, thresholds, build) if kernel is not None else None
    agree = None
    if agg is not None:
        agree = agreement(spec, workload, roof, profile_bytes=agg.dram_bytes, profile_ns=agg.duration_ns,
                          timing_us=measurement.kernel.median_us if measurement is not None else None,
                          timing_source=timing_source)
    return {"kernel": kernel, "aggregate": agg, "classification": klass, "roofline": roof, "agreement": agree}


def make_report(trial: Trial, spec: OpSpec, workload: Workload, *, kernel: KernelProfile | None = None,
                kernels: list[KernelProfile] | None = None, build: BuildResources | None = None,
                ceilings: Ceilings | None = None, copy_us: float | None = None,
                hypotheses: list[Hypothesis] | None = None, parent: dict[str, Observation] | None = None,
                cites: list[str] | None = None, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                noise: Noise = DEFAULT_NOISE, artifact: str = "", command: list[str] | None = None,
                notes: list[str] | None = None, timed: Measurement | None = None,
                timing_source: str = "") -> ProfileReport:
    """One trial's report. `kernels`: every launch profiled in the call (summed, class of the longest); `kernel`:
    the one launch when there is only one. Kernel time: `timed` (e.g. the run's confirmation measurement of the
    candidate), else the trial's measured median, else the profiled duration."""
    notes = list(notes or [])
    m: Measurement | None = trial.measurement
    t = timed if timed is not None else m
    source = timing_source or (_timing_label(t, "trial measurement") if t is not None and timed is None else "")
    launches = list(kernels) if kernels else ([kernel] if kernel is not None else [])
    parts = _assemble(spec, workload, launches, measurement=t, timing_source=source, build=build, ceilings=ceilings,
                      copy_us=copy_us, thresholds=thresholds, notes=notes)
    report = ProfileReport(trial_id=trial.id, candidate_id=trial.candidate_id, workload_id=trial.workload_id,
                           build=build, hypotheses=list(hypotheses or []), cites=list(cites or []), artifact=artifact,
                           command=list(command or []), notes=notes, **parts)
    note = cross_check(report)
    if note is not None:
        report = report.model_copy(update={"notes": [*report.notes, note]})
    if report.hypotheses and parent is not None:
        outcomes = evaluate_hypotheses(report.hypotheses, parent, observations(report, m), noise)
        report = report.model_copy(update={"outcomes": outcomes})
    return ProfileReport.model_validate(report.model_dump())


def make_baseline_report(name: str, spec: OpSpec, workload: Workload, *, kernels: list[KernelProfile] | None = None,
                         measurement: Measurement | None = None, ceilings: Ceilings | None = None,
                         copy_us: float | None = None, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                         artifact: str = "", command: list[str] | None = None,
                         notes: list[str] | None = None) -> ProfileReport:
    """A baseline's report (eager, copy, liger, ...): no trial; `measurement` is the run's timing of it."""
    notes = list(notes or [])
    source = _timing_label(measurement, f"run's {name} baseline measurement") if measurement is not None else ""
    parts = _assemble(spec, workload, list(kernels or []), measurement=measurement, timing_source=source, build=None,
                      ceilings=ceilings, copy_us=copy_us, thresholds=thresholds, notes=notes)
    report = ProfileReport(trial_id="", workload_id=workload.id, baseline=name, artifact=artifact,
                           command=list(command or []), notes=notes, **parts)
    note = cross_check(report)
    if note is not None:
        report = report.model_copy(update={"notes": [*report.notes, note]})
    return ProfileReport.model_validate(report.model_dump())


def _keep_report(result, run_dir: Path, stem: str) -> str:
    """Copy the .ncu-rep into RUN/profiles/STEM.ncu-rep; its path relative to the run folder ('' if none)."""
    if result.run.report is not None and result.run.report.exists():
        kept = run_dir / "profiles" / f"{stem}.ncu-rep"
        shutil.copyfile(result.run.report, kept)
        return str(kept.relative_to(run_dir))
    return ""


def source_page_path(run_dir: str | Path, trial_id: str) -> Path:
    """Where a trial's source page (counters per SASS instruction) is kept: RUN/profiles/<trial>.source.csv."""
    return Path(run_dir) / "profiles" / f"{trial_id}.source.csv"


def _keep_source_page(result, run_dir: Path, trial_id: str) -> list[str]:
    """Export the report's source page to `source_page_path`; notes saying where it is, or why there is none."""
    from .ncu import export_csv
    from .ncu_csv import NcuParseError
    from .source_page import parse_source_csv, pick_metric
    if result.run.report is None or not result.run.report.exists():
        return []
    try:
        text = export_csv(result.run.report, page="source")
        page = parse_source_csv(text)
    except (OSError, RuntimeError, NcuParseError) as e:
        return [f"no source page: {str(e)[:500]}"]
    path = source_page_path(run_dir, trial_id)
    path.write_text(text)
    metric = pick_metric(page)
    if metric is None:
        return [f"the source page ({path.relative_to(run_dir)}) has no per-instruction samples or executed counts"]
    return [f"counters per SASS instruction ({metric}) in {path.relative_to(run_dir)}: `kernelloop ptx propose` "
            f"weighs the kernel's PTX windows with them"]


def profile_trial(archive, run_dir: str | Path, trial: Trial, *, op_dir: str | Path, source_file: str | Path,
                  config: dict, workload: Workload, spec: OpSpec, seed: int, kernel_regex: str | None = None,
                  build: BuildResources | None = None, ceilings: Ceilings | None = None,
                  copy_us: float | None = None, hypotheses: list[Hypothesis] | None = None,
                  parent: dict[str, Observation] | None = None, cites: list[str] | None = None,
                  timeout_s: float = 600.0, timed: Measurement | None = None,
                  timing_source: str = "", source_page: bool = False) -> ProfileReport:
    """Profile one trial's candidate with ncu (GPU), keep the .ncu-rep, archive the report, return it.

    Every launch of the candidate's call that matches `kernel_regex` (all of them without one): summed, class of
    the longest. `source_page`: also collect the SourceCounters section and keep the source page
    (`source_page_path`).
    """
    from .metrics import SECTIONS
    from .ncu import SOURCE_SECTION, NcuOptions, harness_job, profile_candidate
    run_dir = Path(run_dir)
    work = run_dir / "profiles" / trial.id
    job = harness_job(op_dir, source_file, config, workload.model_dump_json(), seed)
    # Every matching launch of the one profiled call (the NVTX range holds exactly one call): a candidate that
    # launches several kernels is summed like a baseline, so the profile covers what the timer timed.
    options = NcuOptions(kernel_regex=kernel_regex, timeout_s=timeout_s, launch_count=None,
                         sections=SECTIONS + ((SOURCE_SECTION,) if source_page else ()))
    result = profile_candidate(job, work, options)
    artifact = _keep_report(result, run_dir, trial.id)
    notes = result.notes + (_keep_source_page(result, run_dir, trial.id) if source_page else [])
    report = make_report(trial, spec, workload, kernels=result.kernels, build=build, ceilings=ceilings,
                         copy_us=copy_us, hypotheses=hypotheses, parent=parent, cites=cites, artifact=artifact,
                         command=result.run.command, notes=notes, timed=timed, timing_source=timing_source)
    archive.put_profile(trial.run_id, trial.id, report)
    return report


def baseline_stem(name: str, workload: Workload) -> str:
    """File stem of a baseline's profile in RUN/profiles/: baseline-<name>-<workload id>."""
    return "baseline-" + re.sub(r"[^A-Za-z0-9_.-]", "_", name) + "-" + workload.id


def profile_baseline(archive, run_dir: str | Path, run_id: str, name: str, *, op_dir: str | Path,
                     workload: Workload, spec: OpSpec, seed: int, measurement: Measurement | None = None,
                     ceilings: Ceilings | None = None, copy_us: float | None = None,
                     timeout_s: float = 600.0) -> ProfileReport:
    """Profile baseline `name` on `workload` with ncu (every launch of its call), keep the .ncu-rep as
    RUN/profiles/baseline-<name>-<workload>.ncu-rep, archive the report (table baseline_profiles), return it."""
    from .ncu import NcuOptions, baseline_job, profile_candidate
    run_dir = Path(run_dir)
    stem = baseline_stem(name, workload)
    job = baseline_job(op_dir, name, workload, seed)
    result = profile_candidate(job, run_dir / "profiles" / stem, NcuOptions(timeout_s=timeout_s, launch_count=None))
    artifact = _keep_report(result, run_dir, stem)
    report = make_baseline_report(name, spec, workload, kernels=result.kernels, measurement=measurement,
                                  ceilings=ceilings, copy_us=copy_us, artifact=artifact, command=result.run.command,
                                  notes=result.notes)
    archive.put_baseline_profile(run_id, workload.id, name, report)
    return report


__all__ = ["baseline_stem", "cross_check", "make_baseline_report", "make_report", "profile_baseline",
           "profile_trial", "roofline_for", "source_page_path"]
