"""The format's records accept what flashinfer-bench accepts and refuse what it refuses; import refuses what
kernelloop cannot represent -- always as an InteropError naming the field, never a traceback, nothing written."""

from __future__ import annotations

import copy
import json
import math

import pytest
from typer.testing import CliRunner

from kernelloop.cli.trace import trace_app
from kernelloop.deliver.interop import InteropError, import_definition
from kernelloop.deliver.interop import flashinfer_trace as fi
from kernelloop.deliver.interop.errors import parse

from test_fi_import import definition, solution, workloads


def _refused(tmp_path, d=None, wls=None, sol=None, **kw) -> InteropError:
    with pytest.raises(InteropError) as e:
        import_definition(definition() if d is None else d, tmp_path / "ops", workloads=workloads() if wls is None
                          else wls, solution=solution() if sol is None else sol, **kw)
    assert not (tmp_path / "ops").exists()  # checked before anything is written
    return e.value


# ------------------------------------------------------------------------------------------- the records

def test_records_follow_the_format():
    d = parse(fi.Definition, {**definition(), "axes": {"batch_size": {"type": "var"}, "hidden_size": {"value": 256}}})
    assert isinstance(d.axes["hidden_size"], fi.AxisConst)  # no `type`: what the originals' union picks
    assert d.const_axes == {"hidden_size": 256} and d.var_axes == ["batch_size"]
    w = parse(fi.Workload, {"uuid": "u", "axes": {"M": 3}, "inputs": {"a": {}, "s": {"type": "scalar", "value": 2},
                                                                     "b": {"type": "safetensors", "path": "blob/x",
                                                                           "tensor_key": "b"}}})
    assert [type(v).__name__ for v in w.inputs.values()] == ["RandomInput", "ScalarInput", "SafetensorsInput"]
    c = fi.Correctness(max_relative_error=float("nan"), max_absolute_error=float("inf"))
    text = c.model_dump_json()
    assert '"NaN"' in text and '"Infinity"' in text  # as the format serialises them
    back = fi.Correctness.model_validate_json(text)
    assert math.isnan(back.max_relative_error) and math.isinf(back.max_absolute_error)
    env = {"hardware": "NVIDIA_H100", "libs": {"torch": "2.6.0"}}
    ok = parse(fi.Trace, {"definition": "d", "workload": {"uuid": "u", "axes": {}, "inputs": {}}, "solution": "s",
                          "evaluation": {"status": "RUNTIME_ERROR", "environment": env,
                                         "timestamp": "2025-06-27T12:45:00Z"}})
    assert ok.evaluation.status is fi.EvaluationStatus.RUNTIME_ERROR and not ok.is_workload_trace
    assert [s.value for s in fi.EvaluationStatus] == ["PASSED", "INCORRECT_SHAPE", "INCORRECT_NUMERICAL",
                                                      "INCORRECT_DTYPE", "RUNTIME_ERROR", "COMPILE_ERROR", "TIMEOUT"]
    assert {x.value for x in fi.DType} >= {"float16", "bfloat16", "float32", "float8_e4m3fn", "int32", "bool"}


