"""Bad candidates become verdicts; the worker is replaced when needed and the next candidate still runs."""

import pytest

from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
from kernelloop.base.records import Candidate, Status, Workload

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

SMALL = {"M": 5, "N": 200}


@pytest.fixture(scope="module")
def evaluator(layernorm, evaluator_for):
    # without the sandbox: these fixtures crash and hang on purpose (segfault.py through ctypes, which the sandbox
    # would deny first: tests/execute/test_sandbox.py), to test how the controller survives them
    return evaluator_for(layernorm, "test", sandbox=False, checks=2, timeouts=Timeouts(check=20.0, bench=60.0),
                         static_rules=False)  # these fixtures test the dynamic defences


def _fixture(name: str) -> Candidate:
    src = (FIXTURES / "candidates" / f"{name}.py").read_text()
    return Candidate(op="layernorm", template="custom", source=src, config={}, proposer="test")


def _honest(layernorm) -> Candidate:
    return Candidate(op="layernorm", template="rowwise", source=layernorm.template_sources["rowwise"],
                     config={"BLOCK_N": 256, "ROWS": 2, "num_warps": 4, "EVICT_FIRST": 0})


def _eval(evaluator, cand, tmp_path, dtype="fp32"):
    w = Workload(op="layernorm", axes=SMALL, dtype=dtype)
    return evaluator.evaluate(cand, w, tmp_path / "job")


@pytest.mark.parametrize("name,status", [
    ("syntax_error", Status.COMPILE_ERROR),
    ("raises", Status.RUNTIME_ERROR),
    ("wrong_values", Status.WRONG_VALUES),
    ("incomplete", Status.WRONG_INCOMPLETE),
    ("mutates_input", Status.WRONG_INPUT_MUTATED),
    ("segfault", Status.RUNTIME_ERROR),
    ("oob_write", Status.RUNTIME_ERROR),
    ("sigkill", Status.RUNTIME_ERROR),
    ("host_oom", Status.RUNTIME_ERROR),
])
def test_bad_candidate_gets_its_verdict_and_the_next_one_passes(evaluator, layernorm, tmp_path, name, status):
    ev = _eval(evaluator, _fixture(name), tmp_path)
    assert ev.verdict.status is status, ev.verdict
    assert ev.measurement is None  # only PASSED candidates are timed
    if status is Status.COMPILE_ERROR:
        assert ev.build is not None and ev.build.kind == "failure" and "SyntaxError" in ev.build.log
    if status is Status.WRONG_INPUT_MUTATED:   # says how much of which input changed, and where first
        assert "input x changed during the call:" in ev.verdict.message
        assert "elements differ (first at [0, 0]:" in ev.verdict.message, ev.verdict.message
    ok = _eval(evaluator, _honest(layernorm), tmp_path)
    assert ok.verdict.status is Status.PASSED, ok.verdict
    assert ok.measurement is not None and ok.measurement.kernel.n == INTERPRETER_WALLCLOCK.samples


def test_crash_verdict_names_the_signal(evaluator, tmp_path):
    ev = _eval(evaluator, _fixture("segfault"), tmp_path)
    assert "SIGSEGV" in ev.verdict.message


def _short_deadline(evaluator, monkeypatch):
    """The hanging candidates wait out the check deadline: 6 s instead of the module's 20, which the honest
    candidates' verification in a busy interpreter needs. What is checked -- a hang becomes TIMEOUT and the worker is
    replaced -- does not depend on how long the deadline is."""
    monkeypatch.setattr(evaluator, "timeouts", Timeouts(check=6.0, bench=evaluator.timeouts.bench))


def test_hang_is_a_timeout_and_the_worker_is_replaced(evaluator, layernorm, tmp_path, monkeypatch):
    assert _eval(evaluator, _honest(layernorm), tmp_path).verdict.status is Status.PASSED
    assert evaluator.worker.alive
    starts = evaluator.worker.starts
    with monkeypatch.context() as m:
        _short_deadline(evaluator, m)
        ev = _eval(evaluator, _fixture("hangs"), tmp_path)
    assert ev.verdict.status is Status.TIMEOUT
    assert not evaluator.worker.alive
    ok = _eval(evaluator, _honest(layernorm), tmp_path)
    assert ok.verdict.status is Status.PASSED
    assert evaluator.worker.starts == starts + 1


def test_wrong_values_carry_metrics_and_case(evaluator, tmp_path):
    ev = _eval(evaluator, _fixture("wrong_values"), tmp_path)
    m = ev.verdict.metrics[0]
    assert m.mismatched > 0 and m.max_abs > 1e-2
    assert "seed=" in ev.verdict.case and "layernorm" in ev.verdict.case


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_template_passes_every_dtype_with_build_record(evaluator, layernorm, tmp_path, dtype):
    ev = _eval(evaluator, _honest(layernorm), tmp_path, dtype)
    assert ev.verdict.status is Status.PASSED, ev.verdict
    assert ev.build.kind == "artifact" and "interpreter" in ev.build.toolchain
    ratios = {r.baseline for r in ev.measurement.ratios}
    assert ratios == {"eager", "copy"}


def test_sigkilled_worker_names_the_signal(evaluator, tmp_path):
    ev = _eval(evaluator, _fixture("sigkill"), tmp_path)
    assert "SIGKILL" in ev.verdict.message


def test_build_that_hangs_is_a_timeout(evaluator, layernorm, tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        _short_deadline(evaluator, m)
        ev = _eval(evaluator, _fixture("import_hangs"), tmp_path)
    assert ev.verdict.status is Status.TIMEOUT and "import" in ev.verdict.message
    assert _eval(evaluator, _honest(layernorm), tmp_path).verdict.status is Status.PASSED
