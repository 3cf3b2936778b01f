"""Kernel families read the discovered signatures: interfaces, axes, the eps as a scalar, pattern keys that
survive another model, another size and another eps, and the reasons a family gives when it does not fit."""

from __future__ import annotations

import pytest
import torch

from kernelloop.deliver.fuse import discover
from kernelloop.deliver.fuse.codegen import CodegenError, epilogue_source
from kernelloop.deliver.fuse.plans import plan_candidate
from kernelloop.deliver.fuse.records import Step
from kernelloop.deliver.fuse.table import pattern_key

pytest.importorskip("transformers")
from kernelloop.deliver.capture import models  # noqa: E402


def _plans(report):
    out = {}
    for c in report.candidates:
        plans, refused = plan_candidate(c)
        for p in plans:
            out.setdefault(p.kind, []).append((c, p))
        for r in refused:
            out.setdefault("refused", []).append(r.reason)
    return out


@pytest.fixture(scope="module")
def llama():
    return _plans(discover(*models.build("llama-tiny")))


def test_llama_plans(llama):
    assert sorted(k for k in llama if k != "refused") == ["add_norm", "dual_gemm", "gate_mul", "rotary"]
    both = next(p for _, p in llama["add_norm"] if len(p.outputs) == 2)
    assert [x.name for x in both.inputs] == ["a", "b", "weight"] and [x.name for x in both.outputs] == ["s", "y"]
    assert both.scalars == {"eps": 1e-6} and both.pinned["NORM"] == "rms" and both.pinned["ROUND_NORMED"] == 1
    assert both.workloads == [{"M": 16, "N": 64}] * 3
    (c, dual), = llama["dual_gemm"]
    assert dual.axes == {"M": "s0*s1", "N": "s3", "K": "s2"} and dual.workloads[0] == {"M": 16, "N": 128, "K": 64}
    assert "(acc0 / (1.0 + tl.exp(-(acc0))))" in dual.epilogue and dual.pinned["DUAL"] == 1
    (_, tail), = llama["gate_mul"]
    assert tail.steps == [1, 3] and [x.operand for x in tail.inputs] == ["%0", "%2"]
    (_, rot), = llama["rotary"]
    assert rot.workloads[0] == {"B": 2, "S": 8, "HQ": 4, "HK": 2, "D": 64, "C": 1}
    assert [v.target for v in rot.inputs[0].views] == ["aten.transpose.int"]


def test_pattern_keys_survive_another_family_size_and_eps(llama):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    cfg = Qwen2Config(hidden_size=96, num_hidden_layers=1, num_attention_heads=3, num_key_value_heads=1, head_dim=32,
                      intermediate_size=160, vocab_size=64, rms_norm_eps=1e-5, use_cache=False,
                      attn_implementation="sdpa")
    torch.manual_seed(0)
    qwen = Qwen2ForCausalLM(cfg).to(torch.bfloat16).eval()
    other = _plans(discover(qwen, (torch.randint(0, 64, (3, 5)),)))
    keys = {k: {pattern_key(c.signature, p) for c, p in v} for k, v in llama.items() if k != "refused"}
    for kind in ("add_norm", "dual_gemm", "gate_mul", "rotary"):
        assert {pattern_key(c.signature, p) for c, p in other[kind]} <= keys[kind], kind
    both = next(p for _, p in other["add_norm"] if len(p.outputs) == 2)
    assert both.scalars == {"eps": 1e-5} and both.workloads[0] == {"M": 15, "N": 96}


def test_gpt2_plans_and_refusal():
    g = _plans(discover(*models.build("gpt2-tiny")))
    (c, epi), = g["gemm_epilogue"]
    assert epi.pinned == {"DUAL": 0, "TRANS_B": 0, "HAS_BIAS": 1} and [x.name for x in epi.inputs] == ["a", "b", "bias"]
    assert "_tanh(" in epi.epilogue and epi.workloads[0] == {"M": 16, "N": 512, "K": 128}
    (_, tail), = g["act_tail"]
    assert tail.steps == list(range(1, 10)) and tail.inputs[0].operand == "%0" and tail.pinned == {"N_IN": 1}
    ln = next(p for _, p in g["add_norm"] if len(p.outputs) == 2)
    assert ln.pinned["NORM"] == "layer" and ln.pinned["HAS_BIAS"] == 1 and ln.scalars == {"eps": 1e-5}
    assert any("broadcasts" in r for r in g["refused"])   # the embedding add: [B, S, H] + [1, S, H]


def test_codegen_refuses_what_it_cannot_translate():
    steps = [Step(op="aten.linear.default", operands=["in0", "p1"], shape=["s0", "s1"], dtype="bfloat16"),
             Step(op="aten.cumsum.default", operands=["%0"], consts=["-1"], shape=["s0", "s1"], dtype="bfloat16")]
    with pytest.raises(CodegenError, match="cumsum"):
        epilogue_source(steps, {"%0": "acc0"}, {}, "%1", ["acc0"])
    steps[1] = Step(op="aten.pow.Tensor_Scalar", operands=["%0"], consts=["0.5"], shape=["s0", "s1"],
                    dtype="bfloat16")
    with pytest.raises(CodegenError, match="integer powers"):
        epilogue_source(steps, {"%0": "acc0"}, {}, "%1", ["acc0"])
