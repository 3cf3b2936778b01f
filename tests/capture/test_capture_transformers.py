"""capture() on the built-in tiny transformers models (llama-tiny, qwen2-tiny, gpt2-tiny) on the CPU: the cards,
their mapping and counts, the census, the JSON round trip and the workload files."""


import pytest

pytest.importorskip("transformers")

from kernelloop.base.builtin import ops_dir
from kernelloop.deliver.capture import CaptureReport, capture, write_workloads  # noqa: E402
from kernelloop.deliver.capture.models import MODELS, build, llama_tiny  # noqa: E402
from kernelloop.base.records import DType  # noqa: E402
from kernelloop.core.spec import load_op, load_workloads  # noqa: E402

OPS = ops_dir()
LAYERS = (0, 1)


@pytest.fixture(scope="module")
def llama() -> CaptureReport:
    model, inputs = build("llama-tiny")
    assert inputs[0].shape == (2, 8)
    return capture(model, inputs, ops_root=OPS)


@pytest.fixture(scope="module")
def gpt2() -> CaptureReport:
    return capture(*build("gpt2-tiny"), ops_root=OPS)


def _axes_by_path(report, op):
    return {p: c.axes for c in report.cards if c.op == op for p in c.paths}


def test_llama_rmsnorm_cards(llama):
    cards = [c for c in llama.cards if c.short_class == "LlamaRMSNorm"]
    assert sum(c.calls for c in cards) == 5                    # 2 layers x 2 norms + the final norm
    paths = {p for c in cards for p in c.paths}
    assert paths == {f"model.layers.{i}.{n}" for i in LAYERS for n in ("input_layernorm", "post_attention_layernorm")} \
        | {"model.norm"}
    for c in cards:
        assert c.kind == "module" and c.op == "rmsnorm" and c.dtype is DType.bf16 and c.reason is None
        assert c.axes == {"M": 16, "N": 64} and c.params["eps"] == pytest.approx(1e-6)
        # the module arrives decomposed: its card owns the pow / mean / rsqrt / mul it issued
        overloads = {v.overload for v in c.aten}
        assert {"aten.pow.Tensor_Scalar", "aten.mean.dim", "aten.rsqrt.default", "aten.mul.Tensor"} <= overloads
        assert all(v.device_time_us is None for v in c.aten) and c.device_time_us is None


def test_llama_linear_cards(llama):
    want = {}
    for i in LAYERS:
        a, m = f"model.layers.{i}.self_attn", f"model.layers.{i}.mlp"
        want |= {f"{a}.q_proj": (16, 256, 64), f"{a}.k_proj": (16, 128, 64), f"{a}.v_proj": (16, 128, 64),
                 f"{a}.o_proj": (16, 64, 256), f"{m}.gate_proj": (16, 128, 64), f"{m}.up_proj": (16, 128, 64),
                 f"{m}.down_proj": (16, 64, 128)}
    want["lm_head"] = (16, 128, 64)
    got = {p: (ax["M"], ax["N"], ax["K"]) for p, ax in _axes_by_path(llama, "gemm_nt").items()}
    assert got == want
    linear = [c for c in llama.cards if c.short_class == "Linear"]
    assert sum(c.calls for c in linear) == 15 and all(c.op == "gemm_nt" and c.params["bias"] is False for c in linear)
    for c in linear:
        mm = [v for v in c.aten if v.overload == "aten.mm.default"]
        assert len(mm) == 1 and mm[0].count == c.calls
        assert mm[0].tensors[0].shape == (c.axes["M"], c.axes["K"]) and mm[0].tensors[1].shape == (c.axes["K"],
                                                                                                   c.axes["N"])


def test_llama_attention_card(llama):
    cards = [c for c in llama.cards if c.target in ("attention", "attention_causal")]
    assert len(cards) == 1
    c = cards[0]
    assert c.kind == "aten" and c.short_class == "LlamaAttention"
    assert c.overload == "aten._scaled_dot_product_flash_attention_for_cpu.default"   # what SDPA runs on the CPU
    assert c.op == "attention_causal" and c.params["is_causal"] is True and c.params["gqa"] is True
    assert c.axes == {"B": 2, "H": 4, "HKV": 2, "S": 8, "D": 64}
    assert c.paths == [f"model.layers.{i}.self_attn" for i in LAYERS] and c.calls == 2
    assert [t.shape for t in c.inputs] == [(2, 4, 8, 64), (2, 2, 8, 64), (2, 2, 8, 64)]
    assert not [c for c in llama.cards if c.target == "softmax"]                        # SDPA: no softmax call


def test_llama_eager_attention_gives_a_softmax_card():
    report = capture(*llama_tiny(attn_implementation="eager"), ops_root=OPS)
    soft = [c for c in report.cards if c.target == "softmax"]
    assert len(soft) == 1 and soft[0].op == "softmax" and soft[0].overload == "aten._softmax.default"
    assert soft[0].axes == {"M": 2 * 4 * 8, "N": 8} and soft[0].dtype is DType.fp32  # upcast to fp32 by Llama
    assert not [c for c in report.cards if c.target and c.target.startswith("attention")]


