"""Confirmation of a winner in several fresh worker processes, and the interval it states (docs/timing.md).

A bootstrap interval from one process describes the samples of that process only: on the H200 two runs of the same
kernel in two processes differed by 2-3 % while each one's interval was +-0.1 %. So the winner and its baselines are
measured again in `CONFIRM_PROCESSES` fresh workers (the worker is killed and restarted before each), and the stated
interval is widened to cover what moved between them:

    within     = the widest relative half-width of the candidate's per-process bootstrap intervals
    spread     = (max - min) / median of the candidate's per-process medians
    half_width = max(within, spread)
    interval   = median of the per-process medians x (1 - half_width, 1 + half_width), never below 0

Every process's median lies inside it (each is within `spread` of the median of medians; the bounds are also
stretched to the extreme medians, so rounding at the edge cannot leave one out). Speed-ups over each
baseline get the same rule on the per-process speed-ups and their paired intervals, and their verdict is taken on
the widened interval (FASTER/SLOWER only when it excludes 1 +- the policy's margin).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Callable

from ...core.bench.stats import verdict_for
from ...base.records import Candidate, Measurement, Verdict, Workload
from ...base.records.confirm import CrossProcessConfirmation, ProcessRun, StatedSpeedup
from ...base.records.events import ThreadCensusEvent, ThreadCensusPayload

CONFIRM_PROCESSES = 2

__all__ = ["CONFIRM_PROCESSES", "ConfirmFailure", "attribute_thread", "confirm_across_processes", "stated",
           "timed_check"]


class ConfirmFailure(Exception):
    """A process of the confirmation could not measure, or its timed calls failed their re-verification."""

    def __init__(self, process: int, status: str, error: str):
        super().__init__(f"process {process}: {status}: {error}")
        self.process, self.status, self.error = process, status, error


def _rel_half(median: float, lo: float, hi: float) -> float:
    return max(median - lo, hi - median) / median if median > 0 else 0.0


def _spread(values: list[float]) -> float:
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid > 0 else 0.0


def _widen(values: list[float], cis: list[tuple[float, float]]) -> tuple[float, float, float, float]:
    """(median of values, within, spread, half_width) by the module's rule."""
    mid = statistics.median(values)
    within = max(_rel_half(v, lo, hi) for v, (lo, hi) in zip(values, cis))
    spread = _spread(values)
    return mid, within, spread, max(within, spread)


def stated(workload_id: str, candidate_id: str, runs: list[dict[str, Measurement]], pids: list[int | None],
           margin: float) -> CrossProcessConfirmation:
    """The confirmation record of per-process measurements (`runs[k]`: subject name -> Measurement; the winner is
    "candidate")."""
    subjects = [s for s in runs[0] if all(s in r for r in runs)]
    processes = []
    for k, r in enumerate(runs):
        cand = r["candidate"]
        processes.append(ProcessRun(
            index=k, pid=pids[k] if k < len(pids) else None,
            kernel_us={s: r[s].kernel.median_us for s in subjects},
            ci_us={s: (r[s].kernel.ci_low_us, r[s].kernel.ci_high_us) for s in subjects},
            speedups={q.baseline: q.speedup for q in cand.ratios},
            speedup_ci={q.baseline: (q.ci_low, q.ci_high) for q in cand.ratios}))
    medians = [p.kernel_us["candidate"] for p in processes]
    mid, within, _, half = _widen(medians, [p.ci_us["candidate"] for p in processes])
    speedups = {}
    for b in processes[0].speedups:
        if not all(b in p.speedups for p in processes):
            continue
        s_mid, _, _, s_half = _widen([p.speedups[b] for p in processes], [p.speedup_ci[b] for p in processes])
        per = [p.speedups[b] for p in processes]
        lo, hi = max(0.0, min(s_mid * (1 - s_half), *per)), max(s_mid * (1 + s_half), *per)
        speedups[b] = StatedSpeedup(speedup=s_mid, interval=(lo, hi), verdict=verdict_for(lo, hi, margin))
    return CrossProcessConfirmation(
        workload_id=workload_id, candidate_id=candidate_id, policy=runs[0]["candidate"].policy.name,
        processes=processes, spread={s: _spread([p.kernel_us[s] for p in processes]) for s in subjects},
        within=within, half_width=half, kernel_us=mid,
        interval_us=(max(0.0, min(mid * (1 - half), *medians)), max(mid * (1 + half), *medians)),
        speedups=speedups)


