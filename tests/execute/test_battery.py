"""The verification battery and the timed-call re-checks catch what a plain tolerance check misses."""

import textwrap

import pytest

from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.base.records import Candidate, Status, Workload
from kernelloop.core.reference.inputs import make_inputs
from kernelloop.core.verify.explain import failure_reason
from layernorm_source import LN_KERNEL

W = Workload(op="layernorm", axes={"M": 6, "N": 200}, dtype="fp32")

KERNEL = LN_KERNEL + '''

def honest(x, weight, bias, y, eps):
    M, N = x.shape
    _ln[(M,)](x, weight, bias, y, N, eps, BLOCK=triton.next_power_of_2(N))
'''


@pytest.fixture(scope="module")
def evaluator(layernorm, evaluator_for):
    return evaluator_for(layernorm, "battery", samples=6, checks=2, timeouts=Timeouts(check=30.0, bench=60.0),
                         static_rules=False,  # the dynamic battery must hold even without the source rules
                         aten_ops=False)      # ... and without the ATen recorder (fixtures misbehave with torch ops)


def run(evaluator, job_dir, launch_body: str, w: Workload = W):
    src = KERNEL + "\n" + textwrap.dedent(launch_body)
    return evaluator.evaluate(Candidate(op="layernorm", template="custom", source=src), w, job_dir(evaluator))


def test_honest_passes_and_sees_every_case(evaluator, job_dir):
    ev = run(evaluator, job_dir, "def launch(x, weight, bias, y, *, eps):\n    honest(x, weight, bias, y, eps)\n")
    assert ev.verdict.status is Status.PASSED, ev.verdict
    assert ev.measurement is not None


def test_cases_cover_distributions_heldout_and_repeats(evaluator):
    cand = Candidate(op="layernorm", template="custom", source="x")
    cases = evaluator.cases(cand, Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype="fp16"))
    assert cases[0]["repeats"] == 3
    assert len({c["distribution"] for c in cases}) >= 2
    held = [c["workload"].axes["M"] for c in cases if c["workload"].axes["M"] < 4096]
    assert 1 in held and any(m % 2 == 1 and m > 1 for m in held)
    primary = [c for c in cases if (c["heldout"] or {}).get("kind") == "primary"]
    assert primary and all(c["workload"].axes["N"] == 4096 for c in primary), "the primary axis moves alone"
    assert {c["workload"].axes["N"] for c in cases} - {4096}, "and every other free axis moves too"
    assert len({c["seed"] for c in cases}) == len(cases)


def test_constant_output_is_degenerate(evaluator, job_dir):
    ev = run(evaluator, job_dir, "def launch(x, weight, bias, y, *, eps):\n    y.fill_(0.0)\n")
    assert ev.verdict.status is Status.WRONG_VALUES and "degenerate" in ev.verdict.message


def test_hard_coded_visible_shape_fails_on_heldout(evaluator, job_dir):
    ev = run(evaluator, job_dir, """
        def launch(x, weight, bias, y, *, eps):
            if x.shape[0] == 6:
                honest(x, weight, bias, y, eps)
            else:
                y.fill_(1.0)
        """)
    assert ev.verdict.status is Status.WRONG_VALUES
    assert "[1x200]" in ev.verdict.case or "x200]" in ev.verdict.case


def test_nondeterminism_across_repeats(evaluator, job_dir):
    ev = run(evaluator, job_dir, """
        _calls = [0]

        def launch(x, weight, bias, y, *, eps):
            honest(x, weight, bias, y, eps)
            _calls[0] += 1
            y[0, 0] += 1e-6 * _calls[0]
        """)
    assert ev.verdict.status is Status.WRONG_NONDETERMINISTIC, ev.verdict


