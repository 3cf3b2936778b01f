"""Fusion discovery on the built-in tiny models and on small synthetic modules."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from kernelloop.deliver.fuse import DiscoveryReport, discover

pytest.importorskip("transformers")
from kernelloop.deliver.capture import models  # noqa: E402


@pytest.fixture(scope="module")
def llama() -> DiscoveryReport:
    return discover(*models.build("llama-tiny"))


@pytest.fixture(scope="module")
def gpt2() -> DiscoveryReport:
    return discover(*models.build("gpt2-tiny"))


def _layers(c) -> list[str]:
    return [p.split(".")[2] for p in (o.module_paths[0] for o in c.occurrences)]


def test_llama_swiglu_one_per_layer(llama):
    (c,) = llama.by_family("gemm_gate")
    assert c.signature.op_sequence == ["aten.linear.default", "aten.silu.default", "aten.linear.default",
                                       "aten.mul.Tensor"]
    assert [o.module_paths[0] for o in c.occurrences] == ["model.layers.0.mlp.gate_proj",
                                                          "model.layers.1.mlp.gate_proj"]
    lin1, silu, lin2, mul = c.signature.steps
    assert lin1.operands[0] == lin2.operands[0] == "in0"          # both GEMMs read the same x
    assert mul.operands == ["%1", "%2"] and c.signature.outputs == ["%3"]
    assert lin1.shape == ["s0", "s1", "s3"] and lin1.dtype == "bfloat16"
    assert c.occurrences[0].bindings == {"s0": 2, "s1": 8, "s2": 64, "s3": 128}
    # gate, silu and up outputs [2, 8, 128] bf16 = 4096 bytes each, written and read back: 3 x 2 x 4096
    assert c.saved_bytes_per_occurrence == 24576 and c.saved_bytes_total == 2 * 24576


def test_llama_residual_add_rmsnorm_returns_both(llama):
    both = [c for c in llama.by_family("residual_add_norm") if len(c.signature.outputs) == 2]
    (c,) = both
    ops = c.signature.op_sequence
    assert ops[0] == "aten.add.Tensor" and "aten.rsqrt.default" in ops and "aten.mean.dim" in ops
    assert c.signature.outputs == ["%0", f"%{len(ops) - 1}"]      # the sum and the normed value
    # layer 0 post-attention, layer 1 input and post-attention (layer 0's input norm reads the embedding)
    assert len(c.occurrences) == 3
    assert [o.module_paths[-1] for o in c.occurrences] == [
        "model.layers.0.post_attention_layernorm", "model.layers.1.input_layernorm",
        "model.layers.1.post_attention_layernorm"]
    # the last residual add feeds only the final norm: a separate signature (one output)
    (last,) = [c for c in llama.by_family("residual_add_norm") if len(c.signature.outputs) == 1]
    assert last.occurrences[0].module_paths[-1] == "model.norm"
    assert last.saved_bytes_total > c.saved_bytes_per_occurrence  # its sum is no longer written at all


def test_llama_rotary_q_and_k_per_layer(llama):
    (c,) = llama.by_family("rotary")
    assert [o.module_paths for o in c.occurrences] == [["model.layers.0.self_attn"], ["model.layers.1.self_attn"]]
    ops = c.signature.op_sequence
    assert ops.count("aten.neg.default") == 2 and ops.count("aten.cat.default") == 2   # q and k
    assert len(c.signature.outputs) == 2
    shapes = {tuple(s.shape) for s in c.signature.steps if s.op == "aten.add.Tensor"}
    assert shapes == {("s0", "s1", "s2", "s3"), ("s0", "s0", "s2", "s3")}  # 4 q heads, 2 kv heads (= batch 2)


def test_llama_ranking_and_record_roundtrip(llama):
    assert llama.ok and [c.rank for c in llama.candidates] == list(range(1, len(llama.candidates) + 1))
    scores = [c.score for c in llama.candidates]
    assert scores == sorted(scores, reverse=True)
    assert DiscoveryReport.from_json(llama.to_json()) == llama


def test_gpt2_gemm_bias_gelu_epilogue(gpt2):
    (c,) = gpt2.by_family("gemm_epilogue")
    ops = c.signature.op_sequence
    assert ops[0] == "aten.addmm.default" and "aten.tanh.default" in ops and ops[-1] == "aten.mul.Tensor"
    assert c.signature.steps[0].operands[0].startswith("p")      # the bias is a parameter operand of addmm
    assert [o.module_paths[0] for o in c.occurrences] == ["transformer.h.0.mlp.c_fc", "transformer.h.1.mlp.c_fc"]
    assert "s1 == s3*s4" in c.constraints                        # M = 16 = batch x seq, from the view
    # addmm output and 7 gelu intermediates, each [16, 512] bf16 = 16384 bytes, x 2
    assert c.saved_bytes_per_occurrence == 8 * 2 * 16384


def test_gpt2_add_layernorm(gpt2):
    cands = gpt2.by_family("residual_add_norm")
    assert all(c.signature.op_sequence[-1] == "aten.layer_norm.default" for c in cands)
    both = [c for c in cands if c.signature.op_sequence == ["aten.add.Tensor", "aten.layer_norm.default"]
            and len(c.signature.outputs) == 2]
    assert len(both) == 1 and len(both[0].occurrences) == 3
    assert both[0].saved_bytes_per_occurrence == 2 * 8 * 128 * 2   # the sum's read-back only


class _Chain(torch.nn.Module):
    """y = relu(x @ W^T + b) * 2: linear, relu, mul; optionally the relu output also returned."""

    def __init__(self, leak: bool = False):
        super().__init__()
        self.fc = torch.nn.Linear(16, 32)
        self.leak = leak

    def forward(self, x):
        h = torch.relu(self.fc(x))
        y = h * 2.0
        return (y, h) if self.leak else y


def test_bytes_by_hand():
    r = discover(_Chain(), (torch.randn(4, 16),))
    (c,) = r.candidates
    assert c.family == "gemm_epilogue"
    assert c.signature.op_sequence == ["aten.linear.default", "aten.relu.default", "aten.mul.Tensor"]
    # linear and relu outputs: 4 x 32 fp32 = 512 bytes each, written and read back: 2 x 2 x 512
    occ = c.occurrences[0]
    assert occ.intermediates == {"linear": 1024, "relu": 1024} and c.saved_bytes_total == 2048
    assert occ.bindings == {"s0": 32, "s1": 4, "s2": 16} or set(occ.bindings.values()) == {4, 16, 32}


def test_two_consumers_not_fused():
    r = discover(_Chain(leak=True), (torch.randn(4, 16),))
    (c,) = r.candidates
    # relu's output is also returned: the chain stops at it (linear + relu); the mul is not fused
    assert c.signature.op_sequence == ["aten.linear.default", "aten.relu.default"]
    assert c.occurrences[0].intermediates == {"linear": 1024}


class _NoExport(torch.nn.Module):
    def forward(self, x):
        if x.sum().item() > 0:     # data-dependent control flow: torch.export cannot trace it
            return x * 2
        return x


def test_export_failure_is_an_error_record():
    r = discover(_NoExport(), (torch.ones(3),))
    assert not r.ok and r.candidates == [] and r.error.stage == "export"
    assert "torch.export.export failed" in r.error.message
    assert DiscoveryReport.from_json(r.to_json()) == r
    bad = discover("not a model", ())
    assert bad.error.stage == "input"


def test_cli_json(tmp_path):
    from kernelloop.cli.app import app
    out = tmp_path / "d.json"
    res = CliRunner().invoke(app, ["fuse", "discover", "llama-tiny", "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout[res.stdout.index("{"):])
    assert {c["signature"]["family"] for c in data["candidates"]} >= {"gemm_gate", "rotary", "residual_add_norm"}
    assert DiscoveryReport.from_json(out.read_text()).candidates[0].rank == 1
    res = CliRunner().invoke(app, ["fuse", "discover", "no-such-model"])
    assert res.exit_code == 2


def test_llama_eager_scale_mask_softmax():
    r = discover(*models.llama_tiny(attn_implementation="eager"))
    (c,) = r.by_family("scale_mask_softmax")
    assert c.signature.op_sequence == ["aten.mul.Tensor", "aten.add.Tensor", "aten.softmax.int", "aten.to.dtype"]
    assert len(c.occurrences) == 2


def test_capture_weighting():
    from kernelloop.deliver.capture import capture
    model, inputs = models.build("llama-tiny")
    rep = capture(model, inputs)
    r = discover(model, inputs, capture_report=rep)
    assert r.weighted and all(c.share is not None and 0 < c.share <= 1 for c in r.candidates)
    assert all(c.score == pytest.approx(c.saved_bytes_total * c.share) for c in r.candidates)
