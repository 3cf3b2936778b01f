"""An op with an integer output (row argmax, int32) through the whole trial: the worker's arena, the verifier's exact
comparison, the timed calls' re-verification; a kernel that leaves one row's index unwritten or off by one fails."""

import pytest

from kernelloop.base.records import Candidate, Status, Workload
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.core.spec import load_op

SPEC = '''
name = "row_argmax"
reference = "reference.py"
dtypes = ["fp32"]
bytes_formula = "M * N * elem + M * 4"
flops_formula = "M * N"
[axes.M]
[axes.N]
[[inputs]]
name = "x"
shape = ["M", "N"]
[[outputs]]
name = "idx"
shape = ["M"]
dtype = "int32"
[tolerance.fp32]
atol = 1.0
rtol = 1.0
[[templates]]
name = "rows"
file = "kernel.py"
[[templates.params]]
name = "BLOCK_N"
values = [64]
[[templates.constraints]]
expr = "N <= BLOCK_N"
reason = "one block per row"
'''

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def _argmax(X, I, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(X + row * N + cols, mask=cols < N, other=-float("inf"))
    i = tl.argmax(x, axis=0)
    SHIFT
    tl.store(I + row, i.to(tl.int32)MASK)


def launch(x, idx, *, BLOCK_N):
    M, N = x.shape
    _argmax[(M,)](x, idx, N, BLOCK_N=max(BLOCK_N, triton.next_power_of_2(N)))
'''

W = Workload(op="row_argmax", axes={"M": 9, "N": 50}, dtype="fp32")


@pytest.fixture(scope="module")
def argmax_op(tmp_path_factory):
    folder = tmp_path_factory.mktemp("op") / "row_argmax"
    folder.mkdir()
    (folder / "spec.toml").write_text(SPEC)
    (folder / "reference.py").write_text("def reference(x):\n    return x.argmax(-1).int()\n")
    (folder / "kernel.py").write_text(KERNEL.replace("SHIFT", "").replace("MASK", ""))
    return load_op(folder)


@pytest.fixture(scope="module")
def evaluator(argmax_op, evaluator_for):
    return evaluator_for(argmax_op, "argmax", samples=3, checks=2, timeouts=Timeouts(check=120.0, bench=120.0))


def run(evaluator, job_dir, name, shift="", mask=""):
    src = KERNEL.replace("SHIFT", shift).replace("MASK", mask)
    return evaluator.evaluate(Candidate(op="row_argmax", template="custom", source=src, config={"BLOCK_N": 64}), W,
                              job_dir(evaluator, name))


def test_the_exact_argmax_passes_verification_and_timing(evaluator, job_dir):
    ev = run(evaluator, job_dir, "honest")
    assert ev.verdict.status is Status.PASSED, ev.verdict.message
    assert ev.measurement is not None


def test_an_index_left_unwritten_is_incomplete(evaluator, job_dir):
    ev = run(evaluator, job_dir, "unwritten", mask=", mask=row < tl.num_programs(0) - 1")
    assert ev.verdict.status is Status.WRONG_INCOMPLETE, ev.verdict.message
    assert "idx: 1 of" in ev.verdict.message


def test_an_index_off_by_one_on_one_row_fails_exactly(evaluator, job_dir):
    ev = run(evaluator, job_dir, "off-by-one", shift="i = tl.where(row == 2, i + 1, i)")
    assert ev.verdict.status is Status.WRONG_VALUES, ev.verdict.message
    assert "differ from the exact reference" in ev.verdict.message and "first at [2]" in ev.verdict.message