def confirm_across_processes(evaluator, candidate: Candidate, workload: Workload, subjects: list[str], policy,
                             job_root: Path, check: Callable[[object, Path], Verdict | None],
                             processes: int = CONFIRM_PROCESSES
                             ) -> tuple[list[dict[str, Measurement]], dict[str, str], CrossProcessConfirmation]:
    """Measure `subjects` (the winner as "candidate", then baselines) in `processes` fresh worker processes, one
    after another; `check(reply, job_dir)` re-verifies each process's timed calls (None when they passed). Returns
    every process's measurements, the first process's notes and the confirmation record; raises ConfirmFailure."""
    runs, pids, notes = [], [], {}
    for k in range(processes):
        evaluator.worker.kill()          # a fresh process: nothing of the search's (or the previous) process stays
        loaded = evaluator.load(candidate)
        if loaded is not None:
            raise ConfirmFailure(k, "load", str(getattr(loaded, "message", "") or getattr(loaded, "log", ""))[:500])
        job_dir = job_root / f"process-{k}"
        job_dir.mkdir(parents=True, exist_ok=True)
        ms, these_notes, reply = evaluator.bench(candidate, workload, subjects, policy, job_dir)
        if reply.status != "ok":
            raise ConfirmFailure(k, reply.status, reply.error)
        bad = check(reply, job_dir)
        if bad is not None:
            raise ConfirmFailure(k, "ok", f"{bad.status.value}: {bad.message}")
        runs.append(ms)
        pids.append(getattr(getattr(evaluator.worker, "proc", None), "pid", None))
        notes = notes or these_notes
    return runs, notes, stated(workload.id, candidate.id, runs, pids, policy.margin)


def attribute_thread(archive, evaluator, run_id: str, cand: Candidate, w: Workload, bad: Verdict, job_dir: Path
                     ) -> Verdict | None:
    """A thread appeared during a confirmation that ran library baselines (torch.compile's and vendor
    libraries' runtimes start pools lazily, sometimes seconds after their first call). The winner already passed
    the thread census alone in its search trial; census it alone again, now in this process with the libraries
    loaded: if it leaves no thread the thread is the libraries' (archived as an event with its name) and the
    confirmation stands; if it leaves one, the confirmation fails as before."""
    census = job_dir / "census"
    census.mkdir(parents=True, exist_ok=True)
    _, _, reply = evaluator.bench(cand, w, ["candidate", "eager", "copy"], evaluator.policy, census,
                                  settle_threads=True)
    again = evaluator.check_timed(w, reply, evaluator.refresh_seeds(cand, w)) if reply.status == "ok" else \
        evaluator.failure_verdict(reply, "thread census")
    archive.log_event(run_id, ThreadCensusEvent(payload=ThreadCensusPayload(
        workload=w.id, candidate=cand.id, confirm_verdict=bad.message, threads=bad.log,
        alone="PASSED" if again is None else f"{again.status.value}: {again.message}",
        attributed_to="baselines" if again is None else "candidate")))
    return again


def timed_check(archive, evaluator, run_id: str, cand: Candidate, w: Workload, libraries: bool
                ) -> Callable[[object, Path], Verdict | None]:
    """The re-verification of one confirmation process's timed calls; a thread left behind while library baselines
    ran (`libraries`) is attributed by a census of the winner alone (attribute_thread)."""
    def check(reply, job_dir: Path) -> Verdict | None:
        bad = evaluator.check_timed(w, reply, evaluator.refresh_seeds(cand, w))
        if bad is not None and libraries and bad.message.startswith("thread-left-behind"):
            bad = attribute_thread(archive, evaluator, run_id, cand, w, bad, job_dir)
        return bad
    return check
