"""kernelloop.tune.gate.step with a compile step in the stage (`compiled`): a schedule's checks come first (a rejected
schedule waits for no build), then `build_check` holds the compile's build to the device and the schedule's budget;
`settle` decides on a job the compile ended; a build that was not made leaves a schedule-only decision that says so."""

from types import SimpleNamespace

from kernelloop.core.build.steps import BuildJob
from kernelloop.tune.gate.step import StaticGate
from kernelloop.base.records import Candidate, Status, Workload
from kernelloop.tune.schedule.library import gluon_ws
from kernelloop.tune.schedule.lower import lower
from kernelloop.tune.schedule.patch import apply_patch
from kernelloop.core.build.aot import BuildOutcome

W = Workload(op="gemm", axes={"M": 2048, "N": 4096, "K": 4096}, dtype="fp16")
CFG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=4, EPILOGUE="none", TRANS_B=0)
CTX = SimpleNamespace(spec=None)


def job(schedule=None, source=None) -> BuildJob:
    src = source if source is not None else lower(schedule or gluon_ws())
    return BuildJob(Candidate(op="gemm", template="schedule_ws", source=src, config=dict(CFG)), W, [W])


def built(**kernel) -> BuildOutcome:
    k = {"name": "k", "shared": 100_000, "num_warps": 12, "REG": 160, "STACK": 0, "LOCAL": 0, **kernel}
    return BuildOutcome(template="schedule_ws", config=CFG, status="built", kernels=[k])


def test_a_broken_schedule_is_rejected_before_the_compile():
    gate = StaticGate(compiled=True)
    j = job(apply_patch(gluon_ws(), [{"op": "replace", "path": "/roles/1/k_step/0/parity", "value": "phase"}]))
    r = gate.run(j, CTX)
    assert r.verdict.status is Status.REJECTED and "roles[1].k_step[0].parity" in r.verdict.message
    assert j.gate_decision is None                                  # nothing waits for a build
    (d,) = gate.drain()
    assert d.checked == "schedule" and d.note == ""


def test_the_compiles_build_is_held_to_the_schedules_budget():
    gate = StaticGate(compiled=True)
    ok, spilled = job(), job()
    assert gate.run(ok, CTX).outcome == "passed" and gate.drain() == []   # decided after the compile
    ok.sm_build = built()
    assert gate.build_check.run(ok, CTX).verdict is None
    gate.run(spilled, CTX)
    spilled.sm_build = built(LOCAL=64)
    r = gate.build_check.run(spilled, CTX)
    assert r.verdict.status is Status.REJECTED and "spills" in r.verdict.message
    good, bad = gate.drain()
    assert good.passed and good.checked == "schedule and build" and good.resources.registers == 160
    assert not bad.passed and bad.first.check == "spills" and bad.first.field.startswith("roles[")


def test_a_compile_error_is_decided_in_settle_and_a_missing_build_is_said():
    gate = StaticGate(compiled=True)
    failed, lost, plain = job(), job(), job(source="import triton\n")
    for j in (failed, lost, plain):
        gate.run(j, CTX)
    failed.sm_build = BuildOutcome(template="t", config={}, status="compile_error", error="ptxas fatal")
    gate.build_check.settle(failed)                                 # the compile ended this job
    gate.build_check.settle(failed)                                 # decided once
    lost.sm_build = BuildOutcome(template="t", config={}, status="timeout", error="no build event within 300 s")
    assert gate.build_check.run(lost, CTX).verdict is None
    assert gate.build_check.run(plain, CTX).outcome == "skipped"   # no schedule, no build: nothing to decide
    rejected, unbuilt = gate.drain()
    assert not rejected.passed and rejected.first.check == "build" and "ptxas" in rejected.first.message
    assert unbuilt.passed and unbuilt.checked == "schedule" and "timeout" in unbuilt.note


def test_audit_records_and_rejects_nothing():
    gate = StaticGate(compiled=True, enforce=False)
    j = job()
    gate.run(j, CTX)
    j.sm_build = built(shared=240_000)
    r = gate.build_check.run(j, CTX)
    assert r.outcome == "recorded" and r.verdict is None
    (d,) = gate.drain()
    assert not d.passed and not d.enforced and d.first.check == "shared"
