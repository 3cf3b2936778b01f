"""`kernelloop reproduce`: an archived winner (or any passed trial) re-measured cold in a fresh worker process, and
whether the new median lies inside the interval stated with the recorded one (docs/timing.md).

What is re-measured: the candidate's archived source and configuration on the trial's workload, with the recorded
timing policy and the recorded subjects (a confirmed winner beside its confirmation's baselines; a plain trial beside
eager and copy, as in the search), in a worker started for it alone, on the device kind the run was measured on (a
CUDA run on the same GPU model; anything else is refused). The timed calls are re-verified as in the loop.
"""

from __future__ import annotations

import secrets
import tempfile
from pathlib import Path
from typing import Callable

from ...base.records import Candidate, Measurement, Status, Trial, Workload
from ...base.records.confirm import Reproduction
from ...base.records.device import Device, DeviceKind

__all__ = ["ReproduceError", "Target", "reproduce", "targets"]

SEARCH_SUBJECTS = ["candidate", "eager", "copy"]


class ReproduceError(Exception):
    """A refusal: the run, the trial or the device is not what a reproduction needs (the message says which)."""


class Target:
    """One trial to reproduce, with the figure and interval recorded for it."""

    def __init__(self, trial: Trial, candidate: Candidate, workload: Workload, source: str, recorded_us: float,
                 interval_us: tuple[float, float], measurement: Measurement, subjects: list[str]):
        self.trial, self.candidate, self.workload = trial, candidate, workload
        self.source, self.recorded_us, self.interval_us = source, recorded_us, interval_us
        self.measurement, self.subjects = measurement, subjects


def targets(archive, trial: str | None = None) -> tuple[dict, list[Target]]:
    """(the run, what to reproduce): `trial` (an id or a unique prefix) or, without it, every confirmed winner."""
    runs = archive.runs()
    if not runs:
        raise ReproduceError("the archive holds no run")
    run = runs[0]
    rid = run["id"]
    trials = archive.trials(rid)
    finals = archive.finals(rid)
    confirmations = archive.confirmations(rid)
    if trial is None:
        chosen = [t for t in trials if t.workload_id in finals and finals[t.workload_id][0] == t.candidate_id
                  and t.verdict.status is Status.PASSED]
        if not chosen:
            raise ReproduceError(f"run {rid} has no confirmed winner; name a passed trial (kernelloop show --json "
                                 f"lists them)")
    else:
        chosen = [t for t in trials if t.id == trial] or [t for t in trials if t.id.startswith(trial)]
        if not chosen:
            raise ReproduceError(f"run {rid} has no trial {trial!r}")
        if len(chosen) > 1:
            raise ReproduceError(f"{trial!r} names {len(chosen)} trials of run {rid}; give more of the id")
        if chosen[0].verdict.status is not Status.PASSED or chosen[0].measurement is None:
            t = chosen[0]
            raise ReproduceError(f"trial {t.id} did not pass ({t.verdict.status.value}): only a passed, measured "
                                 f"trial has a figure to reproduce")
    out = []
    for t in chosen:
        cand, w = archive.get_candidate(t.candidate_id), archive.get_workload(t.workload_id)
        conf = confirmations.get(t.workload_id)
        final = finals.get(t.workload_id)
        if conf is not None and conf.candidate_id == t.candidate_id and final is not None:
            subjects = ["candidate", *[s for s in conf.processes[0].kernel_us if s != "candidate"]]
            out.append(Target(t, cand, w, "confirmation", conf.kernel_us, tuple(conf.interval_us), final[1],
                              subjects))
        else:
            m = t.measurement
            out.append(Target(t, cand, w, "trial", m.kernel.median_us, (m.kernel.ci_low_us, m.kernel.ci_high_us), m,
                              SEARCH_SUBJECTS))
    return run, out


def check_device(run: dict) -> str:  # the device's text
    """The device to measure on: the run's; refused when this machine has another kind."""
    env = run.get("environment") or {}
    device = Device.of(env.get("device") or run["options"].get("device") or "interpret")
    if not device.is_cuda:
        return DeviceKind.INTERPRET.value
    import torch
    if not torch.cuda.is_available():
        raise ReproduceError(f"run {run['id']} was measured on CUDA ({env.get('gpu') or 'a GPU'}); this machine has no "
                             f"CUDA device")
    here = torch.cuda.get_device_name(0)
    if env.get("gpu") and env["gpu"] != here:
        raise ReproduceError(f"run {run['id']} was measured on {env['gpu']}; this machine's GPU is {here}")
    return DeviceKind.CUDA.value


def _measure(bundle, device: str, target: Target, work: Path) -> Measurement:
    """The candidate's kernel time in a fresh worker, beside the recorded subjects, its timed calls re-verified."""
    from ...core.execute.evaluate import Evaluator
    from ...core.execute.pool import Worker
    worker = Worker(device, work / "worker")
    try:
        ev = Evaluator(bundle, device, worker, target.measurement.policy, secret=secrets.token_hex(16), checks=1)
        loaded = ev.load(target.candidate)
        if loaded is not None:
            raise ReproduceError(f"the candidate no longer loads: {getattr(loaded, 'message', '') or loaded}")
        job = worker.work_dir / "job"   # inside the worker's folder: writable in its read-only view
        job.mkdir(parents=True, exist_ok=True)
        ms, _, reply = ev.bench(target.candidate, target.workload, target.subjects, target.measurement.policy, job)
        if reply.status != "ok":
            raise ReproduceError(f"the re-measurement failed: {reply.status}: {reply.error}"[:500])
        bad = ev.check_timed(target.workload, reply)
        if bad is not None:
            raise ReproduceError(f"the re-measured timed calls failed verification: {bad.status.value}: {bad.message}")
        return ms["candidate"]
    finally:
        worker.close()


def reproduce(archive, bundle_of: Callable[[str], object], trial: str | None = None,
              measure: Callable[..., Measurement] | None = None) -> list[Reproduction]:
    """Re-measure and compare; `bundle_of(op name)` loads the run's op; raises ReproduceError on a refusal."""
    run, chosen = targets(archive, trial)
    device = check_device(run)
    bundle = bundle_of(run["op"])
    measure = measure or _measure
    out = []
    for target in chosen:
        with tempfile.TemporaryDirectory(prefix="kernelloop-reproduce-") as tmp:
            m = measure(bundle, device, target, Path(tmp))
        lo, hi = target.interval_us
        out.append(Reproduction(
            run=run["id"], trial=target.trial.id, candidate=target.candidate.id, workload=target.workload.label,
            device=device, source=target.source, recorded_us=target.recorded_us, interval_us=(lo, hi),
            measured_us=m.kernel.median_us, measured_ci_us=(m.kernel.ci_low_us, m.kernel.ci_high_us),
            policy=m.policy.name, reproduced=lo <= m.kernel.median_us <= hi))
    return out
