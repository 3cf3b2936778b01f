"""Integer and bool inputs from their declared generators, poisoned integer outputs, and a reference that keeps
indices as integers and computes integer outputs exactly."""

import numpy as np
import pytest
import torch

from kernelloop.base.builtin import ops_dir
from kernelloop.base.records import OpSpec, Workload
from kernelloop.base.records.spec import SpecError
from kernelloop.base.records.generators import PATTERNS
from kernelloop.core.reference.inputs import alloc_outputs, is_poison, make_inputs, poison_
from kernelloop.core.reference.sparse import csr_structure
from kernelloop.core.reference.truth import check_reference_outputs, truth
from kernelloop.core.spec import load_op

SPMV = load_op(ops_dir() / "spmv_csr")


def _csr_ok(row_ptr: np.ndarray, col: np.ndarray, rows: int, cols: int, nnz: int) -> np.ndarray:
    lengths = np.diff(row_ptr)
    assert row_ptr[0] == 0 and row_ptr[-1] == nnz and len(row_ptr) == rows + 1 and len(col) == nnz
    assert (lengths >= 0).all() and (lengths <= cols).all()
    assert ((col >= 0) & (col < cols)).all()
    for r in range(rows):   # distinct, ascending columns within each row
        c = col[row_ptr[r]:row_ptr[r + 1]]
        assert (np.diff(c) > 0).all(), (r, c)
    return lengths


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("rows, cols, nnz", [(33, 40, 200), (7, 5, 35), (1, 50, 30), (12, 9, 0), (40, 3, 41)])
def test_every_pattern_places_exactly_nnz_distinct_sorted_entries(pattern, rows, cols, nnz):
    row_ptr, col = csr_structure(pattern, rows, cols, nnz, seed=11)
    _csr_ok(row_ptr, col, rows, cols, nnz)
    again = csr_structure(pattern, rows, cols, nnz, seed=11)
    assert (again[0] == row_ptr).all() and (again[1] == col).all()   # seeded: controller and worker agree


def test_the_patterns_differ_where_they_say():
    lengths = {p: np.diff(csr_structure(p, 64, 100, 640, seed=3)[0]) for p in PATTERNS}
    assert lengths["uniform"].min() == lengths["uniform"].max() == 10
    assert (lengths["empty_rows"] == 0).sum() >= 1 and lengths["uniform"].min() > 0
    assert lengths["dense_row"].max() == 100
    assert lengths["power_law"].max() >= 5 * np.median(lengths["power_law"])
    rp, col = csr_structure("banded", 64, 100, 640, seed=3)
    assert all((np.diff(col[rp[r]:rp[r + 1]]) == 1).all() for r in range(64))   # contiguous around the diagonal
    with pytest.raises(ValueError, match="cannot hold"):
        csr_structure("uniform", 3, 3, 10, seed=0)


def test_make_inputs_draws_the_csr_matrix_of_the_cases_pattern():
    w = Workload(op="spmv_csr", axes={"M": 33, "N": 40, "NNZ": 200}, dtype="bf16")
    row_ptr, col, values, x = make_inputs(SPMV.spec, w, 5, "cpu", "normal", "empty_rows")
    assert (row_ptr.dtype, col.dtype, values.dtype, x.dtype) == (torch.int32, torch.int32, torch.bfloat16,
                                                                 torch.bfloat16)
    assert tuple(row_ptr.shape) == (34,) and tuple(col.shape) == (200,)
    lengths = _csr_ok(row_ptr.numpy().astype(np.int64), col.numpy().astype(np.int64), 33, 40, 200)
    assert (lengths == 0).any()
    first = make_inputs(SPMV.spec, w, 5, "cpu")   # no pattern: the spec's first (uniform)
    assert np.diff(first[0].numpy()).min() >= 6
    assert all(torch.equal(a, b) for a, b in zip(first, make_inputs(SPMV.spec, w, 5, "cpu", "normal", "uniform")))


def _op(inputs, outputs) -> OpSpec:
    return OpSpec.model_validate({
        "name": "t", "axes": {"M": {}, "N": {}}, "inputs": inputs, "outputs": outputs, "dtypes": ["fp32"],
        "tolerance": {"fp32": {"atol": 1e-5, "rtol": 1e-5}}, "bytes_formula": "M * elem", "flops_formula": "M",
        "reference": "reference.py", "templates": [{"name": "a", "file": "k.py", "params": [{"name": "B", "values": [1]}]}]})


GATHER = _op([{"name": "x", "shape": ["M", "N"]},
              {"name": "idx", "shape": ["M"], "dtype": "int64", "init": {"kind": "index", "low": "1", "high": "N"}},
              {"name": "keep", "shape": ["M"], "dtype": "bool", "init": {"kind": "mask", "p": 0.3}}],
             [{"name": "arg", "shape": ["M"], "dtype": "int32"}, {"name": "hit", "shape": ["M"], "dtype": "bool"}])
W = Workload(op="t", axes={"M": 4000, "N": 9}, dtype="fp32")


def test_index_and_mask_generators_respect_their_declared_range_and_probability():
    x, idx, keep = make_inputs(GATHER, W, 1)
    assert idx.dtype == torch.int64 and int(idx.min()) == 1 and int(idx.max()) == 8
    assert keep.dtype == torch.bool and 0.25 < float(keep.float().mean()) < 0.35
    assert all(torch.equal(a, b) for a, b in zip(make_inputs(GATHER, W, 1), (x, idx, keep)))


def test_the_reference_gets_integer_inputs_as_integers_and_returns_exact_integer_outputs(tmp_path):
    ref = tmp_path / "reference.py"
    ref.write_text("import torch\n"
                   "def reference(x, idx, keep):\n"
                   "    assert x.dtype == torch.float64 and idx.dtype == torch.int64 and keep.dtype == torch.bool\n"
                   "    return x.argmax(-1).int(), keep & (idx > 4)\n")
    inputs = make_inputs(GATHER, W, 2)
    arg, hit = truth(GATHER, ref, inputs, W)
    assert arg.dtype == torch.int32 and hit.dtype == torch.bool
    with pytest.raises(SpecError, match="computed exactly"):
        check_reference_outputs(GATHER, ref, [arg.double(), hit], W.axes)


def test_integer_outputs_are_poisoned_and_bool_bytes_hold_a_pattern_no_store_leaves():
    arg, hit = alloc_outputs(GATHER, W, "cpu")
    assert is_poison(arg).all() and is_poison(hit).all()
    arg[:10] = 3
    hit[:10] = True
    hit[10:20] = False
    assert int(is_poison(arg).sum()) == W.axes["M"] - 10 and int(is_poison(hit).sum()) == W.axes["M"] - 20
    for dtype in (torch.int8, torch.uint8, torch.int64):
        t = poison_(torch.zeros(5, dtype=dtype))
        assert is_poison(t).all() and not is_poison(torch.zeros(5, dtype=dtype)).any()


def test_spmv_bytes_formula_counts_every_tensor_once_at_its_own_size():
    for dtype in ("fp32", "bf16"):
        w = Workload(op="spmv_csr", axes={"M": 33, "N": 40, "NNZ": 200}, dtype=dtype)
        tensors = [*make_inputs(SPMV.spec, w, 1), *alloc_outputs(SPMV.spec, w, "cpu")]
        assert SPMV.spec.bytes_moved(w.axes, w.dtype) == sum(t.numel() * t.element_size() for t in tensors)
