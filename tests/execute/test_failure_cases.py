"""Failures that explain themselves (issue 24, item 5): every non-PASSED verdict names the case it failed on and
its reason; a crash names its stage (import, build, verify case k, timing) and the signal; and what a proposer is
told of a held-out crash is its class, not its shape."""

import pytest

from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
from kernelloop.core.execute.evaluate import Evaluator, Timeouts
from kernelloop.base.records import Candidate, Status, Workload
from kernelloop.core.verify.explain import failure_reason, proposer_verdict
from layernorm_source import LN_KERNEL

W = Workload(op="layernorm", axes={"M": 8, "N": 64}, dtype="fp32")

KERNEL = '''
import os
import signal
import time
''' + LN_KERNEL + '''
_calls = [0]


def launch(x, weight, bias, y, *, eps, **config):
    _calls[0] += 1
    M, N = x.shape
    if (M, N) != (8, 64):
        FAULT
    elif _calls[0] >= 20:
        TIMED_FAULT
    _ln[(M,)](x, weight, bias, y, N, eps, BLOCK=triton.next_power_of_2(N))
'''


def kernel(fault: str = "pass", timed: str = "pass") -> Candidate:
    src = KERNEL.replace("TIMED_FAULT", timed).replace("FAULT", fault)
    return Candidate(op="layernorm", template="custom", source=src)


@pytest.fixture(scope="module")
def evaluator(layernorm, evaluator_for):
    return evaluator_for(layernorm, "explain", samples=30, checks=2, timeouts=Timeouts(check=12.0, bench=60.0),
                         static_rules=False)


def heldout_index(ev, cand) -> int:
    return next(c["index"] for c in ev.cases(cand, W) if c["heldout"])


@pytest.mark.parametrize("fault,signal", [("os.kill(os.getpid(), signal.SIGSEGV)", "SIGSEGV"), ("os.abort()", "SIGABRT")])
def test_a_crash_on_a_heldout_case_names_the_case_the_stage_and_the_signal(evaluator, job_dir, fault, signal):
    cand = kernel(fault)
    ev = evaluator.evaluate(cand, W, job_dir(evaluator))
    v, f = ev.verdict, ev.failure
    k = heldout_index(evaluator, cand)
    assert v.status is Status.RUNTIME_ERROR and f"killed by signal {signal} during verify case {k}" in v.message, v
    assert "held-out" in v.case and f" check {k} " in v.case
    assert f["stage"] == "verify" and f["signal"] == signal and f["at"] == f"verify case {k}"
    assert f["case"]["kind"] == "held-out" and f["case"]["index"] == k and f["case"]["axes"] != W.axes
    assert failure_reason(v) == f"killed by {signal}"
    told = proposer_verdict(v, W, f)
    assert f"killed by {signal} on a held-out case" in told.message and "seed" not in told.case
    assert f["case"]["workload"] not in told.model_dump_json()


def test_an_exception_on_a_heldout_case_is_not_echoed_to_proposers(evaluator, job_dir):
    ev = evaluator.evaluate(kernel("raise ValueError(f'saw {tuple(x.shape)}')"), W, job_dir(evaluator))
    v, f = ev.verdict, ev.failure
    assert v.status is Status.RUNTIME_ERROR and "saw (" in v.message and "held-out" in v.case
    assert f["case"]["kind"] == "held-out" and failure_reason(v) == "raised ValueError"
    told = proposer_verdict(v, W, f)
    assert "saw (" not in told.model_dump_json() and "raised ValueError on a held-out case" in told.message


def test_a_hang_on_a_heldout_case_names_the_case(evaluator, job_dir):
    cand = kernel("time.sleep(600)")
    ev = evaluator.evaluate(cand, W, job_dir(evaluator))
    k = heldout_index(evaluator, cand)
    assert ev.verdict.status is Status.TIMEOUT and f"during verify case {k}" in ev.verdict.message, ev.verdict
    assert ev.failure["at"] == f"verify case {k}" and ev.failure["case"]["kind"] == "held-out"


def test_a_crash_while_timed_names_the_timing_stage(evaluator, job_dir):
    ev = evaluator.evaluate(kernel(timed="os.kill(os.getpid(), signal.SIGSEGV)"), W, job_dir(evaluator))
    v, f = ev.verdict, ev.failure
    assert v.status is Status.RUNTIME_ERROR and "SIGSEGV during timing (samples)" in v.message, v
    assert v.case == f"{W.label} timed calls" and f["stage"] == "timing" and f["signal"] == "SIGSEGV"
    assert f["case"]["kind"] == "timed" and f["case"]["axes"] == W.axes


def test_every_failure_carries_its_case(layernorm, evaluator, job_dir):
    static = Evaluator(layernorm, "interpret", evaluator.worker, INTERPRETER_WALLCLOCK, secret="explain-static",
                       checks=1, timeouts=Timeouts(check=30.0))
    rejected = static.evaluate(kernel(), W, job_dir(evaluator, "s"))          # os, signal, time: the rules refuse it
    assert rejected.verdict.status is Status.REJECTED
    assert rejected.verdict.case.endswith("static rules, before any call")
    assert rejected.failure["stage"] == "static rules"
    broken = evaluator.evaluate(Candidate(op="layernorm", template="custom", source="import nowhere_at_all\n"), W,
                                job_dir(evaluator, "i"))
    assert broken.verdict.status is Status.COMPILE_ERROR and broken.verdict.case == f"{W.label}: import"
    assert broken.failure["stage"] == "import" and failure_reason(broken.verdict) == "import failed"
    wrong = evaluator.evaluate(kernel("eps = eps * 1e6"), W, job_dir(evaluator, "w"))
    assert wrong.verdict.status is Status.WRONG_VALUES and wrong.failure["case"]["kind"] == "held-out"
    assert wrong.failure["case"]["distribution"] in wrong.verdict.case
