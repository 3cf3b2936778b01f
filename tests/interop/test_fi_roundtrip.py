"""Every op in ops/ at every dtype: export its Definition (+ workloads, + one candidate as a Solution), import them
back as an op folder, and check that kernelloop loads it and that the imported reference computes exactly what the
original does on seeded inputs (the truth in float64 and the eager call on op-dtype inputs)."""

from __future__ import annotations

import json

import pytest
import torch

from kernelloop.deliver.interop import (Definition, Solution, Trace, export_definition, export_solution, export_workloads,
                                import_definition)
from kernelloop.base.records import Workload
from kernelloop.core.reference.inputs import make_inputs
from kernelloop.core.reference.truth import load_reference, truth
from kernelloop.core.spec import load_op, load_workloads

from fi_helpers import OPS, bundle, first_candidate, workloads

CASES = [(op, d.value) for op in OPS for d in bundle(op).spec.dtypes]


def _json(model) -> dict:
    """The record as the JSON a file would hold, checked to lose nothing on the way back."""
    data = json.loads(model.model_dump_json())
    assert type(model).model_validate(data) == model
    return data


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{o}-{d}" for o, d in CASES])
def test_definition_round_trip(op, dtype, tmp_path):
    b = bundle(op)
    spec = b.spec
    d = export_definition(b, dtype)
    assert d.name == f"{op}_{dtype}"
    ws = [w for w in workloads(op) if w.dtype.value == dtype] or \
        [Workload(op=op, axes=workloads(op)[0].axes, dtype=dtype)]
    traces = export_workloads(ws, spec)
    assert all(t.definition == d.name and t.is_workload_trace for t in traces)
    sol = export_solution(first_candidate(b, ws[0]), spec, dtype, destination_passing_style=True)

    imported, notes = import_definition(_json(d), tmp_path / "ops", workloads=[_json(t) for t in traces],
                                        solution=_json(sol))
    assert notes == []
    again = load_op(tmp_path / "ops" / d.name)  # what `kernelloop optimize` would load
    s2 = again.spec
    assert s2 == imported.spec and s2.name == d.name
    assert [t.name for t in s2.inputs] == [t.name for t in spec.inputs]
    assert [t.name for t in s2.outputs] == [t.name for t in spec.outputs]
    for t2, t in zip([*s2.inputs, *s2.outputs], [*spec.inputs, *spec.outputs]):
        assert t2.shape == t.shape
        assert s2.tensor_dtype(t2, s2.dtypes[0]) == spec.tensor_dtype(t, s2.dtypes[0])
    assert s2.dtypes[0].value == dtype
    assert s2.scalars == spec.scalars
    assert {k: (a.min, a.max) for k, a in s2.axes.items()} == {k: (a.min, a.max) for k, a in spec.axes.items()}
    # the bytes formula import derives (each tensor once) is a lower bound of the op's own on every workload
    for w in ws:
        assert s2.bytes_moved(w.axes, w.dtype) <= spec.bytes_moved(w.axes, w.dtype) * 1.0001

    wl2 = load_workloads(tmp_path / "ops" / d.name / "workloads.toml", s2)
    assert [(w.axes, w.dtype) for w in wl2] == [(w.axes, w.dtype) for w in ws]

    ref1, ref2 = b.folder / spec.reference, again.folder / s2.reference
    for k, w in enumerate(ws[:2]):
        inputs = make_inputs(spec, w, seed=1234 + k)
        want, got = truth(spec, ref1, inputs), truth(s2, ref2, inputs)
        assert len(got) == len(want) == len(spec.outputs)
        for g, x in zip(got, want):
            assert g.dtype == x.dtype and torch.equal(g, x)
        eager1 = load_reference(str(ref1))(*inputs, **spec.scalars)
        eager2 = load_reference(str(ref2))(*inputs, **s2.scalars)
        eager1, eager2 = ([e] if isinstance(e, torch.Tensor) else list(e) for e in (eager1, eager2))
        assert all(torch.equal(a, c) for a, c in zip(eager2, eager1))


def test_exported_definition_fields():
    """The fields as the format spells them: float16 etc., var/const axes, scalars as shape-null inputs,
    axis bounds as constraints, a `run` whose scalar defaults are the op's values."""
    d = export_definition(bundle("layernorm"), "bf16")
    data = json.loads(d.model_dump_json())
    assert data["inputs"]["x"] == {"shape": ["M", "N"], "dtype": "bfloat16", "description": None}
    assert data["inputs"]["eps"]["shape"] is None and data["inputs"]["eps"]["dtype"] == "float32"
    assert list(data["inputs"]) == ["x", "weight", "bias", "eps"]
    assert data["axes"]["M"]["type"] == "var" and data["op_type"] == "layernorm"
    ns: dict = {}
    exec(d.reference, ns)
    x = torch.randn(3, 8, dtype=torch.float64)
    w, bias = torch.rand(8, dtype=torch.float64), torch.rand(8, dtype=torch.float64)
    assert torch.allclose(ns["run"](x, w, bias), torch.nn.functional.layer_norm(x, (8,), w, bias, 1e-5))
    att = export_definition(bundle("attention"))
    assert att.constraints == ["D >= 64", "D <= 128", "D == 64 or D == 128", "H % HKV == 0"]   # bounds, then the domain
    f32 = export_definition(bundle("gemm_f32out"), "fp16")
    assert f32.inputs["a"].dtype.value == "float16" and f32.outputs["c"].dtype.value == "float32"
    assert Definition.model_validate_json(f32.model_dump_json()) == f32
    assert Trace and Solution  # the public names exist


def test_an_op_whose_inputs_are_generated_data_is_refused_by_name():
    from kernelloop.base.builtin import ops_dir
    from kernelloop.core.spec import load_op
    from kernelloop.deliver.interop.errors import InteropError
    from kernelloop.deliver.interop.export import export_definition
    with pytest.raises(InteropError, match="csr_row_ptr generator"):
        export_definition(load_op(ops_dir() / "spmv_csr"))
