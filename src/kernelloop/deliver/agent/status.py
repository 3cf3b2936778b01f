"""`kernelloop agent status`: the workspace's run as an agent needs it: front, best, counts, recent submissions.
The answer is a `WorkspaceStatus` record (deliver/agent/status_records.py); its JSON (`as_json`) is what the CLI
prints and the MCP tool `status` returns."""

from __future__ import annotations

from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from ...core.archive import Archive
from ...base.records import Status, Trial
from ...base.records.summary import MeasurementSummary
from ...core.verify.explain import failures_by_trial, proposer_verdict
from ...base.records.device import Device
from .status_records import (BaselineFile, BaselineTimes, BestTrial, ConfirmedBest, FrontCandidate, Measured,
                             NotMeasured, RecentTrial, WorkloadStatus, WorkspaceStatus)
from .workspace import Workspace, WorkspaceError

NOTHING_YET = "nothing submitted yet"


def read_baseline(ws: Workspace) -> NotMeasured | Measured:
    """The workspace's baseline.json as its record (`not measured` when the file is missing; WorkspaceError when it
    holds another shape)."""
    path = ws.root / "baseline.json"
    if not path.is_file():
        return NotMeasured(status="not measured", note="the workspace has no baseline.json")
    try:
        return TypeAdapter(BaselineFile).validate_json(path.read_text())
    except ValidationError as e:
        raise WorkspaceError(f"{path} does not hold the figures `agent init` writes: {e}") from None


def workspace_status(workspace: str | Path, device: str | None = None, recent: int = 10) -> WorkspaceStatus:
    """The status: per workload the Pareto front (with labels and lineage), the best trial (configuration, kernel
    and call time, roofline fraction, speed-ups) and, after `submit --confirm`, the best re-measured beside every
    baseline; trial counts by verdict; the most recent submissions with their verdicts; the baseline figures."""
    ws = Workspace.load(workspace)
    device = device or ws.device
    db = ws.run_dir(device) / "archive.sqlite"
    head = dict(workspace=str(ws.root), op=ws.data["op"], device=device, interpreter=not Device.of(device).is_cuda,
                baseline=read_baseline(ws))
    if not db.is_file():
        return WorkspaceStatus(**head, run=None, counts={}, recent=[], note=NOTHING_YET,
                               workloads=[WorkloadStatus(id=w.id, label=w.label, front=[]) for w in ws.workloads])
    with Archive(db, readonly=True) as archive:
        runs = archive.runs()
        if not runs:
            return WorkspaceStatus(**head, run=None, counts={}, recent=[], note=NOTHING_YET, workloads=[])
        run_id = runs[0]["id"]
        trials = archive.trials(run_id)
        cands = _Candidates(archive)
        workloads = [_workload(archive, run_id, w, trials, cands) for w in ws.workloads]
        # rows edited after the controller recorded them are TAMPERED (core/archive/integrity.py): never PASSED or best
        return WorkspaceStatus(**head, run=run_id, counts=archive.count(run_id), workloads=workloads,
                               recent=_recent(archive, run_id, ws, trials[-recent:][::-1], cands),
                               integrity=archive.integrity(run_id))


class _Candidates:
    """The archive's candidates by id, each read once."""

    def __init__(self, archive: Archive):
        self.archive, self.seen = archive, {}

    def __call__(self, cid: str):
        if cid not in self.seen:
            self.seen[cid] = self.archive.get_candidate(cid)
        return self.seen[cid]


def _workload(archive: Archive, run_id: str, w, trials: list[Trial], cand: _Candidates) -> WorkloadStatus:
    """One workload's front, trial counts, best PASSED trial and (after `submit --confirm`) confirmed best."""
    front = []
    for cid, obj in archive.front(run_id, w.id):
        c = cand(cid)
        front.append(FrontCandidate(candidate=cid, label=c.label if c else "", proposer=c.proposer if c else "",
                                    parent_ids=c.parent_ids if c else [], hypothesis=c.hypothesis if c else "",
                                    **obj))
    passed = [t for t in trials if t.workload_id == w.id and t.verdict.status is Status.PASSED
              and t.measurement is not None]
    best = min(passed, key=lambda t: t.measurement.kernel.median_us) if passed else None
    bc = cand(best.candidate_id) if best else None
    entry = dict(id=w.id, label=w.label, trials=sum(1 for t in trials if t.workload_id == w.id), passed=len(passed),
                 front=front, best=BestTrial(candidate=best.candidate_id, label=bc.label if bc else "",
                                             config=bc.config if bc else {}, **_figures(best.measurement))
                 if best else None)
    finals = archive.finals(run_id)
    if w.id in finals:   # `submit --confirm`: the best re-measured beside every baseline
        cid, m = finals[w.id]
        entry["confirmed"] = ConfirmedBest(candidate=cid, **_figures(m), baselines={
            name: (BaselineTimes(kernel_us=bm.kernel.median_us, call_us=bm.call.median_us) if bm
                   else BaselineTimes(note=note))
            for name, (bm, note) in archive.baselines(run_id, w.id).items()})
    return WorkloadStatus(**entry)


def _figures(m) -> dict:
    """Kernel and call medians with intervals, bandwidth, roofline_fraction (of the device copy's speed), speed-ups
    over the baselines: the figures of `show --json` (MeasurementSummary), as fields of a record that extends it."""
    return dict(MeasurementSummary.of(m))


def _recent(archive: Archive, run_id: str, ws: Workspace, trials: list[Trial], cand: _Candidates) -> list[RecentTrial]:
    """The given trials' verdicts, as a proposer may see them."""
    failures = failures_by_trial(archive, run_id)
    by_id = {w.id: w for w in ws.workloads}
    out = []
    for t in trials:
        c = cand(t.candidate_id)
        w = by_id.get(t.workload_id) or archive.get_workload(t.workload_id)
        # what a proposer may see: nothing of a held-out case but its class (kernelloop.core.verify.explain)
        v = proposer_verdict(t.verdict, w, failures.get(t.id)) if w is not None else t.verdict
        out.append(RecentTrial(trial=t.id, index=t.index, candidate=t.candidate_id, workload_id=t.workload_id,
                               status=v.status, message=v.message[:200], proposer=c.proposer if c else "",
                               kernel_us=t.measurement.kernel.median_us if t.measurement else None))
    return out


__all__ = ["read_baseline", "workspace_status"]