def test_llama_census(llama):
    census = {e.overload: e for e in llama.census}
    assert "aten.mm.default" not in census                     # every mm is inside a mapped Linear card
    assert not any("scaled_dot_product" in o for o in census)
    assert census["aten.silu.default"].count == 2
    assert census["aten.silu.default"].module_classes == ["transformers.activations.SiLUActivation"]
    compute = [e for e in llama.census if not e.view]
    assert [e.count for e in compute] == sorted((e.count for e in compute), reverse=True)
    views = [i for i, e in enumerate(llama.census) if e.view]
    assert views and views == list(range(len(compute), len(llama.census)))
    assert sum(e.count for e in llama.census) + sum(v.count for c in llama.mapped for v in c.aten) == llama.aten_calls


def test_report_json_round_trip(llama, tmp_path):
    path = llama.save(tmp_path / "cards.json")
    back = CaptureReport.load(path)
    assert back == llama and [c.id for c in back.cards] == [c.id for c in llama.cards]
    assert back.card_for("model.norm")[0].op == "rmsnorm"
    assert llama.inputs["0"].shape == (2, 8) and llama.inputs["0"].dtype == "int64"
    assert llama.device == "cpu" and llama.profiled is False and llama.device_time_us is None


def test_workload_files_load(llama, tmp_path):
    written = write_workloads(llama, tmp_path / "wl", OPS)
    assert set(written) == {"rmsnorm", "gemm_nt", "attention_causal"}
    loaded = {op: load_workloads(path, load_op(OPS / op).spec) for op, path in written.items()}
    assert [(w.axes, w.dtype, w.weight) for w in loaded["rmsnorm"]] == [({"M": 16, "N": 64}, DType.bf16, 5.0)]
    gemm = {(w.axes["M"], w.axes["N"], w.axes["K"]): w.weight for w in loaded["gemm_nt"]}
    assert gemm == {(16, 256, 64): 2.0, (16, 128, 64): 9.0, (16, 64, 256): 2.0, (16, 64, 128): 2.0}
    assert [w.axes for w in loaded["attention_causal"]] == [{"B": 2, "H": 4, "HKV": 2, "S": 8, "D": 64}]
    assert not list((tmp_path / "wl").glob(".*.tmp"))


def test_gpt2_conv1d_and_layernorm(gpt2):
    ln = [c for c in gpt2.cards if c.short_class == "LayerNorm"]
    assert sum(c.calls for c in ln) == 5 and all(c.op == "layernorm" and c.axes == {"M": 16, "N": 128} for c in ln)
    assert {p for c in ln for p in c.paths} == {f"transformer.h.{i}.ln_{j}" for i in LAYERS for j in (1, 2)} \
        | {"transformer.ln_f"}
    got = {p: (ax["M"], ax["N"], ax["K"]) for p, ax in _axes_by_path(gpt2, "gemm_bias").items()}
    want = {}
    for i in LAYERS:
        want |= {f"transformer.h.{i}.attn.c_attn": (16, 384, 128), f"transformer.h.{i}.attn.c_proj": (16, 128, 128),
                 f"transformer.h.{i}.mlp.c_fc": (16, 512, 128), f"transformer.h.{i}.mlp.c_proj": (16, 128, 512)}
    assert got == want
    assert all(c.short_class == "Conv1D" and "aten.addmm.default" in {v.overload for v in c.aten}
               for c in gpt2.cards if c.op == "gemm_bias")
    assert _axes_by_path(gpt2, "gemm_nt") == {"lm_head": {"M": 16, "N": 128, "K": 128}}
    attn = [c for c in gpt2.cards if c.op == "attention_causal"]
    assert len(attn) == 1 and attn[0].axes == {"B": 2, "H": 2, "HKV": 2, "S": 8, "D": 64}


def test_qwen2_linear_with_bias_is_unmapped_with_a_reason():
    report = capture(*build("qwen2-tiny"), ops_root=OPS)
    biased = [c for c in report.cards if c.short_class == "Linear" and c.params["bias"]]
    assert {p.rsplit(".", 1)[-1] for c in biased for p in c.paths} == {"q_proj", "k_proj", "v_proj"}
    for c in biased:
        assert c.op is None and c.target == "gemm_nt"
        assert c.reason == "Linear with bias: no op with b as [N, K] plus bias"
    # their addmm calls are not covered by a mapped card: they are on the to-do list
    addmm = next(e for e in report.census if e.overload == "aten.addmm.default")
    assert addmm.count == 6 and addmm.module_classes == ["torch.nn.modules.linear.Linear"]


def test_builtin_models_are_seeded_and_eval():
    assert set(MODELS) == {"llama-tiny", "qwen2-tiny", "gpt2-tiny"}
    m1, (ids1,) = build("gpt2-tiny", seed=3, batch=3, seq=5)
    m2, (ids2,) = build("gpt2-tiny", seed=3, batch=3, seq=5)
    assert ids1.shape == (3, 5) and bool((ids1 == ids2).all()) and not m1.training
    p1, p2 = next(m1.parameters()), next(m2.parameters())
    assert p1.dtype.is_floating_point and str(p1.dtype) == "torch.bfloat16" and bool((p1 == p2).all())
    with pytest.raises(KeyError, match="llama-tiny"):
        build("nope")
