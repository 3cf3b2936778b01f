"""Integer and bool tensors in specs: their dtypes, byte sizes, shape expressions and declared generators."""

import pytest
from pydantic import ValidationError

from kernelloop.base.records import CsrRowPtrInit, DType, IndexInit, MaskInit, OpSpec, TensorSpec


def spec(inputs, outputs=None, **extra) -> OpSpec:
    return OpSpec.model_validate({
        "name": "t", "axes": {"M": {}, "N": {}, "NNZ": {}}, "inputs": inputs,
        "outputs": outputs or [{"name": "y", "shape": ["M"]}], "dtypes": ["fp32"],
        "tolerance": {"fp32": {"atol": 1e-5, "rtol": 1e-5}}, "bytes_formula": "M * elem", "flops_formula": "M",
        "reference": "reference.py", "templates": [{"name": "a", "file": "k.py", "params": [{"name": "B", "values": [1]}]}],
        **extra})


X = {"name": "x", "shape": ["M", "N"]}


def test_integer_and_bool_dtypes_have_their_byte_sizes():
    assert [DType(d).itemsize for d in ("int8", "uint8", "int32", "int64", "bool", "fp32", "bf16")] == [1, 1, 4, 8, 1, 4, 2]
    assert not DType.int32.is_float and DType.bf16.is_float
    assert DType("bool").torch_name == "bool" and DType.bf16.torch_name == "bfloat16"


def test_a_spec_takes_integer_inputs_with_generators_and_integer_and_bool_outputs():
    s = spec([X, {"name": "idx", "shape": ["M"], "dtype": "int64", "init": {"kind": "index", "high": "N"}},
              {"name": "keep", "shape": ["M"], "dtype": "bool", "init": {"kind": "mask", "p": 0.25}}],
             [{"name": "arg", "shape": ["M"], "dtype": "int32"}, {"name": "hit", "shape": ["M"], "dtype": "bool"}])
    assert isinstance(s.inputs[1].init, IndexInit) and s.inputs[1].init.high == "N"
    assert isinstance(s.inputs[2].init, MaskInit) and s.inputs[2].init.p == 0.25
    assert s.tensor_dtype(s.outputs[0], DType.fp32) is DType.int32
    assert OpSpec.from_json(s.to_json()) == s


def test_shape_entries_may_be_expressions_over_the_axes():
    s = spec([{"name": "row_ptr", "shape": ["M + 1"], "dtype": "int32",
               "init": {"kind": "csr_row_ptr", "rows": "M", "cols": "N", "nnz": "NNZ"}},
              {"name": "col", "shape": ["NNZ"], "dtype": "int32", "init": {"kind": "csr_col_idx", "row_ptr": "row_ptr"}},
              X], heldout_axes=["M"])
    assert s.inputs[0].dims({"M": 5, "N": 3, "NNZ": 7}) == (6,)
    assert isinstance(s.inputs[0].init, CsrRowPtrInit) and s.patterns == ["uniform", "power_law", "banded"]
    with pytest.raises(ValidationError, match="unknown name"):
        spec([{"name": "x", "shape": ["Q + 1"]}], heldout_axes=["M"])
    with pytest.raises(ValidationError, match="declare heldout_axes"):
        spec([{"name": "x", "shape": ["M + 1"]}])


@pytest.mark.parametrize("tensor, words", [
    ({"name": "i", "shape": ["M"], "dtype": "int32"}, "needs a generator"),
    ({"name": "i", "shape": ["M"], "dtype": "int32", "init": {"kind": "mask"}}, "makes bool tensors"),
    ({"name": "i", "shape": ["M"], "init": {"kind": "index", "high": "N"}}, "makes integer tensors"),
    ({"name": "i", "shape": ["M"], "dtype": "bool", "init": {"kind": "index", "high": "N"}}, "makes integer tensors"),
    ({"name": "i", "shape": ["M"], "dtype": "int32", "init": {"kind": "index", "high": "K"}}, "unknown name"),
    ({"name": "i", "shape": ["M"], "dtype": "int32", "init": {"kind": "csr_col_idx", "row_ptr": "rp"}},
     "not a csr_row_ptr input declared before"),
    ({"name": "i", "shape": ["M"], "dtype": "int32", "init": {"kind": "csr_row_ptr", "rows": "M", "cols": "N",
                                                               "nnz": "NNZ", "patterns": ["checkerboard"]}}, "patterns"),
])
def test_a_generator_must_fit_its_tensor(tensor, words):
    with pytest.raises(ValidationError, match=words):
        spec([X, tensor])


def test_an_ops_own_dtypes_are_floating():
    with pytest.raises(ValidationError, match="floating types"):
        spec([X], dtypes=["int32"], tolerance={"int32": {"atol": 0, "rtol": 0}})


def test_tensor_spec_round_trips_a_generator():
    t = TensorSpec(name="i", shape=["M"], dtype="int64", init=IndexInit(low="1", high="N + 1"))
    assert TensorSpec.from_json(t.to_json()) == t
