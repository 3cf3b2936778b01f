"""stencil2d_5pt in the interpreter: the reference is the 5-point Jacobi step with fixed boundary on every shape
(one, two and three rows or columns included), the honest template passes every held-out shape, and kernels that
get the boundary wrong, or that only cover grids a multiple of their tile, are rejected."""

import pytest
import torch

from kernelloop.base.builtin import ops_dir
from kernelloop.base.records import Candidate, Status, Workload
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.core.spec import load_op

OP = load_op(ops_dir() / "stencil2d_5pt")
REF: dict = {}
exec(compile(OP.reference_source, "reference.py", "exec"), REF)
W = Workload(op="stencil2d_5pt", axes={"H": 13, "W": 21}, dtype="fp32")
WB = Workload(op="stencil2d_5pt", axes={"H": 3, "W": 37}, dtype="bf16")
TILED = Workload(op="stencil2d_5pt", axes={"H": 8, "W": 32}, dtype="fp32")   # a multiple of a 4 x 32 tile
CONFIG = {"BLOCK_H": 4, "BLOCK_W": 32, "num_warps": 1}


def _loops(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    for i in range(1, x.shape[0] - 1):
        for j in range(1, x.shape[1] - 1):
            y[i, j] = 0.25 * (x[i - 1, j] + x[i + 1, j] + x[i, j - 1] + x[i, j + 1])
    return y


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (2, 5), (3, 3), (3, 8), (6, 3), (5, 9)])
def test_the_reference_is_the_jacobi_step_with_fixed_boundary(shape):
    x = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    y = REF["reference"](x)
    assert torch.equal(y, _loops(x))
    edge = torch.ones(shape, dtype=torch.bool)
    edge[1:-1, 1:-1] = False
    assert torch.equal(y[edge], x[edge])


@pytest.fixture(scope="module")
def evaluator(evaluator_for):
    return evaluator_for(OP, "stencil", samples=3, checks=2, timeouts=Timeouts(check=120.0, bench=120.0))


def candidate(source: str, template: str = "custom") -> Candidate:
    return Candidate(op="stencil2d_5pt", template=template, source=source, config=CONFIG)


@pytest.mark.parametrize("workload", [W, WB], ids=["fp32-13x21", "bf16-3x37"])
def test_the_honest_template_passes_every_held_out_shape(evaluator, job_dir, workload):
    cand = candidate(OP.template_sources["tile2d"], "tile2d")
    ev = evaluator.evaluate(cand, workload, job_dir(evaluator, workload.dtype))
    assert ev.verdict.status is Status.PASSED, ev.verdict.message
    held = {tuple(sorted(c["workload"].axes.items())) for c in evaluator.cases(cand, workload) if c["heldout"]}
    assert (("H", 1), ("W", workload.axes["W"])) in held and (("H", workload.axes["H"]), ("W", 1)) in held


def broken(old: str, new: str) -> Candidate:
    src = OP.template_sources["tile2d"]
    assert old in src
    return candidate(src.replace(old, new))


STORE = "tl.store(Y + at, tl.where(interior, mean, centre.to(Y.dtype.element_ty)), mask=inside)"


INTERIOR = "interior = inside & (rows > 0) & (rows < H - 1) & (cols > 0) & (cols < W - 1)"
# the stencil on every cell, neighbours outside the grid read as 0 (zero padding instead of a fixed boundary)
PADDED = {INTERIOR: "interior = inside",
          "X + at - W, mask=interior": "X + at - W, mask=inside & (rows > 0)",
          "X + at + W, mask=interior": "X + at + W, mask=inside & (rows < H - 1)",
          "X + at - 1, mask=interior": "X + at - 1, mask=inside & (cols > 0)",
          "X + at + 1, mask=interior": "X + at + 1, mask=inside & (cols < W - 1)"}


@pytest.mark.parametrize("name, edits", [
    ("zero-boundary", {STORE: "tl.store(Y + at, tl.where(interior, mean, 0.0), mask=inside)"}),
    ("updated-boundary", PADDED),
], ids=["zero-boundary", "updated-boundary"])
def test_a_kernel_that_gets_the_boundary_wrong_is_rejected(evaluator, job_dir, name, edits):
    src = OP.template_sources["tile2d"]
    for old, new in edits.items():
        assert old in src
        src = src.replace(old, new)
    ev = evaluator.evaluate(candidate(src), W, job_dir(evaluator, name))
    assert ev.verdict.status is Status.WRONG_VALUES, ev.verdict.message


def test_a_kernel_that_covers_only_whole_tiles_is_rejected_on_a_held_out_shape(evaluator, job_dir):
    # a grid of whole tiles: right on the visible 8 x 32 grid, the cells of a partial tile are never written
    bad = broken("grid = (triton.cdiv(H, BLOCK_H), triton.cdiv(W, BLOCK_W))",
                 "grid = (max(1, H // BLOCK_H), max(1, W // BLOCK_W))")
    ev = evaluator.evaluate(bad, TILED, job_dir(evaluator, "whole-tiles"))
    assert ev.verdict.status is Status.WRONG_INCOMPLETE, ev.verdict.message
    assert ev.failure["case"]["kind"] == "held-out", ev.failure["case"]
