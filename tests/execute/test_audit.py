"""The batch audit's decision rule (the CUDA measurement itself runs in the gpu tier)."""

from kernelloop.core.execute.evaluate import Evaluator
from kernelloop.base.records import Status


def test_consistent_batch_passes():
    assert Evaluator.audit_verdict({"candidate": {"audit": {"batch": 20, "events_us": 1200.0, "wall_us": 1230.0}}}) is None


def test_host_bound_batch_passes():
    # 20 calls of 60 µs host time around 20 µs kernels: events and wall both see the host.
    assert Evaluator.audit_verdict({"candidate": {"audit": {"batch": 20, "events_us": 1190.0, "wall_us": 1215.0}}}) is None


def test_side_stream_work_is_rejected():
    v = Evaluator.audit_verdict({"candidate": {"audit": {"batch": 20, "events_us": 40.0, "wall_us": 4000.0}}})
    assert v.status is Status.REJECTED and "work-outside-harness-stream" in v.message


def test_no_audit_on_the_interpreter():
    assert Evaluator.audit_verdict({"candidate": {"kernel_us": [1.0]}}) is None
