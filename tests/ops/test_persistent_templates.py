"""The persistent layernorm, rmsnorm and softmax templates (ops/<op>/persistent.py) under the Triton CPU interpreter:
against the fp64 truth for awkward shapes (N = 1, odd N, fewer rows than programs, rows that do not divide among
the programs, strided rows), with and without the prefetch of the next row; complete writes with nothing past the
output; the source rules; the whole evaluator battery on the interpreter workloads (the ahead-of-time
build for sm_90 is tests/ops/test_persistent_compile.py).

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":  # the GPU tier (pytest -m gpu) compiles for the device
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelloop.core.spec import load_op, load_workloads  # noqa: E402

from battery import assert_battery_passes  # noqa: E402
from rowops import DT, OPS, strided_case, template_module, truth  # noqa: E402


# (M, N, PROGRAMS_PER_SM, num_warps): on the CPU the launcher assumes 4 SMs, so PROGRAMS_PER_SM=2 is 8 programs
CASES = [
    pytest.param(3, 1, 1, 1, id="N1"),                       # N == 1, 3 programs of one row each
    pytest.param(11, 17, 1, 1, id="N17-uneven"),             # 4 programs, 11 rows: 3, 3, 3, 2 rows each
    pytest.param(5, 1000, 2, 2, id="N1000-fewer-rows"),      # 8 programs wanted, 5 rows: one row each
    pytest.param(19, 256, 2, 4, id="N256-M19"),              # 8 programs, 19 rows
    pytest.param(2, 5000, 1, 4, id="N5000"),                 # an 8192-lane block, 3192 lanes masked
]


@pytest.mark.parametrize("prefetch", [0, 1])
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("M,N,PER_SM,num_warps", CASES)
@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
def test_persistent_matches_the_truth(op, M, N, PER_SM, num_warps, dtype, prefetch):
    mod, bundle = template_module(op, "persistent.py"), load_op(OPS / op)
    tol = bundle.spec.tolerance[dtype]
    gen, x, buf, y = strided_case(M, N, dtype)  # strided rows: every other row of a wider buffer
    before = x.clone()
    eps = bundle.spec.scalars.get("eps", 1e-6)
    kw = dict(PROGRAMS_PER_SM=PER_SM, num_warps=num_warps, PREFETCH=prefetch)
    w = b = None
    if op == "layernorm":
        w = (torch.rand(N, generator=gen) + 0.5).to(DT[dtype])
        b = (torch.randn(N, generator=gen) * 0.1).to(DT[dtype])
        mod.launch(x, w, b, y, eps=eps, **kw)
    elif op == "rmsnorm":
        w = (torch.rand(N, generator=gen) + 0.5).to(DT[dtype])
        mod.launch(x, w, y, eps=eps, **kw)
    else:
        mod.launch(x, y, **kw)
    assert not torch.isnan(y).any(), "some outputs were not written"
    assert torch.isnan(buf[-1]).all(), "the kernel wrote past its output"
    assert torch.equal(x, before), "the input was changed"
    ref = truth(op, x, w, eps, b)
    err = (y.double() - ref).abs()
    assert bool((err <= tol.atol + tol.rtol * ref.abs()).all()), float(err.max())


def test_program_count_is_per_sm_and_capped_by_rows():
    mod = template_module("rmsnorm", "persistent.py")
    x = torch.zeros(1)
    assert mod._programs(x, 1000, 4) == 16     # 4 SMs assumed off the GPU
    assert mod._programs(x, 5, 4) == 5         # never more programs than rows
    assert mod._programs(x, 0, 4) == 1


def test_softmax_row_of_minus_inf_is_nan_like_torch():
    mod = template_module("softmax", "persistent.py")
    x = torch.zeros(6, 300)
    x[3] = float("-inf")
    y = torch.empty_like(x)
    mod.launch(x, y, PROGRAMS_PER_SM=1, num_warps=1, PREFETCH=1)
    assert torch.allclose(y[0], torch.softmax(x[0], dim=-1))
    assert torch.isnan(y[3]).all() and torch.isnan(torch.softmax(x[3], dim=-1)).all()


@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
def test_persistent_template_is_declared_pruned_and_passes_the_source_rules(op):
    from kernelloop.core.verify.rules import check_source
    bundle = load_op(OPS / op)
    assert "persistent" in bundle.template_sources
    assert check_source(bundle.template_sources["persistent"], bundle.spec) == []
    tmpl = next(t for t in bundle.spec.templates if t.name == "persistent")
    assert [p.name for p in tmpl.params] == ["PROGRAMS_PER_SM", "num_warps", "PREFETCH"]


@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
def test_persistent_template_passes_the_evaluator_battery(op, tmp_path):
    """On the interpreter suite's second workload (33 rows of 1000: an odd M and a row off every block size, so
    the masked edge runs); the battery's held-out cases move M and N further. The suite's first workload (64 x 256,
    aligned) would add interpreter time and no path the masked one leaves out."""
    bundle = load_op(OPS / op)
    workloads = load_workloads(OPS / op / "workloads-interpret.toml", bundle.spec)
    assert workloads[1].axes == {"M": 33, "N": 1000}
    assert_battery_passes(bundle, "persistent", {"PROGRAMS_PER_SM": 2, "num_warps": 2, "PREFETCH": 1},
                          [(w.axes, w.dtype) for w in workloads[1:2]], tmp_path)
