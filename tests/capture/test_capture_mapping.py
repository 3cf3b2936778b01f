"""capture() on tiny custom modules (no transformers): each mapping rule, each reason, and a failing model."""

from pathlib import Path

import pytest
import torch
from torch import nn

from capture_tiny_models import Attn, Block, MyRMSNorm, OffsetRMSNorm, Tiny, TwoOffsetRMSNorm, build, build_raises

from kernelloop.base.builtin import ops_dir
from kernelloop.deliver.capture import CaptureError, capture, write_workloads
from kernelloop.base.records import DType

OPS = ops_dir()


def _only(report, **match):
    cards = [c for c in report.cards if all(getattr(c, k) == v for k, v in match.items())]
    assert len(cards) == 1, [(c.short_class, c.target, c.reason) for c in report.cards]
    return cards[0]


def test_custom_model_cards():
    report = capture(*build(), ops_root=OPS)
    norm = _only(report, short_class="MyRMSNorm")
    assert norm.op == "rmsnorm" and norm.calls == 2 and norm.paths == ["blocks.0.norm", "blocks.1.norm"]
    soft = _only(report, target="softmax")
    assert soft.kind == "aten" and soft.op == "softmax" and soft.axes == {"M": 16, "N": 128}
    assert soft.module_class == "capture_tiny_models.Block" and soft.paths == ["blocks.0", "blocks.1"]
    head = _only(report, paths=["head"])
    assert head.op == "gemm_nt" and head.axes == {"M": 16, "N": 64, "K": 128} and head.dtype is DType.bf16


def test_float64_is_unmapped_with_a_reason():
    model = nn.Sequential(nn.RMSNorm(64, eps=1e-6), nn.LayerNorm(64)).double().eval()
    report = capture(model, torch.randn(3, 64, dtype=torch.float64), ops_root=OPS)
    rms = _only(report, target="rmsnorm")
    assert rms.op is None and rms.reason == "dtype float64 not supported by rmsnorm (fp16, bf16, fp32)"
    assert rms.axes == {"M": 3, "N": 64}          # derived even though unmapped
    ln = _only(report, target="layernorm")
    assert ln.op is None and ln.reason.startswith("dtype float64 not supported by layernorm")
    # nothing mapped: every ATen call is in the census
    assert sum(e.count for e in report.census) == report.aten_calls


def test_eps_bias_and_layout_reasons():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_eps = nn.LayerNorm(64, eps=1e-6)
            self.ln_nobias = nn.LayerNorm(64, bias=False)
            self.rms_eps = nn.RMSNorm(64, eps=1e-5)
            self.lin = nn.Linear(8, 64, bias=False)

        def forward(self, x):
            y = self.lin(x.transpose(0, 1))           # [8, 4] viewed as [4, 8]: not contiguous
            return self.rms_eps(self.ln_nobias(self.ln_eps(y)))

    report = capture(Net().eval(), torch.randn(8, 4), ops_root=OPS)
    assert _only(report, paths=["ln_eps"]).reason == "eps 1e-06 differs from the layernorm spec's eps 1e-05"
    assert _only(report, paths=["ln_nobias"]).reason == "no bias (bias=False): layernorm needs weight and bias"
    assert _only(report, paths=["rms_eps"]).reason == "eps 1e-05 differs from the rmsnorm spec's eps 1e-06"
    lin = _only(report, paths=["lin"])
    assert lin.reason == "non-contiguous input" and lin.inputs[0].contiguous is False
    assert lin.axes == {"M": 4, "N": 64, "K": 8}
    assert not report.mapped


def test_gemm_nt_dtype_fp32_is_not_in_its_spec():
    report = capture(nn.Linear(16, 32, bias=False).eval(), torch.randn(4, 16), ops_root=OPS)
    assert report.cards[0].reason == "dtype float32 not supported by gemm_nt (fp16, bf16)"


def test_rmsnorm_by_name_is_checked_numerically():
    ok = capture(MyRMSNorm(64).bfloat16().eval(), torch.randn(4, 64, dtype=torch.bfloat16), ops_root=OPS)
    assert ok.cards[0].op == "rmsnorm"
    gemma = capture(OffsetRMSNorm(64).bfloat16().eval(), torch.randn(4, 64, dtype=torch.bfloat16), ops_root=OPS)
    card = gemma.cards[0]
    assert card.op == "rmsnorm_offset" and card.reason is None and card.axes == {"M": 4, "N": 64}
    off = capture(TwoOffsetRMSNorm(64).bfloat16().eval(), torch.randn(4, 64, dtype=torch.bfloat16), ops_root=OPS)
    assert off.cards[0].op is None and off.cards[0].target == "rmsnorm"
    assert off.cards[0].reason.startswith("output differs from x * rsqrt(mean(x^2) + eps) * weight")
    assert "(1 + weight) variant" in off.cards[0].reason
    # the check's own torch calls are not recorded as the model's
    assert off.aten_calls == ok.aten_calls + 1                 # the model's (2 + weight) add, nothing else


