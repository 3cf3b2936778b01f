"""kernelloop.tune.gate.check: schedule candidates are checked before any build (a broken schedule never reaches the
compiler, its finding names the field); builds are checked against the device and the declared budget; one real
ahead-of-time sm_90 build of a generated template passes with its resources."""

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.tune.gate import Budget, check_build, gate, gate_candidate
from kernelloop.tune.gate.check import HOPPER
from kernelloop.base.records import Candidate, Workload
from kernelloop.tune.schedule.library import gluon_ws
from kernelloop.tune.schedule.lower import lower
from kernelloop.tune.schedule.patch import apply_patch
from kernelloop.core.spec import load_op
from kernelloop.core.build.aot import BuildOutcome

SPEC = load_op(ops_dir() / "gemm").spec
W = Workload(op="gemm", axes={"M": 2048, "N": 4096, "K": 4096}, dtype="fp16")
CFG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=4, EPILOGUE="none", TRANS_B=0)


def candidate(schedule=None, config=CFG) -> Candidate:
    return Candidate(op="gemm", template="schedule_ws", source=lower(schedule or gluon_ws()), config=dict(config))


def kernel(**over) -> dict:
    return {"name": "k", "shared": 100_000, "num_warps": 12, "REG": 168, "STACK": 0, "LOCAL": 0, **over}


@pytest.mark.parametrize("patch,field", [
    ([{"op": "remove", "path": "/roles/0/k_step/4"}, {"op": "remove", "path": "/roles/0/tile_end/2"}],
     "roles[1].k_step[0]"),                                                      # a missing arrive
    ([{"op": "replace", "path": "/roles/1/k_step/0/parity", "value": "phase"}], "roles[1].k_step[0].parity"),
    ([{"op": "replace", "path": "/roles/0/k_step/2/pending", "value": 2}], "roles[0].k_step[4]"),   # reused early
    ([{"op": "replace", "path": "/roles/0/registers", "value": 160}], "roles[0].registers"),  # accumulator > budget
])
def test_broken_schedules_never_reach_the_compiler(monkeypatch, patch, field):
    import kernelloop.core.build.aot as aot
    monkeypatch.setattr(aot, "build_configs", lambda *a, **k: pytest.fail("a rejected schedule was built"))
    d = gate_candidate(candidate(apply_patch(gluon_ws(), patch)), SPEC, W)
    assert not d.passed and d.first.field == field and d.build_status == ""
    assert d.schedule == "gluon_ws_edit" and field in d.message()


def test_the_config_binds_the_schedule():
    """The same generated source: 3 stages of 128x256 fit, 4 overflow shared memory (the config's numbers)."""
    big = dict(CFG, BLOCK_N=256, num_warps=8)
    assert gate(candidate(config=dict(big, num_stages=3)), workload=W).passed
    d = gate(candidate(config=dict(big, num_stages=4)), workload=W)
    assert not d.passed and d.first.field == "ring.stages" and d.first.check == "resources"


def test_the_config_binds_the_epilogue():
    """The same generated source launched for gemm_bias_gelu (EPILOGUE=bias_gelu): the exact GELU over the whole
    128x256 accumulator is rejected before any build, naming epilogue.fused; SiLU there, or GELU over two halves,
    passes."""
    big = dict(CFG, BLOCK_N=256, num_warps=8, num_stages=3)
    w = W.model_copy(update={"op": "gemm_bias_gelu"})
    d = gate(candidate(config=dict(big, EPILOGUE="bias_gelu")), workload=w)
    assert not d.passed and (d.first.field, d.first.check) == ("epilogue.fused", "resources")
    assert "would spill" in d.first.message and "issue.accumulators" in d.first.message
    assert gate(candidate(config=dict(big, EPILOGUE="bias_silu")), workload=w).passed
    halves = apply_patch(gluon_ws(), [{"op": "replace", "path": "/issue/accumulators", "value": 2}])
    assert gate(candidate(halves, config=dict(big, EPILOGUE="bias_gelu")), workload=w).passed
    bad = gate(candidate(config=dict(big, EPILOGUE="bias_tanh")), workload=w)
    assert not bad.passed and "epilogue.fused" in bad.first.message


