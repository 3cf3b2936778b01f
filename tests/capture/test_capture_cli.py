"""`kernelloop capture`: a built-in model, a module:factory, the files it writes, and bad input (exit 2)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.deliver.capture import CaptureReport
from kernelloop.cli import common
from kernelloop.cli.app import app
from kernelloop.core.spec import load_op, load_workloads

HERE = Path(__file__).resolve().parent
OPS = ops_dir()
runner = CliRunner()


def _run(*args):
    return runner.invoke(app, ["capture", *args, "--ops", str(OPS)])


def test_builtin_llama_tiny(tmp_path):
    pytest.importorskip("transformers")
    out, wl = tmp_path / "cards.json", tmp_path / "wl"
    r = _run("llama-tiny", "--batch", "1", "--seq", "4", "--out", str(out), "--workloads-dir", str(wl))
    assert r.exit_code == 0, r.output
    assert "LlamaRMSNorm" in r.output and "attention_causal" in r.output and "to do:" in r.output
    report = CaptureReport.load(out)
    assert report.inputs["0"].shape == (1, 4)
    rms = next(c for c in report.cards if c.op == "rmsnorm")
    assert rms.axes == {"M": 4, "N": 64} and rms.calls == 5
    for op in ("rmsnorm", "gemm_nt", "attention_causal"):
        assert load_workloads(wl / f"{op}.toml", load_op(OPS / op).spec)


def test_json_output_is_the_report():
    pytest.importorskip("transformers")
    r = _run("gpt2-tiny", "--dtype", "fp16", "--json")
    assert r.exit_code == 0, r.output
    report = CaptureReport.model_validate(json.loads(r.stdout))
    assert report.model_class.endswith("GPT2LMHeadModel")
    assert {c.op for c in report.mapped} == {"layernorm", "gemm_bias", "gemm_nt", "attention_causal"}
    assert all(c.dtype.value == "fp16" for c in report.mapped)


def test_module_factory(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    r = _run("capture_tiny_models:build", "--seq", "3", "--workloads-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "MyRMSNorm" in r.output and "gemm_nt" in r.output and "softmax" in r.output
    rms = load_workloads(tmp_path / "rmsnorm.toml", load_op(OPS / "rmsnorm").spec)
    assert [w.axes for w in rms] == [{"M": 2 * 3, "N": 64}]          # --seq reached the factory
    # a factory by file path, taking no parameters
    r = _run(f"{HERE / 'capture_tiny_models.py'}:build_no_params", "--json")
    assert r.exit_code == 0, r.output
    assert CaptureReport.model_validate(json.loads(r.stdout)).inputs["0"].shape == (2, 8, 64)


def test_model_that_raises_exits_3(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    r = _run("capture_tiny_models:build_raises")
    assert r.exit_code == common.STOPPED
    assert "inner.bad" in r.output and "boom inside" in r.output


@pytest.mark.parametrize("args, message", [
    (["no-such-model"], "unknown model 'no-such-model'"),
    (["capture_tiny_models:not_a_pair"], "not a pair (model, example_inputs)"),
    (["capture_tiny_models:several_examples"], "example_inputs is a list of 2 tuples, as if several examples; the "
                                               "factory returns (model, example_inputs), example_inputs being one "
                                               "call's arguments"),
    (["capture_tiny_models:no_tensor"], "example_inputs (a str) holds no tensor"),
    (["capture_tiny_models:missing"], "has no attribute 'missing'"),
    (["no_such_module_xyz:build"], "cannot import 'no_such_module_xyz'"),
    (["capture_tiny_models:build", "--device", "tpu"], "--device 'tpu'"),
    (["capture_tiny_models:build", "--dtype", "fp64"], "--dtype 'fp64'"),
])
def test_bad_input_exits_2(args, message, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    r = _run(*args)
    assert r.exit_code == common.BAD_INPUT, r.output
    assert message in " ".join(r.output.split())