@pytest.mark.parametrize("model,data,field,words", [
    (fi.Definition, {k: v for k, v in definition().items() if k != "reference"}, "reference", "Field required"),
    (fi.Definition, {**definition(), "reference": "def main(x):\n    return x\n"}, "(top level)", "'run'"),
    (fi.Definition, {**definition(), "outputs": {"input": {"shape": None, "dtype": "float32"}}}, "(top level)",
     "overlap"),
    (fi.Definition, {**definition(), "inputs": {"x": {"shape": ["Q"], "dtype": "float16"}}}, "(top level)",
     'undefined axis "Q"'),
    (fi.Definition, {**definition(), "inputs": {"x": {"shape": ["batch_size"], "dtype": "float64"}}},
     "inputs.x.dtype", "'float64' is not one of"),
    (fi.Solution, {**solution(), "spec": {**solution()["spec"], "entry_point": "main.py"}}, "spec",
     "invalid entry point"),
    (fi.Solution, {**solution(), "sources": [{"path": "../main.py", "content": "x"}]}, "sources.0", "traversal"),
    (fi.Solution, {**solution(), "spec": {**solution()["spec"], "entry_point": "other.py::run"}}, "(top level)",
     "'other.py' not found"),
    (fi.Trace, {"definition": "d", "workload": {"uuid": "u", "axes": {}, "inputs": {}}, "solution": "s",
                "evaluation": {"status": "PASSED", "environment": {"hardware": "h"}, "timestamp": "t",
                               "correctness": {}}}, "evaluation", "must include performance"),
    (fi.Workload, {"uuid": "u", "axes": {"M": 1}, "inputs": {"a": {"type": "safetensors", "path": "p"}}},
     "inputs.a.safetensors.tensor_key", "Field required"),
])
def test_malformed_records_name_the_field(model, data, field, words):
    with pytest.raises(InteropError) as e:
        parse(model, data, "x.json")
    assert e.value.field == field and words in e.value.message and str(e.value).startswith("x.json: ")


def test_not_json():
    with pytest.raises(InteropError) as e:
        parse(fi.Definition, "{not json", "d.json")
    assert "not valid JSON" in str(e.value)


# ------------------------------------------------------------------------------------------- what does not map

def _with_input(dtype: str) -> dict:
    d = definition()
    d["inputs"]["weight"]["dtype"] = dtype
    return d


@pytest.mark.parametrize("change,field,words", [
    (lambda d, w, s: d["inputs"]["input"].update(dtype="float8_e4m3fn"), "inputs.input.dtype", "no such dtype"),
    (lambda d, w, s: d["inputs"]["weight"].update(dtype="int32"), "inputs.weight.dtype", "no such dtype"),
    (lambda d, w, s: d["outputs"]["output"].update(dtype="bool"), "outputs.output.dtype", "no such dtype"),
    (lambda d, w, s: d["inputs"]["eps"].update(dtype="int32"), "inputs.eps.dtype", "scalars are floats"),
    (lambda d, w, s: w[0]["workload"]["inputs"].update(input={"type": "safetensors", "path": "blob/a.safetensors",
                                                               "tensor_key": "input"}),
     "workloads.0.inputs.input", "safetensors"),
    (lambda d, w, s: w[1]["workload"]["inputs"].update(eps={"type": "random"}), "workloads.1.inputs.eps",
     "not drawn at random"),
    (lambda d, w, s: w[2]["workload"]["inputs"]["eps"].update(value=1e-6), "workloads.2.inputs.eps.value",
     "one value per op"),
    (lambda d, w, s: w[0]["workload"]["inputs"].update(bogus={"type": "random"}), "workloads.0.inputs.bogus",
     "not an input"),
    (lambda d, w, s: w[0]["workload"].update(axes={}), "workloads.0.axes", "var axes"),
    (lambda d, w, s: w[0]["workload"]["axes"].update(hidden_size=256), "workloads.0.axes", "var axes"),
    (lambda d, w, s: w[0]["workload"]["axes"].update(batch_size=5000), "workloads.0.axes.batch_size", "outside"),
    (lambda d, w, s: d["constraints"].append("batch_size % 2 == 0"), "workloads.0.axes", "violates"),
    (lambda d, w, s: w[0].update(definition="other"), "workloads.0.definition", "not the definition"),
    (lambda d, w, s: s["spec"].update(destination_passing_style=False), "solution.spec.destination_passing_style",
     "value-returning"),
    (lambda d, w, s: s["spec"].update(language="cuda"), "solution.spec.language", "Triton"),
    (lambda d, w, s: s["sources"].append({"path": "helper.py", "content": "X = 1\n"}), "solution.sources",
     "single-file"),
    (lambda d, w, s: s.update(definition="gemm_n4096"), "solution.definition", "not the definition"),
    (lambda d, w, s: s["spec"].update(entry_point="main.py::missing"), "solution.spec.entry_point",
     "not a top-level function"),
    (lambda d, w, s: s["sources"][0].update(content=s["sources"][0]["content"] + "\ndef launch():\n    pass\n"
                                            "\ndef go():\n    launch()\n"), "solution.sources.0.content",
     "global `launch`"),
    (lambda d, w, s: d.update(name="../evil"), "name", "cannot be an op folder name"),
    (lambda d, w, s: d["inputs"].update({"lambda": {"shape": ["batch_size"], "dtype": "bfloat16"}}),
     "inputs.lambda", "not a Python identifier"),
    (lambda d, w, s: d.update(outputs={"out": {"shape": None, "dtype": "float32"}}), "outputs.out.shape",
     "scalar output"),
    (lambda d, w, s: d.update(outputs={"SOLUTION": d["outputs"]["output"]}), "outputs.SOLUTION", "adapter"),
    (lambda d, w, s: d.update(outputs={"run": d["outputs"]["output"]}), "outputs.run", "adapter"),
])
def test_what_does_not_map_names_the_field(tmp_path, change, field, words):
    d, w, s = definition(), workloads(), solution()
    change(d, w, s)
    err = _refused(tmp_path, d, w, s)
    assert err.field == field, str(err)
    assert words in err.message, str(err)