def test_cache_keyed_by_pointer_is_caught_on_timed_calls(evaluator, job_dir):
    ev = run(evaluator, job_dir, """
        _cache = {}

        def launch(x, weight, bias, y, *, eps):
            key = (x.data_ptr(), weight.data_ptr())
            if key not in _cache:
                honest(x, weight, bias, y, eps)
                _cache[key] = y.clone()
            else:
                y.copy_(_cache[key])
        """)
    assert ev.verdict.status is Status.WRONG_VALUES, ev.verdict
    # on timed calls, or already in verification: a later case's arena may be mapped where an earlier case's was
    # (each is unmapped once its calls return, core/execute/shared.py), and the cache hands back that case's outputs
    assert ev.verdict.message.startswith("timed call") or " check 0 " not in ev.verdict.case, ev.verdict


def test_cache_keyed_by_pointer_from_the_timed_calls_on_is_caught_there(evaluator, job_dir):
    # the same cache switched on only after verification's calls, so the timed-call check is what must see it
    ev = run(evaluator, job_dir, """
        _cache = {}
        _n = [0]

        def launch(x, weight, bias, y, *, eps):
            _n[0] += 1
            key = (x.data_ptr(), weight.data_ptr())
            if _n[0] <= 12 or key not in _cache:
                honest(x, weight, bias, y, eps)
                _cache[key] = y.clone()
            else:
                y.copy_(_cache[key])
        """)
    assert ev.verdict.status is Status.WRONG_VALUES and ev.verdict.message.startswith("timed call"), ev.verdict


def test_behaviour_change_after_n_calls_is_caught(evaluator, job_dir):
    ev = run(evaluator, job_dir, """
        _n = [0]

        def launch(x, weight, bias, y, *, eps):
            _n[0] += 1
            if _n[0] <= 12:
                honest(x, weight, bias, y, eps)
            else:
                y.copy_(x)
        """)
    assert ev.verdict.status is Status.WRONG_VALUES and "timed call" in ev.verdict.message


def test_output_replaced_by_an_input_alias(evaluator, job_dir):
    ev = run(evaluator, job_dir, """
        def launch(x, weight, bias, y, *, eps):
            honest(x, weight, bias, y, eps)
            x.copy_(y)
            y.set_(x)
        """)
    assert ev.verdict.status is Status.WRONG_SHAPE and "replaced" in ev.verdict.message


def test_background_thread_is_rejected(evaluator, job_dir):
    ev = run(evaluator, job_dir, """
        import threading
        import time

        def launch(x, weight, bias, y, *, eps):
            honest(x, weight, bias, y, eps)
            threading.Thread(target=time.sleep, args=(20,), daemon=True).start()
        """)
    assert ev.verdict.status is Status.REJECTED and "thread" in ev.verdict.message


@pytest.mark.parametrize("dist", ["normal", "large", "mixed", "near_zero", "heavy_tail"])
def test_distributions_are_finite_seeded_and_distinct(layernorm, dist):
    w = Workload(op="layernorm", axes={"M": 64, "N": 128}, dtype="fp16")
    a = make_inputs(layernorm.spec, w, 7, "cpu", dist)[0]
    b = make_inputs(layernorm.spec, w, 7, "cpu", dist)[0]
    assert a.isfinite().all() and a.equal(b)
    if dist != "normal":
        assert not a.equal(make_inputs(layernorm.spec, w, 7, "cpu", "normal")[0])


@pytest.mark.parametrize("body", [
    # computes the result in a new tensor and returns it: the output buffer stays unwritten
    "def launch(x, weight, bias, y, *, eps):\n    return torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps)\n",
    # writes the output correctly and also returns it: still told, not silently ignored
    "def launch(x, weight, bias, y, *, eps):\n    honest(x, weight, bias, y, eps)\n    return y\n",
])
def test_a_launch_that_returns_something_is_rejected_saying_so(evaluator, job_dir, body):
    ev = run(evaluator, job_dir, "import torch\n" + body)
    assert ev.verdict.status is Status.REJECTED, ev.verdict
    assert "launch returned a Tensor instead of None" in ev.verdict.message
    assert failure_reason(ev.verdict) == "rejected: launch-returned"
    assert "in place" in ev.verdict.message and ev.measurement is None