def test_build_checks_against_device_and_budget():
    lim = HOPPER.with_(shared_per_block_optin=232448, shared_per_sm=233472, max_threads_per_block=1024,
                       regs_per_sm=65536, max_threads_per_sm=2048)
    ok = BuildOutcome(template="t", config={}, status="built", kernels=[kernel()])
    found, res = check_build(ok, lim, None)
    assert found == [] and res.ctas_per_sm == 1 and res.registers == 168
    over = BuildOutcome(template="t", config={}, status="built", kernels=[kernel(shared=240_000)])
    assert [f.check for f in check_build(over, lim, None)[0]] == ["shared"]
    regs = BuildOutcome(template="t", config={}, status="built", kernels=[kernel(REG=255, num_warps=12)])
    assert [f.check for f in check_build(regs, lim, None)[0]] == ["registers"]
    spill = BuildOutcome(template="t", config={}, status="built", kernels=[kernel(LOCAL=64)])
    assert check_build(spill, lim, None)[0] == []          # spills allowed unless the budget says otherwise
    (f,) = check_build(spill, lim, Budget(registers=168, spills=False, field="roles[0].registers"))[0]
    assert (f.check, f.field) == ("spills", "roles[0].registers")
    (f,) = check_build(ok, lim, Budget(ctas_per_sm=2))[0]
    assert f.check == "occupancy" and "1 program(s)" in f.message
    failed = BuildOutcome(template="t", config={}, status="compile_error", error="PassManager::run failed")
    (f,) = check_build(failed, lim, None)[0]
    assert f.check == "build" and "PassManager" in f.message


def test_a_triton_candidate_gets_the_device_limits_only():
    src = (ops_dir() / "gemm" / "kernel.py").read_text()
    cand = Candidate(op="gemm", template="tiled", source=src, config={"BLOCK_M": 128})
    built = BuildOutcome(template="tiled", config={}, status="built", kernels=[kernel(num_warps=8, REG=214)])
    d = gate(cand, built, workload=W)
    assert d.passed and d.schedule is None and d.resources.registers == 214


def test_real_build_of_a_generated_template_passes():
    from kernelloop.tune.ptx.tools import toolchain_missing
    if toolchain_missing():
        pytest.skip(toolchain_missing())
    d = gate_candidate(candidate(), SPEC, W)
    assert d.passed, d.message()
    assert d.build_status == "built" and d.resources.registers == 248 and d.resources.threads == 256
    assert 0 < d.resources.shared_bytes <= 232448 and d.resources.ctas_per_sm == 1


def test_gate_as_a_build_step():
    """The step a build stage runs: a broken schedule ends the trial with REJECTED naming the field; a source not
    lowered from a schedule is skipped (no build asked for); in audit mode nothing is rejected, all is recorded."""
    from types import SimpleNamespace

    from kernelloop.tune.gate.step import StaticGate
    from kernelloop.base.records import Status
    broken = apply_patch(gluon_ws(), [{"op": "replace", "path": "/roles/0/k_step/0/parity", "value": "phase^1"}])
    ctx = SimpleNamespace(spec=SPEC)
    step = StaticGate()
    r = step.run(SimpleNamespace(candidate=candidate(broken), workload=W), ctx)
    assert r.outcome == "rejected" and r.verdict.status is Status.REJECTED
    assert "roles[0].k_step[0].parity" in r.verdict.message and "static gate" in r.verdict.case
    plain = Candidate(op="gemm", template="tiled", source="import triton\n", config={})
    assert step.run(SimpleNamespace(candidate=plain, workload=W), ctx).outcome == "skipped"
    assert step.run(SimpleNamespace(candidate=candidate(), workload=W), ctx).outcome == "passed"
    audit = StaticGate(enforce=False)
    r = audit.run(SimpleNamespace(candidate=candidate(broken), workload=W), ctx)
    assert r.outcome == "recorded" and r.verdict is None
    assert [d.passed for d in step.drain()] == [False, True] and step.drain() == []
    assert [d.enforced for d in audit.drain()] == [False]
