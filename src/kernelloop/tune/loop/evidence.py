"""Evidence for proposers that plan from it (the rule planner): after a PASSED trial, its profile or timing report,
built and archived once, handed over before the trial is told. Profile time is logged as an `evidence` event; it is
never part of the trial's costs or kernel time."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from ...core.archive import Archive, ArchiveError
from ...base.records import Candidate, Status, Trial, Workload
from ...base.records.events import EvidenceEvent, EvidencePayload, EvidenceSourceEvent, EvidenceSourcePayload
from ...core.spec import OpBundle


def evidence_source(archive: Archive, run_id: str, proposer, given, device, profile_timeout_s: float):
    """The evidence source for `proposer` (None when it does not plan from evidence): `given`, else by device;
    archived as an `evidence-source` event."""
    if not getattr(proposer, "wants_evidence", False):
        return None
    from ..profile.evidence import default_evidence
    source = given if given is not None else default_evidence(device, profile_timeout_s)
    archive.log_event(run_id, EvidenceSourceEvent(payload=EvidenceSourcePayload(
        source=source.name, note=getattr(source, "reason", ""))))
    return source


def hand_evidence(archive: Archive, run_id: str, run_dir: Path, bundle: OpBundle, device, source, proposer,
                  w: Workload, cand: Candidate, trial: Trial, note: Callable[[str], None]) -> None:
    """The trial's report (archived, or built and archived now) handed to the proposer; `note` says what runs."""
    from ..profile.evidence import EvidenceContext, TimingEvidence, outcome_counts
    from ..profile.hypothesis import format_hypotheses
    if trial.verdict.status is not Status.PASSED or trial.measurement is None:
        return
    report = archive.profile(run_id, trial.id)
    if report is None:
        request = proposer.evidence_request(cand, w)
        run = archive.get_run(run_id)
        ctx = EvidenceContext(archive=archive, run_id=run_id, run_dir=run_dir, op_dir=bundle.folder,
                              spec=bundle.spec, device=str(device), environment=run["environment"],
                              workload=w, candidate=cand, trial=trial, request=request)
        used, error = source.name, ""
        note(f"evidence ({source.name}) for {w.label} {cand.label}")
        t0 = time.monotonic()
        try:
            report = source.collect(ctx)
        except ArchiveError:
            raise
        except Exception as e:  # noqa: BLE001 - a profiler failure is noted; the search goes on
            error = f"{type(e).__name__}: {e}"[:2000]
            used = "timing"
            report = TimingEvidence(f"{source.name} failed: {error}").collect(ctx)
        seconds = time.monotonic() - t0
        archive.log_event(run_id, EvidenceEvent(payload=EvidencePayload(
            workload=w.id, trial=trial.id, candidate=cand.id, source=used, error=error, seconds=seconds,
            profiled=report.kernel is not None,
            bottleneck=report.classification.bottleneck.value if report.classification else None,
            parent=request.parent_id, hypotheses=format_hypotheses(list(request.hypotheses)),
            outcomes=outcome_counts(report))))
    proposer.give_evidence(cand, w, report)
