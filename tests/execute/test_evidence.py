"""Timing replies against the controller's own evidence (core/execute/evidence.py): each check catches a reply that an
unchecked controller would have timed with, and an honest-looking reply passes."""

import pytest

from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
from kernelloop.core.execute import protocol as P
from kernelloop.core.execute.evidence import FLOOR_BANDWIDTH, timing_evidence
from kernelloop.base.records import Status, Workload

W = Workload(op="layernorm", axes={"M": 8, "N": 256}, dtype="fp32")
POLICY = INTERPRETER_WALLCLOCK.model_copy(update={"samples": 5})


def _request(**kw) -> P.BenchRequest:
    args = dict(spec="{}", workload=W, policy=POLICY, subjects=["candidate", "eager", "copy"], seed=1,
                source_hash="h", bytes_moved=16384.0, fresh_inputs=True, snapshots=3, job_dir="/tmp/job", seq=9)
    return P.BenchRequest(**{**args, **kw})


def _shots(near=(2, 3, 4), last=(5,)):
    return [P.Snapshot(call=c, seed=c, perturb=1, outputs=[]) for c in near] + \
        [P.Snapshot(call=c, seed=c, perturb=None, outputs=[]) for c in last]


def _set(outputs=1, scratch=False) -> P.TimedBuffers:
    t = P.SharedTensor(arena="/tmp/job/timed.arena", dtype="uint8", shape=[3072], stride=[1])
    return P.TimedBuffers(outputs=[t] * outputs, scratch=t if scratch else None)


def _reply(us=None, shots=None, guards=None, **kw) -> P.Benched:
    us = us or {"candidate": 50.0, "eager": 80.0, "copy": 20.0}
    samples = {n: P.SubjectSamples(kernel_us=[t] * POLICY.samples, call_us=[t] * POLICY.samples) for n, t in us.items()}
    return P.Benched(samples=samples, threads=P.ThreadCensus(base=1, after=1),
                     snapshots=_shots() if shots is None else shots, guards=[_set()] if guards is None else guards,
                     seq=9, **kw)


def test_an_honest_looking_reply_passes():
    assert timing_evidence(_request(), _reply(), seconds=0.01) is None


@pytest.mark.parametrize("reply, seconds, check", [
    (_reply(shots=[]), 0.01, "timing-snapshots"),                                   # nothing to re-verify
    (_reply(shots=_shots(near=(2,))), 0.01, "timing-snapshots"),                     # fewer than asked
    (_reply(shots=_shots(last=())), 0.01, "timing-snapshots"),                       # no last call
    (_reply(shots=[P.Snapshot(call=5, seed=None, outputs=[]), *_shots()[:3]]), 0.01, "timing-snapshots"),
    (_reply({"candidate": 50.0, "eager": 5e5, "copy": 20.0}), 0.01, "timing-wall-clock"),   # baselines inflated
    (_reply({"candidate": 1e-6, "eager": 80.0, "copy": 20.0}), 0.01, "timing-physical-floor"),
    (_reply({"candidate": 50.0, "eager": 80.0}), 0.01, "timing-subjects"),           # a baseline left out
    (_reply({"candidate": 50.0, "eager": 80.0, "copy": 20.0, "extra": 1.0}), 0.01, "timing-subjects"),
    (_reply({"candidate": -1.0, "eager": 80.0, "copy": 20.0}), 0.01, "timing-samples"),
    (_reply(guards=[]), 0.01, "timing-guards"),                                       # the timed buffers left out
    (_reply(guards=[_set(), _set()]), 0.01, "timing-guards"),                         # more sets than were written
    (_reply(guards=[_set(outputs=0)]), 0.01, "timing-guards"),                        # a set without its outputs
])
def test_a_reply_the_controller_cannot_hold_to_its_evidence_is_rejected(reply, seconds, check):
    v = timing_evidence(_request(), reply, seconds)
    assert v is not None and v.status is Status.REJECTED and v.message.startswith(check + ": "), v


def test_a_baseline_noted_unavailable_is_no_gap_but_the_candidate_must_be_timed():
    noted = _reply({"candidate": 50.0, "eager": 80.0}, notes={"copy": "unavailable: no"})
    assert timing_evidence(_request(), noted, 0.01) is None
    no_candidate = _reply({"eager": 80.0, "copy": 20.0}, notes={"candidate": "unavailable"})
    assert timing_evidence(_request(), no_candidate, 0.01).message.startswith("timing-subjects")


def test_every_rotating_output_set_and_workspace_must_come_back():
    three = _request(policy=POLICY.model_copy(update={"output_sets": 3}))
    assert timing_evidence(three, _reply(guards=[_set(scratch=True)] * 3), 0.01) is None
    assert timing_evidence(three, _reply(guards=[_set(scratch=True)] * 2), 0.01).message.startswith("timing-guards")
    mixed = [_set(scratch=True), _set(), _set(scratch=True)]
    assert timing_evidence(three, _reply(guards=mixed), 0.01).message.startswith("timing-guards")
    # one output set: the candidate's (shared by candidate-same) and the twin's own
    aa = _request(subjects=["candidate", "candidate-same", "candidate-twin"])
    us = {"candidate": 50.0, "candidate-same": 50.0, "candidate-twin": 50.0}
    assert timing_evidence(aa, _reply(us, guards=[_set(), _set()]), 0.01) is None
    assert timing_evidence(aa, _reply(us, guards=[_set()]), 0.01).message.startswith("timing-guards")
    # baselines only, or no folder to share through: nothing to hold
    assert timing_evidence(_request(subjects=["eager"], snapshots=0), _reply({"eager": 80.0}, guards=[]), 0.01) \
        is None


def test_sample_counts_follow_the_policy():
    short = P.Benched(samples={"candidate": P.SubjectSamples(kernel_us=[1.0] * 3, call_us=[1.0] * 3)},
                      threads=P.ThreadCensus(base=1, after=1), snapshots=_shots())
    assert timing_evidence(_request(subjects=["candidate"]), short, 0.01).message.startswith("timing-samples")


def test_the_floor_is_the_bytes_at_a_bandwidth_no_device_has():
    floor_us = 16384.0 / FLOOR_BANDWIDTH * 1e6
    assert timing_evidence(_request(), _reply({"candidate": floor_us * 1.01, "eager": 80.0, "copy": 20.0}), 0.01) \
        is None