def test_no_solution_no_template(tmp_path):
    with pytest.raises(InteropError) as e:
        import_definition(definition(), tmp_path / "ops", workloads=workloads())
    assert e.value.field == "solution" and "at least one template" in e.value.message
    assert not (tmp_path / "ops").exists()


def test_scalar_from_run_default_and_duplicate_workloads(tmp_path):
    d = copy.deepcopy(definition())
    d["reference"] = d["reference"].replace("def run(input, weight, eps):", "def run(input, weight, eps=1e-6):")
    b, notes = import_definition(d, tmp_path / "a", solution=solution())
    assert b.spec.scalars == {"eps": 1e-6} and "default" in notes[0]
    assert not (b.folder / "workloads.toml").exists()
    wls = workloads() + [copy.deepcopy(workloads()[0])]
    wls[-1]["workload"]["uuid"] = "another"
    b, notes = import_definition(definition(), tmp_path / "b", workloads=wls, solution=solution())
    assert len(notes) == 1 and "another" in notes[0] and "dropped" in notes[0]


def test_cli_bad_input_exits_2(tmp_path):
    bad = definition()
    bad["inputs"]["input"]["dtype"] = "float4_e2m1"
    (tmp_path / "def.json").write_text(json.dumps(bad))
    (tmp_path / "sol.json").write_text(json.dumps(solution()))
    r = CliRunner().invoke(trace_app, ["import", str(tmp_path / "def.json"), "--ops", str(tmp_path / "ops"),
                                       "--solution", str(tmp_path / "sol.json")])
    assert r.exit_code == 2 and "inputs.input.dtype" in r.output and "Traceback" not in r.output
    (tmp_path / "broken.json").write_text('{"name": "x"')
    r = CliRunner().invoke(trace_app, ["import", str(tmp_path / "broken.json"), "--ops", str(tmp_path / "ops")])
    assert r.exit_code == 2 and "not valid JSON" in r.output
    r = CliRunner().invoke(trace_app, ["import", str(tmp_path / "missing.json"), "--ops", str(tmp_path / "ops")])
    assert r.exit_code == 2 and "cannot read" in r.output
    (tmp_path / "wl.jsonl").write_text('{"definition": "rmsnorm_h256", "workload": {"uuid": "u", "axes": {}}}\n')
    r = CliRunner().invoke(trace_app, ["import", str(tmp_path / "def.json"), "--ops", str(tmp_path / "ops"),
                                       "--workloads", str(tmp_path / "wl.jsonl")])
    assert r.exit_code == 2 and "wl.jsonl:1" in r.output and "workload.inputs" in r.output
