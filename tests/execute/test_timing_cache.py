"""Timing that no cache can pay (issue 24, item 4), with the static rules switched off (standing in for code the
rules cannot see): every timed call gets input contents never seen before, and near-duplicates of earlier
contents are re-verified, so a cache keyed on sampled contents is caught and one keyed on all of them never hits."""

from pathlib import Path

import pytest
import torch

from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.core.execute.timing import snapshot_plan
from kernelloop.base.records import Candidate, Status, Workload
from kernelloop.core.reference.inputs import PERTURBED, make_inputs, perturb_
from layernorm_source import LN_KERNEL

CHEATS = Path(__file__).resolve().parents[1] / "fixtures" / "cheats"
W = Workload(op="layernorm", axes={"M": 8, "N": 256}, dtype="fp32")
MISS_S = 0.05

EXACT_CACHE = '''
import hashlib
import time
''' + LN_KERNEL + '''
_answers = {}


def launch(x, weight, bias, y, *, eps, **config):
    key = hashlib.sha256(x.numpy().tobytes() + weight.numpy().tobytes() + bias.numpy().tobytes()).hexdigest()
    if key in _answers:          # a hit: the stored answer, no work
        y.copy_(_answers[key])
        return
    time.sleep(MISS_S)           # a miss stands for the real kernel's cost
    M, N = x.shape
    _ln[(M,)](x, weight, bias, y, N, eps, BLOCK=triton.next_power_of_2(N))
    _answers[key] = y.clone()
'''.replace("MISS_S", str(MISS_S))


@pytest.fixture(scope="module")
def evaluator(layernorm, evaluator_for):
    return evaluator_for(layernorm, "timing-cache", samples=8, checks=1, timeouts=Timeouts(check=60.0, bench=120.0),
                         static_rules=False)


def test_a_cache_keyed_on_sampled_contents_is_caught_on_a_near_duplicate(evaluator, job_dir):
    src = (CHEATS / "cache_by_content.py").read_text()
    for k in range(3):   # the near-duplicates' positions are drawn per call: it is caught every time
        ev = evaluator.evaluate(Candidate(op="layernorm", template="custom", source=src + f"\n# {k}\n"), W,
                                job_dir(evaluator, f"j{k}"))
        assert ev.verdict.status is Status.WRONG_VALUES, ev.verdict
        assert ev.verdict.message.startswith("timed call") and "near-duplicate" in ev.verdict.case
        assert ev.measurement is None


def test_a_cache_keyed_on_all_contents_never_hits_while_timed(evaluator, job_dir):
    ev = evaluator.evaluate(Candidate(op="layernorm", template="custom", source=EXACT_CACHE), W, job_dir(evaluator))
    assert ev.verdict.status is Status.PASSED, ev.verdict     # it is correct: a full-content memo is no error
    samples = ev.measurement.kernel_samples_us
    assert len(samples) == 8 and min(samples) >= MISS_S * 1e6, samples   # every timed call paid for its work


def test_near_duplicates_differ_in_a_few_elements_only_and_regenerate_identically(layernorm):
    a = make_inputs(layernorm.spec, W, 11)
    b = perturb_(layernorm.spec, make_inputs(layernorm.spec, W, 11), 5)
    c = perturb_(layernorm.spec, make_inputs(layernorm.spec, W, 11), 5)
    changed = int((a[0] != b[0]).sum())
    assert 1 <= changed <= PERTURBED and torch.equal(b[0], c[0])
    assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2]), "weights and biases are left alone"


def test_the_snapshot_plan_is_drawn_afresh_and_always_covers_the_last_call():
    policy = INTERPRETER_WALLCLOCK.model_copy(update={"samples": 40})
    plans = [snapshot_plan(policy, 3) for _ in range(6)]
    assert all(len(p["near"]) == 3 and min(p["near"]) >= 2 and p["last"] == 40 for p in plans)
    assert len({frozenset(p["near"]) for p in plans}) > 1
    assert not snapshot_plan(policy, 0)["on"]
