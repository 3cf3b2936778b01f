"""histogram end to end in the interpreter: both strategies (global atomics, privatised) pass every held-out value
pattern and an empty input; a kernel that leaves the counts unzeroed, one that drops counts where values collide,
and one that zeroes only the bins the visible pattern hits are rejected."""

import shutil

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.base.records import BIN_HELDOUT_PATTERNS, Candidate, Status, Workload
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.core.reference.bins import bin_values
from kernelloop.core.spec import load_op

OPS = ops_dir()
W = Workload(op="histogram", axes={"N": 300, "B": 13}, dtype="fp32")


@pytest.fixture(scope="module")
def uniform_only(tmp_path_factory):
    """histogram whose visible checks draw only uniform values: whatever else a kernel meets is held out."""
    folder = tmp_path_factory.mktemp("op") / "histogram"
    shutil.copytree(OPS / "histogram", folder, ignore=shutil.ignore_patterns("__pycache__"))
    spec = folder / "spec.toml"
    spec.write_text(spec.read_text().replace('patterns = ["uniform", "power_law"]', 'patterns = ["uniform"]'))
    bundle = load_op(folder)
    assert bundle.spec.patterns == ["uniform"]
    return bundle


@pytest.fixture(scope="module")
def evaluator(uniform_only, evaluator_for):
    return evaluator_for(uniform_only, "hist", samples=3, checks=2, timeouts=Timeouts(check=120.0, bench=120.0))


def honest(bundle, strategy: str) -> Candidate:
    return Candidate(op="histogram", template="hist", source=bundle.template_sources["hist"],
                     config={"STRATEGY": strategy, "BLOCK": 64, "TILES": 2, "num_warps": 1})


def custom(bundle, *edits: tuple[str, str], strategy: str = "atomic", tiles: int = 2) -> Candidate:
    src = bundle.template_sources["hist"]
    for old, new in edits:
        assert old in src
        src = src.replace(old, new)
    return Candidate(op="histogram", template="custom", source=src,
                     config={"STRATEGY": strategy, "BLOCK": 64, "TILES": tiles, "num_warps": 1})


def test_every_value_pattern_draws_values_in_range_as_it_says():
    for p in ("uniform", "power_law", "all_equal", "few_bins"):
        v = bin_values(p, 2000, 64, seed=3)
        assert len(v) == 2000 and v.min() >= 0 and v.max() < 64 and (v == bin_values(p, 2000, 64, seed=3)).all()
    assert len(set(bin_values("all_equal", 500, 64, 1))) == 1
    assert len(set(bin_values("few_bins", 500, 64, 1))) <= 8
    assert len(set(bin_values("uniform", 2000, 64, 1))) == 64
    top = max(__import__("numpy").bincount(bin_values("power_law", 2000, 64, 1)))
    assert top > 2000 / 64 * 5    # the largest bin holds far more than a uniform share


@pytest.mark.parametrize("strategy", ["atomic", "private"])
def test_the_honest_template_passes_every_pattern(evaluator, uniform_only, job_dir, strategy):
    ev = evaluator.evaluate(honest(uniform_only, strategy), W, job_dir(evaluator, strategy))
    assert ev.verdict.status is Status.PASSED, ev.verdict.message
    drawn = {c["pattern"] for c in evaluator.cases(honest(uniform_only, strategy), W)}
    assert set(BIN_HELDOUT_PATTERNS) | {"uniform"} <= drawn


def test_an_empty_input_still_gets_zeroed_counts(evaluator, uniform_only, job_dir):
    empty = Workload(op="histogram", axes={"N": 0, "B": 5}, dtype="fp32")
    ev = evaluator.evaluate(honest(uniform_only, "private"), empty, job_dir(evaluator, "empty"))
    assert ev.verdict.status is Status.PASSED, ev.verdict.message


def test_a_kernel_that_does_not_zero_the_counts_is_rejected(evaluator, uniform_only, job_dir):
    bad = custom(uniform_only, ("    _zero[(triton.cdiv(B, ZERO_BLOCK),)](counts, B, BLOCK=ZERO_BLOCK)\n", ""))
    ev = evaluator.evaluate(bad, W, job_dir(evaluator, "no-zero"))
    assert ev.verdict.status is Status.WRONG_VALUES, ev.verdict.message


def test_a_kernel_that_drops_counts_where_values_collide_is_rejected(evaluator, uniform_only, job_dir):
    # a plain read-modify-write: values that meet in one tile read the same count and store it plus one, once
    bad = custom(uniform_only, ("tl.atomic_add(C + x, ones, mask=m)",
                                "tl.store(C + x, tl.load(C + x, mask=m, other=0) + ones, mask=m)"))
    ev = evaluator.evaluate(bad, W, job_dir(evaluator, "non-atomic"))
    assert ev.verdict.status is Status.WRONG_VALUES, ev.verdict.message


def test_a_kernel_that_writes_only_the_bins_it_hits_is_rejected_by_a_held_out_pattern(evaluator, uniform_only,
                                                                                      job_dir):
    # no zeroing pass; one program per input stores its private histogram where it is non-zero: every bin of a
    # uniform draw of 300 values over 13 bins is hit, the empty bins of a held-out pattern keep their poison
    bad = custom(uniform_only, ("    _zero[(triton.cdiv(B, ZERO_BLOCK),)](counts, B, BLOCK=ZERO_BLOCK)\n", ""),
                 ("tl.atomic_add(C + b, h.to(C.dtype.element_ty), mask=(b < B) & (h > 0))",
                  "tl.store(C + b, h.to(C.dtype.element_ty), mask=(b < B) & (h > 0))"),
                 strategy="private", tiles=16)
    ev = evaluator.evaluate(bad, W, job_dir(evaluator, "hit-bins-only"))
    assert ev.verdict.status is Status.WRONG_INCOMPLETE, ev.verdict.message
    case = ev.failure["case"]
    assert case["kind"] == "held-out" and case["pattern"] in BIN_HELDOUT_PATTERNS, case
