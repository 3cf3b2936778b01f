"""scan_rows in the interpreter: both algorithms of the honest template pass the verifier (visible and held-out draws
and shapes) in fp32 and bf16; an exclusive scan (off by one) and a chunked scan that drops the carry between chunks
are rejected; NaN and Inf propagate as the spec declares.

TRITON_INTERPRET must be set before triton is imported anywhere (the NaN test runs the template in this process),
hence the first lines."""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":  # the GPU tier (pytest -m gpu) compiles for the device
    os.environ["TRITON_INTERPRET"] = "1"

import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelloop.base.builtin import ops_dir  # noqa: E402
from kernelloop.base.records import Candidate, Status, Workload  # noqa: E402
from kernelloop.core.execute.evaluate import Timeouts  # noqa: E402
from kernelloop.core.spec import load_op  # noqa: E402

from rowops import template_module  # noqa: E402

OPS = ops_dir()
W = Workload(op="scan_rows", axes={"M": 5, "N": 70}, dtype="fp32")
WB = Workload(op="scan_rows", axes={"M": 3, "N": 100}, dtype="bf16")
CHUNKED = {"ALGO": "chunked", "BLOCK": 16, "ROWS": 2, "num_warps": 1}
RTS = {"ALGO": "reduce_then_scan", "BLOCK": 32, "ROWS": 1, "num_warps": 1}


@pytest.fixture(scope="module")
def bundle():
    return load_op(OPS / "scan_rows")


@pytest.fixture(scope="module")
def evaluator(bundle, evaluator_for):
    return evaluator_for(bundle, "scan", samples=3, checks=2, timeouts=Timeouts(check=120.0, bench=120.0))


def candidate(bundle, config: dict, source: str | None = None) -> Candidate:
    return Candidate(op="scan_rows", template="scan" if source is None else "custom",
                     source=bundle.template_sources["scan"] if source is None else source, config=config)


@pytest.mark.parametrize("config, workload", [(CHUNKED, W), (RTS, WB)], ids=["chunked-fp32", "reduce_then_scan-bf16"])
def test_the_honest_template_passes(evaluator, bundle, job_dir, config, workload):
    ev = evaluator.evaluate(candidate(bundle, config), workload, job_dir(evaluator, config["ALGO"]))
    assert ev.verdict.status is Status.PASSED, ev.verdict.message


def edited(bundle, old: str, new: str) -> str:
    src = bundle.template_sources["scan"]
    assert src.count(old) == 1
    return src.replace(old, new)


def test_an_exclusive_scan_is_rejected(evaluator, bundle, job_dir):
    # y[i, j] = sum_{k < j} x[i, k]: off by one element at every position
    bad = edited(bundle, "s = tl.cumsum(v, axis=1) + carry[:, None]", "s = tl.cumsum(v, axis=1) - v + carry[:, None]")
    ev = evaluator.evaluate(candidate(bundle, CHUNKED, bad), W, job_dir(evaluator, "exclusive"))
    assert ev.verdict.status is Status.WRONG_VALUES, ev.verdict.message


def test_a_scan_that_drops_the_carry_between_chunks_is_rejected(evaluator, bundle, job_dir):
    # every chunk of 16 scanned on its own: right for the first 16 columns of a row, wrong after
    bad = edited(bundle, "carry += tl.sum(v, axis=1)", "carry += 0.0 * tl.sum(v, axis=1)")
    ev = evaluator.evaluate(candidate(bundle, CHUNKED, bad), WB, job_dir(evaluator, "no-carry"))
    assert ev.verdict.status is Status.WRONG_VALUES, ev.verdict.message


def test_the_tolerance_is_below_one_term_and_one_carry():
    # the rejections above are not luck of the draw: at the interpreter shapes the allowed error of an element is
    # far below a normal(0.5, 1) term's size and below a 16-term prefix's
    spec = load_op(OPS / "scan_rows").spec
    for w in (W, WB):
        tol = spec.tolerance[w.dtype].resolve(w.axes)
        assert tol.atol < 0.2 and tol.atol < 0.05 * 16 * 0.5 and tol.rtol <= 0.02


def test_nan_and_inf_propagate_to_every_later_prefix():
    kernel = template_module("scan_rows", "kernel.py")
    x = torch.ones(2, 40)
    x[0, 20], x[1, 3] = math.nan, math.inf
    for config in (CHUNKED, RTS):
        y = torch.zeros_like(x)
        kernel.launch(x, y, scratch=torch.zeros(2 * 2), **config)
        assert torch.equal(y[0, :20], torch.arange(1.0, 21.0)) and y[0, 20:].isnan().all()
        assert torch.equal(y[1, :3], torch.arange(1.0, 4.0)) and (y[1, 3:] == math.inf).all()
