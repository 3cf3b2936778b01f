"""Gemma's RMSNorm (x / rms(x) * (1 + weight)) end to end: capture maps it to rmsnorm_offset, a package exported from
an interpreter run of rmsnorm_offset patches a one-layer Gemma2 (random weights, nothing downloaded) and the patched
model's logits match the unpatched model's.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

import kernelloop  # noqa: E402
from kernelloop.base.builtin import ops_dir  # noqa: E402

transformers = pytest.importorskip("transformers")


def gemma():
    cfg = transformers.Gemma2Config(hidden_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                    head_dim=32, intermediate_size=128, vocab_size=64, use_cache=False,
                                    attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.Gemma2ForCausalLM(cfg).half().eval()
    with torch.no_grad():   # the checkpoint stores (weight - 1): random offsets, so a missing 1 shows
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(torch.randn_like(p) * 0.2)
    return model


@pytest.fixture(scope="module")
def offset_package(tmp_path_factory, side_by_side):
    if os.environ.get("KERNELLOOP_GPU_TIER") == "1":
        pytest.skip("interpreter package")
    base = tmp_path_factory.mktemp("gemma")
    wl = base / "rmsnorm_offset.toml"
    wl.write_text('op = "rmsnorm_offset"\n[[workload]]\naxes = { M = 8, N = 64 }\ndtype = "fp16"\n')
    side_by_side([("rmsnorm_offset", wl, base / "run", ["--template", "persistent"])], base)
    kernelloop.export([base / "run"], base / "pkg", ops_root=ops_dir(), extend=["M=1:16"], interior=1)
    return base / "pkg"


def test_capture_maps_gemma_norms_to_rmsnorm_offset():
    report = kernelloop.capture(gemma(), (torch.randint(0, 64, (1, 8)),), ops_root=ops_dir())
    norms = [c for c in report.cards if c.short_class == "Gemma2RMSNorm"]
    assert norms and all(c.op == "rmsnorm_offset" and c.reason is None for c in norms), \
        [(c.op, c.reason) for c in norms]


def test_apply_patches_gemma_norms_with_rmsnorm_offset(offset_package):
    pkg = kernelloop.load_package(offset_package)
    model = gemma()
    ids = torch.randint(0, 64, (1, 8))
    with torch.no_grad():
        ref = model(ids).logits
        with kernelloop.apply(model, pkg) as patched:
            out = model(ids).logits
            norms = [s for s in patched.report.sites if s.op == "rmsnorm_offset"]
    assert norms and all(s.replaced for s in norms), [(s.path, s.reason) for s in norms]
    assert pkg["rmsnorm_offset"].hits.total() == len(norms)
    assert (out.float() - ref.float()).abs().max() < 5e-2
