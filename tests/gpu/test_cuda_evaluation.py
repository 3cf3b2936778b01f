"""GPU tier: the evaluation path on a real CUDA device (run by scripts/gpu_tier.sh on the GPU host).

The worker's tensors come back to the controller by CUDA IPC where the probe finds it works, else through a host
arena (core/execute/shared.py); `host_arena` forces the latter, so both transports are exercised: either way the
candidate must get CUDA tensors (a Triton kernel given host tensors raises, so none of these would pass)."""

from pathlib import Path

import pytest

from kernelloop.core.bench.policy import COLD_L2_EVENTS
from kernelloop.core.execute.evaluate import Evaluator, Timeouts
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Status, Workload

pytestmark = pytest.mark.gpu
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "candidates"
POLICY = COLD_L2_EVENTS.model_copy(update={"samples": 30})


@pytest.fixture(scope="module")
def evaluator(layernorm, tmp_path_factory):
    worker = Worker("cuda", tmp_path_factory.mktemp("gpu-worker"))
    ev = Evaluator(layernorm, "cuda", worker, POLICY, secret="gpu-test", checks=2,
                   timeouts=Timeouts(check=60.0, bench=120.0), static_rules=False)
    yield ev
    worker.close()


@pytest.fixture(scope="module")
def host_arena(layernorm, tmp_path_factory):
    worker = Worker("cuda", tmp_path_factory.mktemp("gpu-host-arena"))
    ev = Evaluator(layernorm, "cuda", worker, POLICY, secret="gpu-host-arena", checks=2,
                   timeouts=Timeouts(check=60.0, bench=120.0), static_rules=False, cuda_ipc=False)
    yield ev
    worker.close()


def honest(layernorm, **cfg):
    config = {"BLOCK_N": 4096, "ROWS": 1, "num_warps": 8, "EVICT_FIRST": 0, **cfg}
    return Candidate(op="layernorm", template="rowwise", source=layernorm.template_sources["rowwise"], config=config)


def fixture(name):
    return Candidate(op="layernorm", template="custom", source=(FIXTURES / f"{name}.py").read_text(), config={})


W = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype="fp16")
ODD = Workload(op="layernorm", axes={"M": 3001, "N": 5000}, dtype="bf16")


def test_honest_kernel_passes_with_build_resources_and_cold_l2_times(evaluator, layernorm, tmp_path):
    ev = evaluator.evaluate(honest(layernorm), W, tmp_path / "j")
    assert ev.verdict.status is Status.PASSED, ev.verdict
    # the probe decided the transport before the first check; a host arena says why CUDA IPC was not used
    assert ev.transport == evaluator.transport in ("cuda-ipc", "host-arena")
    assert bool(ev.transport_note) == (ev.transport == "host-arena"), ev.transport_note
    b = ev.build
    assert b.kind == "artifact" and b.registers and b.registers > 0 and b.spills is not None
    assert "sm_90" in b.toolchain and b.binary_hash
    assert b.warps == honest(layernorm).config["num_warps"], "no loop is warp-specialized: the config's warps"
    m = ev.measurement
    assert m.kernel.n == 30 and m.kernel.median_us > 1.0
    # Kernel time excludes the host launch; call time includes it.
    assert m.call.median_us > m.kernel.median_us
    assert 0.2 < m.roofline_fraction < 1.3
    assert {r.baseline for r in m.ratios} == {"eager", "copy"}
    # The launch-hiding check ran: how many kernel samples were re-taken, and the sleep it ended with.
    launch = m.environment["launch"]
    assert launch["exposed_retakes"] >= 0 and launch["sleep_cycles_final"] >= evaluator.policy.sleep_cycles


def test_non_divisible_shape_passes_looped_path(evaluator, layernorm, tmp_path):
    ev = evaluator.evaluate(honest(layernorm, BLOCK_N=1024), ODD, tmp_path / "j")
    assert ev.verdict.status is Status.PASSED, ev.verdict


@pytest.mark.parametrize("name,status", [
    ("wrong_values", Status.WRONG_VALUES),
    ("incomplete", Status.WRONG_INCOMPLETE),
    ("mutates_input", Status.WRONG_INPUT_MUTATED),
    ("raises", Status.RUNTIME_ERROR),
    ("syntax_error", Status.COMPILE_ERROR),
    ("host_oom", Status.RUNTIME_ERROR),   # a CUDA out-of-memory error inside the call
    ("sigkill", Status.RUNTIME_ERROR),
])
def test_bad_candidates_on_gpu(evaluator, name, status, tmp_path):
    ev = evaluator.evaluate(fixture(name), W, tmp_path / "j")
    assert ev.verdict.status is status, ev.verdict


@pytest.mark.parametrize("name,status", [
    ("honest_layernorm", Status.PASSED),
    ("wrong_values", Status.WRONG_VALUES),
    ("incomplete", Status.WRONG_INCOMPLETE),
    ("mutates_input", Status.WRONG_INPUT_MUTATED),
])
def test_the_host_arena_hands_the_candidate_cuda_tensors_and_judges_what_it_wrote(host_arena, name, status,
                                                                                   tmp_path):
    # the job folder inside the worker's own (as the loop's are): one outside its read-only view would restart it
    ev = host_arena.evaluate(fixture(name), W, host_arena.worker.work_dir / tmp_path.name / "j")
    assert ev.verdict.status is status, ev.verdict
    assert ev.transport == "host-arena" and "turned off" in ev.transport_note
    if status is Status.PASSED:   # timed too: its timed calls' snapshots came back through the host arena
        assert ev.measurement is not None and ev.measurement.kernel.n == 30


def test_illegal_memory_access_replaces_the_worker(evaluator, layernorm, tmp_path):
    # job folders inside the worker's own (as the loop's are): one outside its read-only view would restart it
    jobs = evaluator.worker.work_dir / tmp_path.name
    assert evaluator.evaluate(honest(layernorm), W, jobs / "a").verdict.status is Status.PASSED
    starts = evaluator.worker.starts
    ev = evaluator.evaluate(fixture("oob_write"), W, jobs / "b")
    assert ev.verdict.status is Status.RUNTIME_ERROR, ev.verdict
    after = evaluator.evaluate(honest(layernorm), W, jobs / "c")
    assert after.verdict.status is Status.PASSED, after.verdict
    assert evaluator.worker.starts == starts + 1


def test_device_hang_is_a_timeout(layernorm, tmp_path):
    worker = Worker("cuda", tmp_path / "w")
    ev = Evaluator(layernorm, "cuda", worker, POLICY, secret="hang", checks=1, timeouts=Timeouts(check=25.0),
                   static_rules=False)
    try:
        res = ev.evaluate(fixture("hangs"), W, tmp_path / "j")
        assert res.verdict.status is Status.TIMEOUT
        assert ev.evaluate(honest(layernorm), W, tmp_path / "k").verdict.status is Status.PASSED
    finally:
        worker.close()


def test_compile_failure_of_triton_code_is_a_build_failure(evaluator, tmp_path):
    src = '''
import triton
import triton.language as tl

@triton.jit
def _k(Y):
    tl.store(Y + tl.arange(0, 3), 1.0)   # arange length must be a power of two: a compile error

def launch(x, weight, bias, y, *, eps, **config):
    _k[(1,)](y)
'''
    ev = evaluator.evaluate(Candidate(op="layernorm", template="custom", source=src), W, tmp_path / "j")
    assert ev.verdict.status is Status.COMPILE_ERROR, ev.verdict
    assert ev.build.kind == "failure" and ev.build.stage == "compile"
