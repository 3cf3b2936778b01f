import shutil
from pathlib import Path

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.base.records import DType, Workload
from kernelloop.core.spec import SpecError, load_op, load_workloads
from kernelloop.core.spec.space import expand, prune
from kernelloop.core.device import device_properties

OPS = ops_dir()


@pytest.fixture
def op_copy(tmp_path):
    dst = tmp_path / "layernorm"
    shutil.copytree(OPS / "layernorm", dst)
    return dst


@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
def test_library_ops_load_with_their_workloads(op):
    b = load_op(OPS / op)
    assert b.spec.name == op and set(b.spec.dtypes) == {DType.fp16, DType.bf16, DType.fp32}
    gpu = load_workloads(OPS / op / "workloads.toml", b.spec)
    assert len(gpu) >= 6
    assert {"M": 4096, "N": 4096} in [w.axes for w in gpu]
    assert load_workloads(OPS / op / "workloads-interpret.toml", b.spec)


def test_unknown_dtype_names_file_and_field(op_copy):
    p = op_copy / "spec.toml"
    p.write_text(p.read_text().replace('dtypes = ["fp16", "bf16", "fp32"]', 'dtypes = ["fp16", "fp8"]'))
    with pytest.raises(SpecError) as e:
        load_op(op_copy)
    assert e.value.file.endswith("spec.toml") and e.value.field == "dtypes.1"


def test_missing_reference_is_reported(op_copy):
    (op_copy / "reference.py").unlink()
    with pytest.raises(SpecError) as e:
        load_op(op_copy)
    assert e.value.field == "reference" and "does not exist" in str(e.value)


def test_reference_without_function_is_reported(op_copy):
    (op_copy / "reference.py").write_text("def something_else():\n    pass\n")
    with pytest.raises(SpecError, match="defines no function `reference`"):
        load_op(op_copy)


def test_negative_axis_in_workloads(op_copy, tmp_path):
    b = load_op(op_copy)
    wl = tmp_path / "w.toml"
    wl.write_text('op = "layernorm"\n[[workload]]\naxes = { M = -4, N = 128 }\ndtype = "fp16"\n')
    with pytest.raises(SpecError) as e:
        load_workloads(wl, b.spec)
    assert e.value.field == "workload.0.axes.M" and "outside" in e.value.message


def test_negative_axis_minimum_in_spec(op_copy):
    p = op_copy / "spec.toml"
    p.write_text(p.read_text().replace('[axes.M]\n', '[axes.M]\nmin = -1\n'))
    with pytest.raises(SpecError) as e:
        load_op(op_copy)
    assert e.value.field == "axes.M.min"


@pytest.mark.parametrize("text,field", [
    ('op = "layernorm"\n[[workload]]\naxes = { M = 4 }\ndtype = "fp16"\n', "workload.0.axes"),
    ('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 8 }\ndtype = "int8"\n', "workload.0.dtype"),
    ('op = "softmax"\n[[workload]]\naxes = { M = 4, N = 8 }\ndtype = "fp16"\n', "op"),
    ('op = "layernorm"\n', "workload"),
])
def test_bad_workloads(op_copy, tmp_path, text, field):
    b = load_op(op_copy)
    wl = tmp_path / "w.toml"
    wl.write_text(text)
    with pytest.raises(SpecError) as e:
        load_workloads(wl, b.spec)
    assert e.value.field == field


def test_bad_toml_and_unsafe_expression(op_copy):
    p = op_copy / "spec.toml"
    original = p.read_text()
    p.write_text(original + "\n[[[broken\n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_op(op_copy)
    p.write_text(original.replace('flops_formula = "8 * M * N"', 'flops_formula = "__import__(\'os\')"'))
    with pytest.raises(SpecError) as e:
        load_op(op_copy)
    assert e.value.field == "flops_formula"


def test_pruning_counts_reasons_and_keeps_only_valid(layernorm):
    t = layernorm.spec.templates[0]
    w = Workload(op="layernorm", axes={"M": 4096, "N": 5000}, dtype=DType.fp16)
    kept, report = prune(t, w, device_properties("interpret"))
    assert report.total == len(expand(t)) and report.kept == len(kept) > 0
    assert sum(report.reasons.values()) == report.total - report.kept
    assert any(r.startswith("semantic:") for r in report.reasons)
    assert any(r.startswith("hardware:") for r in report.reasons)
    for c in kept:
        assert c["BLOCK_N"] <= 8192 and (c["ROWS"] == 1 or c["BLOCK_N"] >= 5000)
        assert c["num_warps"] * 32 <= 1024


def test_pruning_respects_a_smaller_device(layernorm):
    t = layernorm.spec.templates[0]
    w = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype=DType.fp16)
    small = device_properties("interpret").with_(max_threads_per_block=256)
    kept, report = prune(t, w, small)
    assert all(c["num_warps"] <= 8 for c in kept)
    assert report.reasons["hardware: threads per program > 256"] > 0