def test_recognised_module_owns_its_children():
    class Wrapped(nn.Module):  # an RMSNorm-named class that calls a Linear inside: the Linear gets no card
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(32))
            self.eps = 1e-6
            self.inner = nn.Linear(32, 32, bias=False)

        def forward(self, x):
            return self.inner(x)

    Wrapped.__name__ = Wrapped.__qualname__ = "WrappedRMSNorm"
    report = capture(Wrapped().bfloat16().eval(), torch.randn(2, 32, dtype=torch.bfloat16), ops_root=OPS)
    assert len(report.cards) == 1 and report.cards[0].short_class == "WrappedRMSNorm"
    assert "aten.mm.default" in {v.overload for v in report.cards[0].aten}
    assert report.cards[0].op is None                           # not an RMSNorm by its output


@pytest.mark.parametrize("kwargs, op, reason", [
    (dict(causal=True), "attention_causal", None),
    (dict(causal=False, heads=4, kv_heads=2), "attention", None),
    (dict(mask=True), None, "an explicit mask / bias [8, 8]: the attention ops take none"),
    (dict(s_kv=12), None, "S_q = 8 differs from S_kv = 12 (decode or cross attention)"),
    (dict(d=32), None, "D = 32 is outside attention_causal's [64, 128]"),
])
def test_attention_rules(kwargs, op, reason):
    report = capture(Attn(**kwargs).eval(), torch.randn(2, 8, 16, dtype=torch.bfloat16), ops_root=OPS)
    card = _only(report, kind="aten")
    assert card.op == op and card.reason == reason
    if op is not None:
        assert card.axes["HKV"] == kwargs.get("kv_heads", 4) and card.dtype is DType.bf16


def test_softmax_over_another_dim_is_unmapped():
    class Soft(nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=0)

    report = capture(Soft(), torch.randn(4, 8, dtype=torch.float16), ops_root=OPS)
    assert _only(report, target="softmax").reason == "softmax over dim 0, not the last"


def test_a_model_that_raises_gives_a_capture_error_naming_the_module(tmp_path):
    model, inputs = build_raises()
    with pytest.raises(CaptureError) as info:
        capture(model, inputs, ops_root=OPS)
    err = info.value
    assert err.model_class == "capture_tiny_models.Raises" and err.module_path == "inner.bad"
    assert isinstance(err.error, RuntimeError) and "boom inside" in str(err) and err.__cause__ is err.error
    # the hooks are gone: the model runs normally afterwards without a recorder
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())


def test_profile_needs_cuda_inputs():
    with pytest.raises(ValueError, match="profile needs CUDA"):
        capture(Tiny().eval(), torch.randn(2, 64), profile=True, ops_root=OPS)


def test_inputs_by_keyword_and_workloads_merge(tmp_path):
    model, (x,) = build()
    report = capture(model, {"x": x}, ops_root=OPS)
    assert list(report.inputs) == ["x"] and report.inputs["x"].shape == (2, 8, 64)
    written = write_workloads(report, tmp_path, OPS)
    assert set(written) == {"rmsnorm", "gemm_nt", "softmax"}
    text = written["gemm_nt"].read_text()
    assert text.count("[[workload]]") == 2 and 'op = "gemm_nt"' in text   # proj (x2 merged) and head
    assert "weight = 2.0" in text


def test_the_package_is_callable_as_the_top_level_api_says():
    import kernelloop
    model, inputs = build()
    report = kernelloop.capture(model, inputs, ops_root=OPS)
    assert report == capture(model, inputs, ops_root=OPS) and report.cards[0].op == "rmsnorm"


def test_device_times_partition_the_gpu_timeline():
    """_device_times on a made-up profile: kernels inside a kl#<seq> projection go to that call, those inside the
    kl-mapping projection (the mapping's checks) leave the total, the projections themselves are not counted."""
    from types import SimpleNamespace as NS

    from torch.autograd import DeviceType

    from kernelloop.deliver.capture.core import _device_times

    def ev(name, start, end, *, ann=False, dev=DeviceType.CUDA):
        return NS(name=name, device_type=dev, is_user_annotation=ann, time_range=NS(start=start, end=end))

    events = [ev("kl#0", 0, 10, ann=True), ev("k_a", 1, 4), ev("k_b", 5, 9),       # call 0: 3 + 4
              ev("kl-mapping", 10, 20, ann=True), ev("check", 11, 19),               # the check: out of the total
              ev("kl#2", 20, 30, ann=True), ev("k_c", 21, 29),                       # call 2: 8
              ev("stray", 31, 33),                                                   # in no range: total only
              ev("aten::mm", 0, 40, dev=DeviceType.CPU)]
    times, total = _device_times(NS(events=lambda: events))
    assert times == {0: 7, 2: 8} and total == 17
