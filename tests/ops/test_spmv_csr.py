"""spmv_csr end to end in the interpreter: the honest template passes every held-out sparsity pattern, kernels tuned
to one pattern are rejected by the patterns they were not shown, and `kernelloop optimize` runs on it."""

import json
import shutil

import pytest
from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.base.records import HELDOUT_PATTERNS, Candidate, Status, Workload
from kernelloop.cli.app import app
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.core.spec import load_op

OPS = ops_dir()
W = Workload(op="spmv_csr", axes={"M": 33, "N": 40, "NNZ": 200}, dtype="fp32")
WB = Workload(op="spmv_csr", axes={"M": 17, "N": 64, "NNZ": 150}, dtype="bf16")


@pytest.fixture(scope="module")
def uniform_only(tmp_path_factory):
    """spmv_csr whose visible checks draw only uniform rows: whatever else a kernel meets is held out."""
    folder = tmp_path_factory.mktemp("op") / "spmv_csr"
    shutil.copytree(OPS / "spmv_csr", folder, ignore=shutil.ignore_patterns("__pycache__"))
    spec = folder / "spec.toml"
    spec.write_text(spec.read_text().replace('patterns = ["uniform", "power_law", "banded"]', 'patterns = ["uniform"]'))
    bundle = load_op(folder)
    assert bundle.spec.patterns == ["uniform"]
    return bundle


@pytest.fixture(scope="module")
def evaluator(uniform_only, evaluator_for):
    return evaluator_for(uniform_only, "spmv", samples=3, checks=2, timeouts=Timeouts(check=120.0, bench=120.0))


def honest(bundle, variant: str) -> Candidate:
    rows = 2 if variant == "vector" else 16
    return Candidate(op="spmv_csr", template="csr_rows", source=bundle.template_sources["csr_rows"],
                     config={"VARIANT": variant, "ROWS": rows, "BLOCK": 16, "num_warps": 1})


@pytest.mark.parametrize("variant, workload", [("vector", W), ("scalar", WB)])
def test_the_honest_template_passes_every_pattern(evaluator, uniform_only, job_dir, variant, workload):
    ev = evaluator.evaluate(honest(uniform_only, variant), workload, job_dir(evaluator, variant))
    assert ev.verdict.status is Status.PASSED, ev.verdict.message
    drawn = {c["pattern"] for c in evaluator.cases(honest(uniform_only, variant), workload)}
    assert set(HELDOUT_PATTERNS) | {"uniform"} <= drawn


def overfit(bundle, old: str, new: str) -> Candidate:
    src = bundle.template_sources["csr_rows"]
    assert old in src
    return Candidate(op="spmv_csr", template="custom", source=src.replace(old, new),
                     config={"VARIANT": "vector", "ROWS": 1, "BLOCK": 16, "num_warps": 1})


def test_a_kernel_that_skips_empty_rows_is_rejected_by_a_held_out_pattern(evaluator, uniform_only, job_dir):
    # correct on every row that has an entry; an empty row keeps its poison (no uniform row of 200/33 is empty)
    bad = overfit(uniform_only, "tl.store(Y + row, tl.sum(acc, axis=0).to(Y.dtype.element_ty), mask=live)",
                  "tl.store(Y + row, tl.sum(acc, axis=0).to(Y.dtype.element_ty), mask=live & (end > start))")
    ev = evaluator.evaluate(bad, W, job_dir(evaluator, "skip-empty"))
    assert ev.verdict.status is Status.WRONG_INCOMPLETE, ev.verdict.message
    case = ev.failure["case"]
    assert case["kind"] == "held-out" and case["pattern"] in ("empty_rows", "power_law")


def test_a_kernel_sized_to_uniform_row_lengths_is_rejected_by_a_held_out_pattern(evaluator, uniform_only, job_dir):
    # one block of 16 entries per row: every uniform row (6 or 7 entries) fits, a dense row of 40 does not
    bad = overfit(uniform_only, "for k in range(start, end, BLOCK):", "for k in range(start, start + 1, BLOCK):")
    ev = evaluator.evaluate(bad, W, job_dir(evaluator, "uniform-rows"))
    assert ev.verdict.status is Status.WRONG_VALUES, ev.verdict.message
    case = ev.failure["case"]
    assert case["kind"] == "held-out" and case["pattern"] in ("dense_row", "empty_rows", "power_law")


@pytest.mark.slow   # an interpreter loop run (search, verification and timing of two trials)
def test_optimize_spmv_csr_end_to_end(tmp_path):
    out = tmp_path / "run"
    wl = tmp_path / "workloads.toml"
    wl.write_text('op = "spmv_csr"\n[[workload]]\naxes = { M = 9, N = 12, NNZ = 30 }\ndtype = "fp32"\n')
    r = CliRunner().invoke(app, ["optimize", "spmv_csr", "--device", "interpret", "--budget", "2",
                                 "--no-confirm", "--json", "--out", str(out), "--workloads", str(wl)])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert summary["status"] == "complete" and summary["counts"] == {"PASSED": 2}
