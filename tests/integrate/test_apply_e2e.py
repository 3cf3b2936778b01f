"""apply() and e2e() on a small model of every module kind they route, with the package of conftest.py (exported
from real interpreter runs: layernorm, rmsnorm, softmax, gemm_nt at 64 features; the token count extended to 1..16).

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import kernelloop  # noqa: E402
from kernelloop.deliver.integrate.e2e import Tolerance  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter tests")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(64)
        self.ln_other_eps = nn.LayerNorm(64, eps=1e-3)
        self.rms = nn.RMSNorm(64, eps=1e-6)
        self.proj = nn.Linear(64, 32, bias=False)
        self.proj_bias = nn.Linear(32, 64)
        self.proj_other = nn.Linear(64, 64, bias=False)

    def forward(self, x):
        h = self.proj(self.rms(self.ln(x)))
        h = self.proj_bias(h)
        h = torch.nn.functional.softmax(self.ln_other_eps(h), dim=-1) + self.proj_other(h)
        return h


def model():
    torch.manual_seed(0)
    return Block().half().eval()


def test_apply_routes_what_the_package_covers_and_says_why_not_elsewhere(package_dir):
    pkg = kernelloop.load_package(package_dir)
    m = model()
    x = torch.randn(2, 6, 64).half()
    with torch.no_grad():
        ref = m(x)
        keys = list(m.state_dict())
        with kernelloop.apply(m, pkg) as patched:
            out = m(x)
            sites = {s.path: s for s in patched.report.sites}
            assert list(m.state_dict()) == keys   # the modules stay; only their forward changed
        back = m(x)
    assert {p for p, s in sites.items() if s.replaced} == {"ln", "rms", "proj", "torch.nn.functional.softmax"}
    assert "no layernorm entry" in sites["ln_other_eps"].reason and "eps=0.001" in sites["ln_other_eps"].reason
    assert "bias" in sites["proj_bias"].reason
    assert "no gemm_nt entry for fp16 N=64, K=64" == sites["proj_other"].reason
    assert "no attention" in sites["torch.nn.functional.scaled_dot_product_attention"].reason
    assert (out.float() - ref.float()).abs().max() < 2e-2
    assert torch.equal(back, ref)   # undone: the original forward, bit for bit
    assert torch.nn.functional.softmax.__module__ == "torch.nn.functional"
    # M = 12 (2 x 6) lies in the verified 1..16: every routed call ran a kernel
    assert pkg["layernorm"].hits.total() == 1 and pkg["rmsnorm"].hits.total() == 1
    assert pkg["gemm_nt"].hits.total() == 1 and pkg["softmax"].hits.total() == 1
    assert not any(k.fallbacks for k in pkg.kernels.values())


def test_outside_the_range_the_reference_runs_and_apply_twice_is_refused(package_dir):
    pkg = kernelloop.load_package(package_dir)
    m = model()
    x = torch.randn(3, 7, 64).half()   # M = 21 > 16
    with torch.no_grad(), kernelloop.apply(m, pkg) as first:
        m(x)
        second = kernelloop.apply(m, pkg)
        assert not second.report.replaced
        reasons = {s.path: s.reason for s in second.report.sites}
        assert all("already patched" in reasons[p] for p in ("ln", "rms", "proj", "torch.nn.functional.softmax"))
        second.undo()
    assert pkg["layernorm"].fallbacks == {"no entry covers the shape": 1}
    assert not first.active


def test_patched_model_compiles_fullgraph(package_dir):
    pkg = kernelloop.load_package(package_dir)
    m = model()
    x = torch.randn(2, 5, 64).half()
    with torch.no_grad(), kernelloop.apply(m, pkg):
        eager = m(x)
        compiled = torch.compile(m, fullgraph=True, backend="eager")
        assert torch.equal(compiled(x), eager)
        assert pkg["gemm_nt"].hits.total() == 2


def test_e2e_reports_outputs_and_no_speed_in_the_interpreter(package_dir):
    pkg = kernelloop.load_package(package_dir)
    report = kernelloop.e2e(model(), pkg, (torch.randn(2, 6, 64).half(),), seeds=(0, 1))
    assert report.outputs_ok and report.delivered is None and "not measured" in report.speed_note
    assert not report.times and not report.speedup
    assert [c.seed for c in report.checks] == [0, 1] and all(c.cosine > 0.999 for c in report.checks)
    assert report.counts["ops"]["softmax"]["entries"] == {"e0": 2}


def test_e2e_catches_a_wrong_kernel(package_dir):
    pkg = kernelloop.load_package(package_dir)
    launch, cfg = pkg["rmsnorm"].launchers[0]

    def wrong(x, w, y, **kw):   # stands in for a kernel that is wrong on shapes nothing verified
        launch(x, w, y, **kw)
        y.mul_(1.5)
    pkg["rmsnorm"].launchers[0] = (wrong, cfg)
    report = kernelloop.e2e(model(), pkg, (torch.randn(2, 6, 64).half(),), seeds=(0,),
                            tolerance=Tolerance(min_cosine=0.9999))
    assert not report.outputs_ok and report.delivered is False
