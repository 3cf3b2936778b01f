"""What a timing reply must agree with before any of its numbers count: evidence the controller holds itself.

A `Benched` reply comes from a process that ran candidate code, which can write its own reply onto the worker's
connection (core/execute/protocol.py). Its numbers are accepted only when they are consistent with what the controller
asked and observed (`timing_evidence`; each failed check is REJECTED, the message naming it):

- `timing-subjects`: samples of exactly the subjects asked for (a baseline may instead be noted unavailable; a
  candidate kind may not);
- `timing-samples`: `policy.samples` samples per subject, each finite and positive;
- `timing-wall-clock`: every timed call lies inside the interval the controller measured from sending the request
  to reading its reply, so the reported times of all subjects together cannot exceed it;
- `timing-physical-floor`: no sample of a candidate kind is shorter than the bytes the op must move
  (`OpSpec.bytes_moved`) at `FLOOR_BANDWIDTH`, more than any memory system moves;
- `timing-snapshots`: every re-verified timed call the controller asked for is there -- the near-duplicate calls
  and the last one, each with the seeds of its inputs -- so timed outputs are re-verified from the arena the
  controller reads (core/execute/timed.py `check_timed`), never skipped because a reply left them out;
- `timing-guards`: the guarded backings of every output set and workspace the candidate kinds' timed calls wrote
  (core/execute/timing.py `timed_sets` says how many) are there, so the controller checks every guard zone of the timed
  calls (core/execute/timed.py), never fewer because a reply left some out.

What this does not give: a worker can still report a time between the physical floor and the wall clock for a
kernel whose re-verified outputs are right. Fresh-process confirmation (tune/select/confirm.py) re-times winners, by
another worker of the same kind.
"""

from __future__ import annotations

import math

from ...base.records import Status, Verdict
from . import protocol as P
from .timing import CANDIDATE_KINDS, snapshot_plan, timed_sets

FLOOR_BANDWIDTH = 50e12       # bytes/s: above any device's memory (HBM3e ~8 TB/s) and L2 bandwidth
WALL_SLACK_SHARE = 0.02       # clock granularity of the two processes' timers
WALL_SLACK_US = 1000.0


def _rejected(check: str, message: str) -> Verdict:
    return Verdict(status=Status.REJECTED, message=f"{check}: {message}")


def _subjects(msg: P.BenchRequest, got: P.Benched) -> Verdict | None:
    extra = sorted(set(got.samples) - set(msg.subjects))
    if extra:
        return _rejected("timing-subjects", f"the reply has samples of subjects never asked for: {extra}")
    missing = [n for n in msg.subjects if n not in got.samples and (n in CANDIDATE_KINDS or n not in got.notes)]
    if missing:
        return _rejected("timing-subjects", f"the reply has no samples of {missing}")
    return None


def _samples(msg: P.BenchRequest, got: P.Benched) -> Verdict | None:
    n = msg.policy.samples
    for name, s in got.samples.items():
        if len(s.kernel_us) != n or len(s.call_us) != n:
            return _rejected("timing-samples", f"{name}: {len(s.kernel_us)} kernel and {len(s.call_us)} call "
                                               f"samples where the policy takes {n}")
        bad = [x for x in (*s.kernel_us, *s.call_us) if not math.isfinite(x) or x <= 0]
        if bad:
            return _rejected("timing-samples", f"{name}: samples that are no duration ({bad[:3]})")
    return None


def timed_us(msg: P.BenchRequest, got: P.Benched) -> float:
    """The time every timed call of the reply took together, as the reply states it (µs): the CUDA timer makes a
    kernel-time call and a call-time call per sample, the wall clock one call whose two numbers are the same."""
    both = msg.policy.calls_per_sample > 1
    return sum(sum(s.kernel_us) + (sum(s.call_us) if both else 0.0) for s in got.samples.values())


def _wall_clock(msg: P.BenchRequest, got: P.Benched, seconds: float) -> Verdict | None:
    wall_us = seconds * 1e6
    stated = timed_us(msg, got)
    if stated > wall_us * (1 + WALL_SLACK_SHARE) + WALL_SLACK_US:
        return _rejected("timing-wall-clock", f"the reply states {stated:.0f} µs of timed calls, but the controller "
                                              f"saw the whole request take {wall_us:.0f} µs")
    return None


def _floor(msg: P.BenchRequest, got: P.Benched) -> Verdict | None:
    if msg.bytes_moved <= 0:
        return None
    floor_us = msg.bytes_moved / FLOOR_BANDWIDTH * 1e6
    for name, s in got.samples.items():
        if name in CANDIDATE_KINDS and min(s.kernel_us, default=floor_us) < floor_us:
            return _rejected("timing-physical-floor", (
                f"{name}: a sample of {min(s.kernel_us):.4g} µs, below the {floor_us:.4g} µs that moving "
                f"{msg.bytes_moved:.0f} bytes takes at {FLOOR_BANDWIDTH / 1e12:.0f} TB/s"))
    return None


def _snapshots(msg: P.BenchRequest, got: P.Benched) -> Verdict | None:
    if msg.snapshots <= 0 or not msg.job_dir or not msg.fresh_inputs or "candidate" not in msg.subjects:
        return None
    policy = msg.policy
    calls = policy.calls_per_sample * policy.samples
    want_near = len(snapshot_plan(policy, msg.snapshots)["near"])
    shots = got.snapshots
    seen = [s.call for s in shots]
    if len(set(seen)) != len(seen) or any(s.seed is None or s.call < 1 for s in shots):
        return _rejected("timing-snapshots", f"snapshots of repeated calls or without their inputs' seeds: {seen}")
    near = [s for s in shots if s.perturb is not None and 2 <= s.call < calls]
    last = [s for s in shots if s.perturb is None and s.call >= calls]
    if len(near) < want_near or not last:
        return _rejected("timing-snapshots", (
            f"the controller asked for {want_near} near-duplicate timed calls and the last one to re-verify; the "
            f"reply has {len(near)} and {'the last' if last else 'no last call'} (calls {seen})"))
    return None


def _guards(msg: P.BenchRequest, got: P.Benched) -> Verdict | None:
    if not msg.job_dir or not any(n in CANDIDATE_KINDS for n in msg.subjects):
        return None
    want = timed_sets(msg.subjects, msg.policy.output_sets)
    sets = got.guards
    if len(sets) != want:
        return _rejected("timing-guards", (
            f"the controller expects the guarded backings of {want} timed output set(s) and their workspaces; the "
            f"reply has {len(sets)}"))
    if any(not s.outputs for s in sets) or len({len(s.outputs) for s in sets}) > 1 \
            or len({s.scratch is None for s in sets}) > 1:
        return _rejected("timing-guards", "timed output sets whose outputs or workspaces differ in number: "
                                          f"{[(len(s.outputs), s.scratch is not None) for s in sets]}")
    return None


def timing_evidence(msg: P.BenchRequest | None, got: P.Benched, seconds: float) -> Verdict | None:
    """REJECTED naming the first check a timing reply fails (see the module's docstring), None when it passes all.
    `msg`: the request as sent (None: a reply not from a worker, nothing to hold it against); `seconds`: the
    controller's own measure of the request, from sending it to reading the reply."""
    if msg is None or not isinstance(msg, P.BenchRequest) or not isinstance(got, P.Benched):
        return None
    for check in (_subjects, _samples):
        v = check(msg, got)
        if v is not None:
            return v
    return _wall_clock(msg, got, seconds) or _floor(msg, got) or _snapshots(msg, got) or _guards(msg, got)


__all__ = ["FLOOR_BANDWIDTH", "timed_us", "timing_evidence"]
