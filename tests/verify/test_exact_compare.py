"""Integer and bool outputs are compared exactly: any element off fails, naming the count and the first index;
unwritten integer elements and writes into the guard zones of integer outputs are caught as for float outputs."""

import torch

from kernelloop.base.records import OpSpec, Status, Workload
from kernelloop.core.reference.guards import GUARD_BYTES
from kernelloop.core.reference.inputs import POISON_VALUES, alloc_guarded_outputs, make_inputs
from kernelloop.core.verify.compare import check_outputs, open_guarded

SPEC = OpSpec.model_validate({
    "name": "t", "axes": {"M": {}, "N": {}}, "dtypes": ["fp32"],
    "inputs": [{"name": "x", "shape": ["M", "N"]}],
    "outputs": [{"name": "arg", "shape": ["M"], "dtype": "int32"}, {"name": "pos", "shape": ["M"], "dtype": "bool"}],
    "tolerance": {"fp32": {"atol": 1.0, "rtol": 1.0}},   # wide: must not apply to integer outputs
    "bytes_formula": "M * N * elem + M * 5", "flops_formula": "M * N", "reference": "reference.py",
    "templates": [{"name": "a", "file": "k.py", "params": [{"name": "B", "values": [1]}]}]})
W = Workload(op="t", axes={"M": 64, "N": 7}, dtype="fp32")
INPUTS = make_inputs(SPEC, W, 3)
REFS = [INPUTS[0].double().argmax(-1).int(), INPUTS[0].double().sum(-1) > 3.5]


def judge(arg, pos):
    return check_outputs(SPEC, W, [arg, pos], REFS, INPUTS, INPUTS, "case")


def test_the_exact_answer_passes():
    assert judge(REFS[0].clone(), REFS[1].clone()).status is Status.PASSED


def test_one_index_off_by_one_fails_whatever_the_float_tolerance():
    arg = REFS[0].clone()
    arg[17] += 1
    v = judge(arg, REFS[1].clone())
    assert v.status is Status.WRONG_VALUES
    assert "arg: 1 of 64 elements differ from the exact reference (first at [17]" in v.message
    assert v.metrics[0].mismatched == 1 and v.metrics[0].worst_index == [17]


def test_a_flipped_mask_element_fails():
    pos = REFS[1].clone()
    pos[5] = ~pos[5]
    pos[40] = ~pos[40]
    v = judge(REFS[0].clone(), pos)
    assert v.status is Status.WRONG_VALUES and "pos: 2 of 64 elements differ" in v.message and "[5]" in v.message


def test_unwritten_integer_and_bool_elements_are_incomplete():
    outs, _ = alloc_guarded_outputs(SPEC, W, "cpu")
    outs[0][:60] = REFS[0][:60]
    outs[1].copy_(REFS[1])
    v = judge(*outs)
    assert v.status is Status.WRONG_INCOMPLETE and v.message.startswith("arg: 4 of 64 elements never written")
    outs, _ = alloc_guarded_outputs(SPEC, W, "cpu")
    outs[0].copy_(REFS[0])
    outs[1][:63] = REFS[1][:63]
    v = judge(*outs)
    assert v.status is Status.WRONG_INCOMPLETE and "pos: 1 of 64" in v.message and "[63]" in v.message


def test_a_truth_equal_to_the_integer_poison_value_is_not_called_unwritten():
    refs = [REFS[0].clone(), REFS[1]]
    refs[0][3] = POISON_VALUES[torch.int32]
    v = check_outputs(SPEC, W, [refs[0].clone(), REFS[1].clone()], refs, INPUTS, INPUTS, "case")
    assert v.status is Status.PASSED


def test_a_write_past_an_integer_output_lands_in_its_guard():
    outs, backings = alloc_guarded_outputs(SPEC, W, "cpu")
    outs[0].copy_(REFS[0])
    outs[1].copy_(REFS[1])
    assert open_guarded(SPEC, W, [backings], [], "case")[1] is None
    backings[0][GUARD_BYTES + 64 * 4] = 1     # the first byte after arg's 64 int32 elements
    _, v = open_guarded(SPEC, W, [backings], [], "case")
    assert v.status is Status.REJECTED and "arg (call 1): memory-safety: written after the buffer's end" in v.message
