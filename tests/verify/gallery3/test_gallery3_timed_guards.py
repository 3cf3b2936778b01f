"""The third gallery, guard zones of the timed calls: a kernel that writes one element past its output only in
timed calls (tests/fixtures/cheats3/semantics/writes_past_when_timed.py) passes verification, whose guard zones it
never touches, and is REJECTED (memory-safety, naming the timed output set) by the guard zones around every output
set of the timed calls, which the worker shares with the controller after the timing phase (core/execute/timing.py) and
the controller checks (core/execute/timed.py). The honest template, timed the same way, still PASSES.

Run with the source rules off (as test_gallery3_protocol.py does): the cheat counts its calls in a list default
argument, state the rules would refuse before any call; what is tested is the boundary behind the rules.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
from kernelloop.core.execute.evaluate import Evaluator, Timeouts
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Status, Workload

CHEAT = Path(__file__).resolve().parents[2] / "fixtures" / "cheats3" / "semantics" / "writes_past_when_timed.py"
W = Workload(op="layernorm", axes={"M": 8, "N": 200}, dtype="fp16")
# enough timed calls that the cheat's stray stores start (after QUIET_CALLS calls in all), three rotating sets
POLICY = INTERPRETER_WALLCLOCK.model_copy(update={"samples": 12, "output_sets": 3})
HONEST = {"BLOCK_N": 256, "ROWS": 1, "num_warps": 1, "EVICT_FIRST": 0}


def _evaluator(worker, layernorm, policy) -> Evaluator:
    return Evaluator(layernorm, "interpret", worker, policy, secret="gallery-3", checks=1,
                     timeouts=Timeouts(check=300.0, bench=300.0), static_rules=False)


@pytest.fixture()
def worker(tmp_path):
    w = Worker("interpret", tmp_path / "worker")
    yield w
    w.close()


@pytest.fixture()
def evaluator(worker, layernorm):
    return _evaluator(worker, layernorm, POLICY)


def test_the_cheat_is_quiet_through_verification(worker, layernorm, tmp_path):
    """Control: with too few timed calls for the stray store to start, the same cheat PASSES -- verification's own
    guard zones never see it, so the rejection below is the timed calls' guards' alone."""
    few = POLICY.model_copy(update={"samples": 3})   # 1 warm-up + 3 timed calls: under QUIET_CALLS in all
    cand = Candidate(op="layernorm", template="custom", source=CHEAT.read_text(), config={})
    got = _evaluator(worker, layernorm, few).evaluate(cand, W, tmp_path / "job")
    assert got.verdict.status is Status.PASSED, got.verdict


def test_one_element_past_the_output_in_timed_calls_only_is_rejected(evaluator, tmp_path):
    cand = Candidate(op="layernorm", template="custom", source=CHEAT.read_text(), config={})
    got = evaluator.evaluate(cand, W, tmp_path / "job")
    assert got.verdict.status is Status.REJECTED, got.verdict
    assert re.match(r"y \(timed set [123]\): memory-safety: written after the buffer's end \(first changed byte at "
                    r"end\+0", got.verdict.message), got.verdict.message
    assert "timed calls" in got.verdict.case and got.measurement is None


def test_the_honest_template_still_passes_with_timed_guards(evaluator, layernorm, tmp_path):
    cand = Candidate(op="layernorm", template="rowwise", source=layernorm.template_sources["rowwise"], config=HONEST)
    got = evaluator.evaluate(cand, W, tmp_path / "job")
    assert got.verdict.status is Status.PASSED, got.verdict
    assert got.measurement is not None


def test_the_controller_names_the_timed_set_and_refuses_a_backing_of_another_size(layernorm):
    """The controller's check of the backings it copied: intact guards pass, one changed byte past set 2's output is
    named, a backing that cannot hold the buffer is a timing-guards rejection (a reply cannot shrink the guards)."""
    import torch

    from kernelloop.core.reference.guards import GUARD_BYTES, guarded_empty
    ev = Evaluator(layernorm, "interpret", None, POLICY, secret="gallery-3", static_rules=False)
    sets = [[[guarded_empty((8, 200), torch.float16, "cpu")[1]], None] for _ in range(3)]
    assert ev._timed_guards(W, sets) is None
    sets[1][0][0][GUARD_BYTES + 8 * 200 * 2] = 0   # the first byte after set 2's y
    v = ev._timed_guards(W, sets)
    assert v.status is Status.REJECTED and v.message.startswith(
        "y (timed set 2): memory-safety: written after the buffer's end (first changed byte at end+0"), v
    v = ev._timed_guards(W, [[[torch.zeros(8 * 200 * 2, dtype=torch.uint8)], None]])
    assert v.status is Status.REJECTED and v.message.startswith("timing-guards: "), v
