"""The chunk-resident layernorm, rmsnorm and softmax templates (ops/<op>/chunked.py) under the Triton CPU interpreter:
against the fp64 truth for awkward shapes (N = 1, odd N, N not a multiple of the chunk, rows needing a widened
chunk, M % ROWS != 0, strided rows), complete writes with nothing past the output, the source rules, and the
whole evaluator battery on the interpreter workloads.

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


# (M, N, CHUNK, ROWS, num_warps)
CASES = [
    pytest.param(3, 1, 256, 1, 1, id="N1"),                    # N == 1 (a constant for Triton on a GPU)
    pytest.param(5, 17, 256, 2, 1, id="N17-rows2"),            # one masked chunk, M % ROWS != 0
    pytest.param(4, 1000, 256, 4, 2, id="N1000-4chunks"),      # tail chunk of 232 lanes
    pytest.param(2, 1024, 256, 1, 4, id="N1024-exact"),        # no tail
    pytest.param(1, 5000, 1024, 1, 4, id="N5000-M1"),
    pytest.param(2, 9000, 256, 1, 2, id="N9000-widened"),      # 36 chunks of 256 > 32: the chunk is widened
]


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("M,N,CHUNK,ROWS,num_warps", CASES)
@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
def test_chunked_matches_the_truth(op, M, N, CHUNK, ROWS, num_warps, dtype):
    mod, bundle = template_module(op, "chunked.py"), load_op(OPS / op)
    tol = bundle.spec.tolerance[dtype]
    gen, x, buf, y = strided_case(M, N, dtype)  # strided rows: every other row of a wider buffer
    eps = bundle.spec.scalars.get("eps", 1e-6)
    b = None
    if op == "layernorm":
        w = (torch.rand(N, generator=gen) + 0.5).to(DT[dtype])
        b = (torch.randn(N, generator=gen) * 0.1).to(DT[dtype])
        mod.launch(x, w, b, y, eps=eps, CHUNK=CHUNK, ROWS=ROWS, num_warps=num_warps, WB_FIRST=int(ROWS > 1))
    elif op == "rmsnorm":
        w = (torch.rand(N, generator=gen) + 0.5).to(DT[dtype])
        mod.launch(x, w, y, eps=eps, CHUNK=CHUNK, ROWS=ROWS, num_warps=num_warps)
    else:
        w = None
        mod.launch(x, y, CHUNK=CHUNK, ROWS=ROWS, num_warps=num_warps)
    assert not torch.isnan(y).any(), "some outputs were not written"
    assert torch.isnan(buf[-1]).all(), "the kernel wrote past its output"
    ref = truth(op, x, w, eps, b)
    err = (y.double() - ref).abs()
    assert bool((err <= tol.atol + tol.rtol * ref.abs()).all()), float(err.max())


def test_softmax_row_of_minus_inf_is_nan_like_torch():
    mod = template_module("softmax", "chunked.py")
    x = torch.zeros(2, 300)
    x[1] = float("-inf")
    y = torch.empty_like(x)
    mod.launch(x, y, CHUNK=256, ROWS=1, num_warps=1)
    assert torch.allclose(y[0], torch.softmax(x[0], dim=-1))
    assert torch.isnan(y[1]).all() and torch.isnan(torch.softmax(x[1], dim=-1)).all()


@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
def test_chunked_template_is_declared_and_passes_the_source_rules(op):
    from kernelloop.core.verify.rules import check_source
    bundle = load_op(OPS / op)
    assert "chunked" in bundle.template_sources
    assert check_source(bundle.template_sources["chunked"], bundle.spec) == []


@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
def test_chunked_template_passes_the_evaluator_battery(op, tmp_path):
    """On the interpreter suite's second workload (33 rows of 1000: an odd M and a row off every block size, so
    the masked edge runs); the battery's held-out cases move M and N further. The suite's first workload (64 x 256,
    aligned) would add interpreter time and no path the masked one leaves out."""
    bundle = load_op(OPS / op)
    workloads = load_workloads(OPS / op / "workloads-interpret.toml", bundle.spec)
    assert workloads[1].axes == {"M": 33, "N": 1000}
    assert_battery_passes(bundle, "chunked", {"CHUNK": 256, "ROWS": 2, "num_warps": 2, **({"WB_FIRST": 1} if op == "layernorm" else {})},
                          [(w.axes, w.dtype) for w in workloads[1:2]], tmp_path)
