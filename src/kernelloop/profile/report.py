"""Assemble a ProfileReport for a trial, and profile-and-archive one trial (the controller's hook).

`make_report` is pure: it combines whatever is known (a kernel profile, build resources, ceilings or a copy
baseline, the parent's observations) into one record. `profile_trial` runs Nsight Compute on the trial's
candidate (GPU host only), keeps the `.ncu-rep` in the run folder under `profiles/`, and stores the report
in the archive next to the trial.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..records import (BuildResources, Ceilings, Hypothesis, KernelProfile, Measurement, OpSpec, ProfileReport,
                       Roofline, Trial, Workload)
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


def make_report(trial: Trial, spec: OpSpec, workload: Workload, *, kernel: KernelProfile | None = None,
                build: BuildResources | None = None, ceilings: Ceilings | None = None, copy_us: float | None = None,
                hypotheses: list[Hypothesis] | None = None, parent: dict[str, Observation] | None = None,
                cites: list[str] | None = None, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                noise: Noise = DEFAULT_NOISE, artifact: str = "", command: list[str] | None = None,
                notes: list[str] | None = None) -> ProfileReport:
    """One trial's report. Kernel time: the trial's measured median, else the profiled duration."""
    notes = list(notes or [])
    m: Measurement | None = trial.measurement
    kernel_us = m.kernel.median_us if m is not None else None
    if kernel_us is None and kernel is not None and kernel.number("duration_ns") is not None:
        kernel_us = kernel.number("duration_ns") / 1e3
        notes.append("no timing measurement: the roofline uses Nsight Compute's duration")
    dram = kernel.number("dram_bytes") if kernel is not None else None
    if dram is None and kernel is not None:
        r, w = kernel.number("dram_read_bytes"), kernel.number("dram_write_bytes")
        dram = r + w if r is not None and w is not None else None
    roof = roofline_for(spec, workload, kernel_us, ceilings=ceilings, copy_us=copy_us, dram_bytes=dram)
    klass = classify(kernel, thresholds, build) if kernel is not None else None
    report = ProfileReport(trial_id=trial.id, candidate_id=trial.candidate_id, workload_id=trial.workload_id,
                           kernel=kernel, classification=klass, roofline=roof, build=build,
                           hypotheses=list(hypotheses or []), cites=list(cites or []), artifact=artifact,
                           command=list(command or []), notes=notes)
    note = cross_check(report)
    if note is not None:
        report = report.model_copy(update={"notes": [*report.notes, note]})
    if report.hypotheses and parent is not None:
        outcomes = evaluate_hypotheses(report.hypotheses, parent, observations(report, m), noise)
        report = report.model_copy(update={"outcomes": outcomes})
    return ProfileReport.model_validate(report.model_dump())


def profile_trial(archive, run_dir: str | Path, trial: Trial, *, op_dir: str | Path, source_file: str | Path,
                  config: dict, workload: Workload, spec: OpSpec, seed: int, kernel_regex: str | None = None,
                  build: BuildResources | None = None, ceilings: Ceilings | None = None,
                  copy_us: float | None = None, hypotheses: list[Hypothesis] | None = None,
                  parent: dict[str, Observation] | None = None, cites: list[str] | None = None,
                  timeout_s: float = 600.0) -> ProfileReport:
    """Profile one trial's candidate with ncu (GPU), keep the .ncu-rep, archive the report, return it."""
    from .ncu import NcuOptions, harness_job, profile_candidate
    run_dir = Path(run_dir)
    work = run_dir / "profiles" / trial.id
    job = harness_job(op_dir, source_file, config, workload.model_dump_json(), seed)
    result = profile_candidate(job, work, NcuOptions(kernel_regex=kernel_regex, timeout_s=timeout_s))
    artifact = ""
    if result.run.report is not None and result.run.report.exists():
        kept = run_dir / "profiles" / f"{trial.id}.ncu-rep"
        shutil.copyfile(result.run.report, kept)
        artifact = str(kept.relative_to(run_dir))
    report = make_report(trial, spec, workload, kernel=result.kernel, build=build, ceilings=ceilings,
                         copy_us=copy_us, hypotheses=hypotheses, parent=parent, cites=cites, artifact=artifact,
                         command=result.run.command, notes=result.notes)
    archive.put_profile(trial.run_id, trial.id, report)
    return report


__all__ = ["cross_check", "make_report", "profile_trial", "roofline_for"]
