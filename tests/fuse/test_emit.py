"""The fused op's reference is the model's own subgraph: run on the values the model computed, it gives back the
model's values bit for bit (bf16), and in the truth's float64 its casts keep float64."""

from __future__ import annotations

import functools
import importlib.util

import pytest
import torch
import torch.fx as fx

from kernelloop.deliver.fuse import graph as G
from kernelloop.deliver.fuse.discover import discover_graph
from kernelloop.deliver.fuse.emit import EmitError, Port, reference_source
from kernelloop.deliver.fuse.opgen import reference_for
from kernelloop.deliver.fuse.plans import plan_candidate

pytest.importorskip("transformers")
from kernelloop.deliver.capture import models  # noqa: E402


class _Recorder(fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm)
        self.values: dict[str, object] = {}

    def run_node(self, n):
        out = super().run_node(n)
        self.values[n.name] = out
        return out


def _load(source: str, tmp_path, name: str):
    f = tmp_path / f"{name}.py"
    f.write_text(source)
    spec = importlib.util.spec_from_file_location(name, f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.reference


@functools.lru_cache(maxsize=2)
def _model_values(name: str):
    model, inputs = models.build(name)
    ep = G.export_program(model, inputs)
    rec = _Recorder(ep.module())
    with torch.no_grad():
        rec.run(*inputs)
    return model, ep, discover_graph(model, ep.graph), rec.values


def _op_tensor(value: torch.Tensor, port, workload) -> torch.Tensor:
    """The op's argument for a subgraph value: the interface's views undone, the rows flattened."""
    for v in reversed(port.views):
        value = value.transpose(*v.args) if v.target == "aten.transpose.int" else value.squeeze(v.args[0])
    return value.reshape([workload[a] for a in port.axes])


@pytest.mark.parametrize("model_name", ["llama-tiny", "gpt2-tiny"])
def test_reference_reproduces_the_model_bit_for_bit(model_name, tmp_path):
    model, ep, report, values = _model_values(model_name)
    params = G.param_names(ep.graph)
    sig_of_param = {p: fqn for p, fqn in ep.graph_signature.inputs_to_parameters.items()}
    state = dict(model.named_parameters())
    checked = set()
    for c in report.candidates:
        plans, _ = plan_candidate(c)
        for plan in plans:
            for occ_i, occ in enumerate(c.occurrences):
                steps = G.step_nodes(ep.graph, occ.nodes)
                operands = G.operand_nodes(steps, params)
                ref = _load(reference_for(plan, steps, operands, torch.bfloat16), tmp_path, f"r{len(checked)}")

                def value(node):
                    if node.name in sig_of_param:
                        return state[sig_of_param[node.name]]
                    return values[node.name]
                wl = plan.workloads[occ_i]
                args = [_op_tensor(value(operands[p.operand]), p, wl) for p in plan.inputs]
                with torch.no_grad():
                    got = ref(*args, **plan.scalars)
                got = got if isinstance(got, tuple) else (got,)
                for p, g in zip(plan.outputs, got):
                    want = _op_tensor(values[operands[p.operand].name], p, wl)
                    assert g.dtype == torch.bfloat16 and torch.equal(g, want), (plan.kind, p.name)
                checked.add(plan.kind)
    assert checked == ({"add_norm", "dual_gemm", "gate_mul", "rotary"} if model_name == "llama-tiny"
                       else {"add_norm", "gemm_epilogue", "act_tail"})


def test_truth_keeps_float64_and_eps_is_the_scalar(tmp_path):
    _, ep, report, _ = _model_values("llama-tiny")
    c = next(c for c in report.by_family("residual_add_norm") if len(c.signature.outputs) == 2)
    (plan,), _ = plan_candidate(c)
    steps = G.step_nodes(ep.graph, c.occurrences[0].nodes)
    src = reference_for(plan, steps, G.operand_nodes(steps, G.param_names(ep.graph)), torch.bfloat16)
    assert "def reference(a, b, weight, eps):" in src and "1e-06" not in src   # the model's eps became the scalar
    ref = _load(src, tmp_path, "truth")
    a, b = torch.randn(5, 64, dtype=torch.float64), torch.randn(5, 64, dtype=torch.float64)
    s, y = ref(a, b, torch.ones(64, dtype=torch.float64), eps=1e-5)
    assert s.dtype == y.dtype == torch.float64
    want = (a + b) * torch.rsqrt(((a + b) ** 2).mean(-1, keepdim=True) + 1e-5)
    torch.testing.assert_close(y, want, rtol=1e-12, atol=1e-12)


def test_a_view_that_moves_the_last_dim_is_refused():
    g = fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.empty(4, 6)
    t = g.call_function(torch.ops.aten.t.default, (x,))
    t.meta["val"] = torch.empty(6, 4)
    r = g.call_function(torch.ops.aten.relu.default, (t,))
    r.meta["val"] = torch.empty(6, 4)
    with pytest.raises(EmitError, match="leading dimensions"):
        reference_source([t, r], [Port("x", x)], [Port("y", r)], model_dtype=torch.float32, flatten_rows=True)
