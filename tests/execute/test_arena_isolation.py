"""A case's arena is out of the worker's reach once the case's calls have returned (core/execute/shared.py): a stray
write of a later case is charged to the case that made it, never to an earlier case the controller judges first; and
an overrun that runs on through an arena's last guard stays in the case's own mapping, where the guard shows it."""

import pytest

from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
from kernelloop.core.execute.evaluate import Evaluator, Timeouts
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Status, Workload
from layernorm_source import LN_KERNEL
from test_heldout_axes import NARROW

W = Workload(op="layernorm", axes={"M": 8, "N": 200}, dtype="fp32")

# Honest LayerNorm values; from the first call of a later case on (other inputs than the first call's), one float
# stored where the first call's input x lay -- the first case's arena, were it still mapped.
STRAY = LN_KERNEL + '''

FIRST = []


@triton.jit
def _poke(P, off, v):
    tl.store(P + off, v)


def launch(x, weight, bias, y, *, eps, **config):
    M, N = x.shape
    _ln[(M,)](x, weight, bias, y, N, eps, BLOCK=triton.next_power_of_2(N))
    if not FIRST:
        FIRST.append((x.data_ptr(), x[0, 0].item()))
    elif x[0, 0].item() != FIRST[0][1]:
        _poke[(1,)](x, (FIRST[0][0] - x.data_ptr()) // 4, 1234.5)
'''


@pytest.fixture
def worker(tmp_path):
    w = Worker("interpret", tmp_path / "w")
    yield w
    w.close()


def _verdict(layernorm, worker, tmp_path, source, secret):
    ev = Evaluator(layernorm, "interpret", worker, INTERPRETER_WALLCLOCK, secret=secret, checks=2,
                   timeouts=Timeouts(check=60.0, bench=60.0), static_rules=False)
    return ev.evaluate(Candidate(op="layernorm", template="custom", source=source), W, tmp_path / "j").verdict


def test_a_later_cases_write_into_the_first_cases_memory_is_charged_to_the_later_case(layernorm, worker, tmp_path):
    v = _verdict(layernorm, worker, tmp_path, STRAY, "stray")
    # the write faults, or lands in the later case's own arena (mapped where the first one was): never PASSED, and
    # never the first case's inputs "changed during the call"
    assert v.status in (Status.RUNTIME_ERROR, Status.WRONG_INPUT_MUTATED), v
    assert " check 0 " not in v.case and " check 1 " in v.case, v


def test_an_overrun_through_the_last_guard_of_an_arena_is_caught_in_its_own_case(layernorm, worker, tmp_path):
    # the held-out case 8 x 153 of this secret: an arena that ends on a page boundary, and a kernel that writes
    # 8 rows of 200 into its y -- 256 bytes past the backing's last guard
    v = _verdict(layernorm, worker, tmp_path, NARROW, "narrow-False")
    assert v.status is Status.REJECTED and "memory-safety: written after the buffer's end" in v.message, v
    assert "8x153" in v.case and "held-out smaller N" in v.case, v
