"""The build stage: candidates compiled for sm_90 on the CPU by a long-lived, confined build process ahead of the
GPU stage (true compile seconds, the build's CPU time and memory, each kernel's resources); a static rule or a
compile error ends the trial there; the interpreter compiles nothing and says so."""

from pathlib import Path

import pytest

from kernelloop.core.build.stage import BuildStage
from kernelloop.tune.gate.step import StaticGate
from kernelloop.tune.loop.pipeline import default_steps
from kernelloop.core.device import VIRTUAL_HOPPER
from kernelloop.core.build.merge import merge_build
from kernelloop.base.records import BuildArtifact, Built, Candidate, Status, Workload
from kernelloop.base.records.device import Device

CHEATS = Path(__file__).resolve().parents[1] / "fixtures" / "cheats"
W = Workload(op="layernorm", axes={"M": 64, "N": 1024}, dtype="fp16")
HELD = Workload(op="layernorm", axes={"M": 1, "N": 1000}, dtype="fp16")
CONFIG = {"BLOCK_N": 1024, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0}


def cand(bundle, config=CONFIG, source=None) -> Candidate:
    return Candidate(op="layernorm", template="rowwise", source=source or bundle.template_sources["rowwise"],
                     config=config, proposer="test")


@pytest.fixture(scope="module")
def built(layernorm, tmp_path_factory):
    """Three jobs through one stage of one build thread (the default steps of a GPU run, the gate on): an honest
    configuration (two shapes), a configuration Triton refuses to compile, and a source a static rule refuses."""
    folder = tmp_path_factory.mktemp("build")
    stage = BuildStage(layernorm.spec, default_steps(Device(kind="cuda"), VIRTUAL_HOPPER, True, folder), jobs=1,
                       folder=folder)
    try:
        futures = [stage.submit(cand(layernorm), W, [W, HELD]),
                   stage.submit(cand(layernorm, {**CONFIG, "BLOCK_N": 1000}), W, [W]),
                   stage.submit(cand(layernorm, source=(CHEATS / "background_thread.py").read_text()), W, [W])]
        results = [f.result(timeout=600) for f in futures]
        starts = stage._contexts[0].server.starts
        decisions = stage.find(StaticGate).drain()
    finally:
        stage.close()
    return results, starts, decisions


def test_an_honest_candidate_is_compiled_ahead_with_its_true_cost(built):
    (ok, _, _), starts, _ = built
    assert ok.verdict is None
    assert [s.step for s in ok.steps] == ["static rules", "static gate", "triton compile", "static gate: build"]
    art = ok.artifact
    assert art.compiled_by == "build stage" and art.toolchain.endswith("sm_90")
    assert art.compile_s > 0 and art.usage.cpu_s > 0 and art.usage.max_rss_bytes > 0 and art.usage.workloads == 2
    assert art.registers and art.registers > 0 and art.warps == 4 and art.kernel_names
    assert len(ok.cubins) >= 1 and all(len(h) == 64 for h in ok.cubins)
    assert starts == 1   # one build process served every job


def test_the_gate_checks_the_compile_steps_build_without_a_second_compile(built):
    """The gate's decisions over the stage's own sm_90 builds: the honest one passes with the build's resources; the
    one that did not compile is decided after the compile ended its job (rejected: it did not build); a source the
    static rules refused never reached the gate."""
    (ok, bad, _), _, decisions = built
    good, failed = decisions   # one build thread: in the order submitted
    assert good.passed and good.checked == "build" and good.build_status == "built" and good.target == "sm_90"
    assert good.resources.registers == ok.artifact.registers and good.resources.ctas_per_sm >= 1
    assert not failed.passed and failed.first.check == "build" and failed.build_status == "compile_error"
    assert bad.verdict.status is Status.COMPILE_ERROR   # the compile's verdict stands
    assert [s.step for s in bad.steps] == ["static rules", "static gate", "triton compile"]


def test_a_compile_error_and_a_static_rule_end_the_trial_before_the_gpu(built):
    (_, bad, cheat), _, _ = built
    assert bad.verdict.status is Status.COMPILE_ERROR and bad.failure.stage == "compile" and bad.failure.log
    assert "sm_90" in bad.verdict.case
    assert cheat.verdict.status is Status.REJECTED and [s.step for s in cheat.steps] == ["static rules"]


def test_the_interpreter_has_no_compile_step():
    steps = default_steps(Device(kind="interpret"), VIRTUAL_HOPPER, True, Path("."))
    assert [s.name for s in steps] == ["static rules", "static gate"]
    assert not steps[1].compiled and steps[1].enforce and "interpreter" in steps[1].no_build
    assert not default_steps(Device(kind="interpret"), VIRTUAL_HOPPER, True, Path("."), gate="audit")[1].enforce
    assert default_steps(Device(kind="interpret"), VIRTUAL_HOPPER, False, Path("."), gate="off") == []
    cuda = default_steps(Device(kind="cuda"), VIRTUAL_HOPPER, False, Path("."), gate="off")
    assert [s.name for s in cuda] == ["triton compile"]


def test_the_trial_keeps_the_workers_view_of_the_binaries_and_the_build_stages_cost():
    ahead = BuildArtifact(registers=40, shared_bytes=64, warps=4, compile_s=2.5, toolchain="t",
                          compiled_by="build stage")
    built = Built(artifact=ahead, cubins=["a" * 64, "b" * 64])
    worker = BuildArtifact(registers=38, spills=0, compile_s=0.01, first_call_s=0.01, toolchain="t / sm_90")
    merged = merge_build(worker, built, ["a" * 64])
    assert merged.compiled_by == "build stage" and merged.compile_s == 2.5 and merged.first_call_s == 0.01
    assert merged.registers == 38 and merged.spills == 0 and merged.shared_bytes == 64 and merged.ahead_used
    assert merge_build(worker, built, ["c" * 64]).ahead_used is False   # the worker compiled something else
    assert merge_build(worker, None, []) is worker                      # no build stage: the worker's record


def test_a_gate_is_one_more_step_and_its_verdict_ends_the_trial_before_the_gpu(tmp_path):
    """The seam: the static gate over typed schedules (kernelloop.tune.gate.step) runs as a step of the build stage."""
    from kernelloop.base.builtin import ops_dir
    from kernelloop.core.build.steps import StaticRules
    from kernelloop.tune.gate.step import StaticGate
    from kernelloop.tune.schedule.library import gluon_ws
    from kernelloop.tune.schedule.lower import lower
    from kernelloop.tune.schedule.patch import apply_patch
    from kernelloop.core.spec import load_op
    spec = load_op(ops_dir() / "gemm").spec
    w = Workload(op="gemm", axes={"M": 2048, "N": 4096, "K": 4096}, dtype="fp16")
    broken = apply_patch(gluon_ws(), [{"op": "replace", "path": "/roles/0/k_step/0/parity", "value": "phase^1"}])
    cand = Candidate(op="gemm", template="schedule_ws", source=lower(broken), proposer="test",
                     config=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=4,
                                 EPILOGUE="none", TRANS_B=0))
    with BuildStage(spec, [StaticRules(), StaticGate()], jobs=1, folder=tmp_path) as stage:
        got = stage.submit(cand, w, [w]).result(timeout=300)
    assert [s.step for s in got.steps][-1] == "static gate"
    assert got.verdict is not None and got.verdict.status is Status.REJECTED and "static gate" in got.verdict.case
