"""`kernelloop agent status`: the workspace's run as an agent needs it: front, best, counts, recent submissions."""

from __future__ import annotations

import json
from pathlib import Path

from ...core.archive import Archive
from ...base.records import Status
from ...core.verify.explain import failures_by_trial, proposer_verdict
from ...base.records.device import Device
from .workspace import Workspace


def _figures(m) -> dict:
    """Kernel and call medians with intervals, bandwidth, roofline_fraction (of the device copy's speed), speed-ups
    over the baselines: the figures and names of `show --json` (kernelloop.base.records.summary.MeasurementSummary)."""
    from ...base.records.summary import MeasurementSummary
    return MeasurementSummary.of(m).model_dump(mode="json")


def workspace_status(workspace: str | Path, device: str | None = None, recent: int = 10) -> dict:
    """JSON-able status: per workload the Pareto front (with labels and lineage), the best trial (configuration,
    kernel and call time, roofline fraction, speed-ups) and, after `submit --confirm`, the best re-measured beside
    every baseline; trial counts by verdict; the most recent submissions with their verdicts; the baseline
    figures."""
    ws = Workspace.load(workspace)
    device = device or ws.device
    db = ws.run_dir(device) / "archive.sqlite"
    baseline = json.loads((ws.root / "baseline.json").read_text()) if (ws.root / "baseline.json").is_file() else {}
    out = {"workspace": str(ws.root), "op": ws.data["op"], "device": device, "interpreter": not Device.of(device).is_cuda,
           "baseline": baseline, "run": None, "counts": {}, "workloads": [], "recent": []}
    if not db.is_file():
        out["note"] = "nothing submitted yet"
        out["workloads"] = [{"id": w.id, "label": w.label, "front": []} for w in ws.workloads]
        return out
    with Archive(db, readonly=True) as archive:
        runs = archive.runs()
        if not runs:
            out["note"] = "nothing submitted yet"
            return out
        run_id = runs[0]["id"]
        out["run"] = run_id
        # rows edited after the controller recorded them are TAMPERED (core/archive/integrity.py): never PASSED or best
        out["integrity"] = archive.integrity(run_id).model_dump(mode="json")
        out["counts"] = archive.count(run_id)
        trials = archive.trials(run_id)
        finals = archive.finals(run_id)
        cands = {}

        def cand(cid):
            if cid not in cands:
                cands[cid] = archive.get_candidate(cid)
            return cands[cid]

        for w in ws.workloads:
            front = []
            for cid, obj in archive.front(run_id, w.id):
                c = cand(cid)
                front.append({"candidate": cid, "label": c.label if c else "", "proposer": c.proposer if c else "",
                              "parent_ids": c.parent_ids if c else [], "hypothesis": c.hypothesis if c else "",
                              **obj})
            passed = [t for t in trials if t.workload_id == w.id and t.verdict.status is Status.PASSED
                      and t.measurement is not None]
            best = min(passed, key=lambda t: t.measurement.kernel.median_us) if passed else None
            bc = cand(best.candidate_id) if best else None
            entry = {
                "id": w.id, "label": w.label, "trials": sum(1 for t in trials if t.workload_id == w.id),
                "passed": len(passed), "front": front,
                "best": {"candidate": best.candidate_id, "label": bc.label if bc else "",
                         "config": bc.config if bc else {}, **_figures(best.measurement)} if best else None}
            if w.id in finals:   # `submit --confirm`: the best re-measured beside every baseline
                cid, m = finals[w.id]
                entry["confirmed"] = {"candidate": cid, **_figures(m), "baselines": {
                    name: ({"kernel_us": bm.kernel.median_us, "call_us": bm.call.median_us} if bm else {"note": note})
                    for name, (bm, note) in archive.baselines(run_id, w.id).items()}}
            out["workloads"].append(entry)
        failures = failures_by_trial(archive, run_id)
        by_id = {w.id: w for w in ws.workloads}
        for t in trials[-recent:][::-1]:
            c = cand(t.candidate_id)
            w = by_id.get(t.workload_id) or archive.get_workload(t.workload_id)
            # what a proposer may see: nothing of a held-out case but its class (kernelloop.core.verify.explain)
            v = proposer_verdict(t.verdict, w, failures.get(t.id)) if w is not None else t.verdict
            out["recent"].append({"trial": t.id, "index": t.index, "candidate": t.candidate_id,
                                  "workload_id": t.workload_id, "status": v.status.value,
                                  "message": v.message[:200], "proposer": c.proposer if c else "",
                                  "kernel_us": t.measurement.kernel.median_us if t.measurement else None})
    return out


__all__ = ["workspace_status"]
