"""Gemma's residual add + RMSNorm, `x / rms(x) * (1 + weight)`: the add_norm plan pins the weight's offset and the
fused template applies it in the Triton interpreter (the plain RMSNorm template gives another function).

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import importlib.util  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelloop.deliver.fuse import discover  # noqa: E402
from kernelloop.deliver.fuse.opgen import template_source  # noqa: E402
from kernelloop.deliver.fuse.plans import plan_candidate  # noqa: E402

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def gemma_plans():
    """The add_norm plans of a one-layer Gemma2 with random weights (nothing downloaded)."""
    cfg = transformers.Gemma2Config(hidden_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                    head_dim=32, intermediate_size=128, vocab_size=64, use_cache=False,
                                    attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.Gemma2ForCausalLM(cfg).to(torch.bfloat16).eval()
    report = discover(model, (torch.randint(0, 64, (2, 8)),))
    assert report.error is None, report.error
    plans = [p for c in report.by_family("residual_add_norm") for p in plan_candidate(c)[0]]
    assert plans
    return plans


def test_gemma_add_norm_plans_the_offset_variant(gemma_plans):
    for p in gemma_plans:
        assert p.kind == "add_norm" and p.pinned["NORM"] == "rms" and p.pinned["OFFSET"] == 1.0, p.pinned


def _module(plan, tmp_path):
    path = tmp_path / "add_norm_template.py"
    path.write_text(template_source(plan), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("add_norm_template", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fused_template_applies_the_offset_in_the_interpreter(gemma_plans, tmp_path):
    plan = gemma_plans[0]
    mod = _module(plan, tmp_path)
    gen = torch.Generator().manual_seed(0)
    M, N = 5, 64
    a, b = (torch.randn(M, N, generator=gen).to(torch.bfloat16) for _ in range(2))
    w = (torch.randn(N, generator=gen) * 0.1).to(torch.bfloat16)
    outs = [torch.empty(M, N, dtype=torch.bfloat16) for _ in plan.outputs]
    mod.launch(a, b, w, *outs, eps=1e-6, BLOCK_N=64, ROWS=1, num_warps=1, **plan.pinned)
    s = (a + b).float()
    want = (s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-6) * (1.0 + w.float())).to(torch.bfloat16)
    plain = (s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(torch.bfloat16)
    torch.testing.assert_close(outs[-1], want, atol=2e-2, rtol=2e-2)
    assert not torch.allclose(outs[-1].float(), plain.float(), atol=0.1), "the offset was not applied"
