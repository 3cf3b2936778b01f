"""A Definition written the way FlashInfer's own are (a const axis, a scalar input, a step-by-step reference, a
bound as a constraint) with a hand-written destination-passing Triton solution and workloads: imported as an op
folder, loaded by kernelloop, its reference checked against the formula and its template run in the interpreter
and judged by kernelloop's verifier.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import json  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from kernelloop.cli.trace import trace_app  # noqa: E402
from kernelloop.deliver.interop import import_definition  # noqa: E402
from kernelloop.base.records import DType, Status  # noqa: E402
from kernelloop.core.reference.inputs import alloc_outputs, make_inputs  # noqa: E402
from kernelloop.core.reference.truth import truth  # noqa: E402
from kernelloop.core.spec import load_workloads  # noqa: E402
from kernelloop.core.verify.compare import check_outputs  # noqa: E402
from kernelloop.core.verify.rules import check_source  # noqa: E402

from fi_helpers import import_file  # noqa: E402

REFERENCE = """import torch

def run(input, weight, eps):
    x = input.to(torch.float32)
    variance = x.pow(2).mean(-1, keepdim=True)
    rstd = torch.rsqrt(variance + eps)
    return (x * rstd * weight.to(torch.float32)).to(input.dtype)
"""

SOLUTION = '''import triton
import triton.language as tl


@triton.jit
def _rms(X, W, Y, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(Y + row * n_cols + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


def run(input, weight, eps, output):
    n_rows, n_cols = input.shape
    _rms[(n_rows,)](input, weight, output, n_cols, eps, BLOCK=triton.next_power_of_2(n_cols))
'''


def definition() -> dict:
    return {
        "name": "rmsnorm_h256", "op_type": "rmsnorm", "description": "RMSNorm with a fixed hidden size.",
        "tags": ["status:verified", "model:test-model"],
        "axes": {"batch_size": {"type": "var", "description": "tokens"},
                 "hidden_size": {"type": "const", "value": 256}},
        "constraints": ["batch_size <= 4096"],
        "inputs": {"input": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"},
                   "weight": {"shape": ["hidden_size"], "dtype": "bfloat16"},
                   "eps": {"shape": None, "dtype": "float32"}},
        "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"}},
        "reference": REFERENCE,
    }


def solution() -> dict:
    return {"name": "rmsnorm_h256_triton_v1", "definition": "rmsnorm_h256", "author": "someone",
            "spec": {"language": "triton", "target_hardware": ["NVIDIA_H100"], "entry_point": "main.py::run",
                     "destination_passing_style": True},
            "sources": [{"path": "main.py", "content": SOLUTION}]}


def workloads() -> list[dict]:
    return [{"definition": "rmsnorm_h256", "solution": None, "evaluation": None,
             "workload": {"uuid": f"u{m}", "axes": {"batch_size": m},
                          "inputs": {"input": {"type": "random"}, "weight": {"type": "random"},
                                     "eps": {"type": "scalar", "value": 1e-5}}}} for m in (1, 7, 32)]


def test_foreign_definition_imports_and_runs(tmp_path):
    bundle, notes = import_definition(definition(), tmp_path, workloads=workloads(), solution=solution())
    spec = bundle.spec
    assert notes == [] and spec.name == "rmsnorm_h256" and spec.dtypes == [DType.bf16]
    assert (spec.axes["hidden_size"].min, spec.axes["hidden_size"].max) == (256, 256)  # const -> min = max
    assert spec.axes["batch_size"].max == 4096 and spec.axes["batch_size"].description == "tokens"
    assert spec.scalars == {"eps": 1e-5} and [t.name for t in spec.inputs] == ["input", "weight"]
    assert [t.dtype for t in [*spec.inputs, *spec.outputs]] == ["op", "op", "op"]
    assert spec.tolerance[DType.bf16].atol == 1e-2 and spec.inputs_policy.distributions == ["normal"]
    spec_text = (bundle.folder / "spec.toml").read_text()
    assert "# op_type: rmsnorm" in spec_text and "status:verified" in spec_text
    wls = load_workloads(bundle.folder / "workloads.toml", spec)
    assert [w.axes for w in wls] == [{"batch_size": m, "hidden_size": 256} for m in (1, 7, 32)]
    src = bundle.template_sources["solution"]
    assert src.startswith(SOLUTION.rstrip("\n"))  # verbatim
    assert check_source(src, spec) == []  # kernelloop's static rules accept it as a candidate
    mod = import_file(bundle.folder / "solution.py", "fi_imported_rmsnorm_h256")
    for w in wls:
        inputs = make_inputs(spec, w, seed=3)
        refs = truth(spec, bundle.folder / "reference.py", inputs)
        x, wt = inputs[0].double(), inputs[1].double()
        formula = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * wt
        assert torch.allclose(refs[0].double(), formula, rtol=1e-6, atol=1e-6)  # the truth runs at float32 here
        outs = alloc_outputs(spec, w, "cpu")
        before = [i.clone() for i in inputs]
        mod.launch(*inputs, *outs, **spec.scalars, SOLUTION="rmsnorm_h256_triton_v1")
        v = check_outputs(spec, w, outs, refs, before, inputs, case=w.label)
        assert v.status is Status.PASSED, v.message


def test_cli_import_of_files(tmp_path):
    (tmp_path / "def.json").write_text(json.dumps(definition()))
    (tmp_path / "sol.json").write_text(json.dumps(solution()))
    (tmp_path / "wl.jsonl").write_text("\n".join(json.dumps(w) for w in workloads()) + "\n")
    r = CliRunner().invoke(trace_app, ["import", str(tmp_path / "def.json"), "--ops", str(tmp_path / "ops"),
                                       "--workloads", str(tmp_path / "wl.jsonl"), "--solution",
                                       str(tmp_path / "sol.json"), "--name", "my_rms", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["op"] == "my_rms" and (tmp_path / "ops" / "my_rms" / "workloads.toml").is_file()
    r = CliRunner().invoke(trace_app, ["import", str(tmp_path / "def.json"), "--ops", str(tmp_path / "ops"),
                                       "--workloads", str(tmp_path / "wl.jsonl"), "--solution",
                                       str(tmp_path / "sol.json"), "--name", "my_rms"])
    assert r.exit_code == 2 and "exists" in r.output
    # without workloads the scalar has no value (run's signature has no default for it)
    r = CliRunner().invoke(trace_app, ["import", str(tmp_path / "def.json"), "--ops", str(tmp_path / "ops2"),
                                       "--solution", str(tmp_path / "sol.json")])
    assert r.exit_code == 2 and "inputs.eps" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "ops2").exists()


def test_cli_import_of_a_dataset_with_a_solution_file(tmp_path):
    """PATH a dataset of two solutions and --solution one of its files (the help offers a .json file): that one
    is imported (it said '2 importable solutions ...; name one')."""
    ds = tmp_path / "ds"
    (ds / "definitions" / "rmsnorm").mkdir(parents=True)
    (ds / "definitions" / "rmsnorm" / "rmsnorm_h256.json").write_text(json.dumps(definition()))
    (ds / "workloads" / "rmsnorm").mkdir(parents=True)
    (ds / "workloads" / "rmsnorm" / "rmsnorm_h256.jsonl").write_text("\n".join(json.dumps(w) for w in workloads()))
    sols = ds / "solutions" / "someone" / "rmsnorm" / "rmsnorm_h256"
    sols.mkdir(parents=True)
    for v in ("v1", "v2"):
        (sols / f"{v}.json").write_text(json.dumps({**solution(), "name": f"rmsnorm_h256_triton_{v}"}))
    r = CliRunner().invoke(trace_app, ["import", str(ds), "--ops", str(tmp_path / "ops"), "--solution",
                                       str(sols / "v2.json")])
    assert r.exit_code == 0, r.output
    spec = (tmp_path / "ops" / "rmsnorm_h256" / "spec.toml").read_text()
    assert "rmsnorm_h256_triton_v2" in spec and "rmsnorm_h256_triton_v1" not in spec


def test_description_escapes_and_more_workloads(tmp_path):
    """Text with quotes, backslashes, newlines and non-ASCII survives spec.toml; import_workloads adds a file."""
    from kernelloop.deliver.interop import Definition, InteropError, import_workloads, parse
    d = definition()
    d["description"] = 'RMSNorm "fused" \\ path\nsecond line: ünïcode ✓'
    d["reference"] = d["reference"] + "\n# a trailing quote: '''\n"  # not embeddable as a raw string: repr'd
    bundle, _ = import_definition(d, tmp_path, workloads=workloads(), solution=solution())
    assert bundle.spec.description == d["description"]
    more = [{"uuid": "x", "axes": {"batch_size": 3}, "inputs": {"eps": {"type": "scalar", "value": 1e-5}}}]
    out = import_workloads(more, parse(Definition, d), bundle.spec, tmp_path / "more.toml")
    assert [w.axes for w in load_workloads(out, bundle.spec)] == [{"batch_size": 3, "hidden_size": 256}]
    x = torch.randn(2, 256, dtype=torch.float64)
    w = torch.rand(256, dtype=torch.float64)
    ref = import_file(bundle.folder / "reference.py", "fi_imported_ref_escaped").reference
    formula = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
    assert torch.allclose(ref(x, w, eps=1e-5), formula, rtol=1e-6, atol=1e-6)  # its run computes in float32
    more[0]["inputs"]["eps"]["value"] = 1e-3
    with pytest.raises(InteropError) as e:
        import_workloads(more, parse(Definition, d), bundle.spec, tmp_path / "bad.toml")
    assert e.value.field == "inputs.eps" and not (tmp_path / "bad.toml").exists()
