"""The package on a GPU: a real CUDA run exported with a verified range, loaded, routed by apply, captured in a CUDA
graph and replayed, and compiled with torch.compile(fullgraph=True) -- outputs within tolerance each time."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from kernelloop.base.builtin import ops_dir
import kernelloop

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_package(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("gpu-pkg")
    wl = base / "ln.toml"
    wl.write_text('op = "layernorm"\n[[workload]]\naxes = { M = 256, N = 1024 }\ndtype = "fp16"\n')
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    subprocess.run([sys.executable, "-m", "kernelloop.cli.app", "optimize", "layernorm", "--workloads", str(wl),
                    "--budget", "3", "--no-confirm", "--out", str(base / "run")], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=600)
    kernelloop.export([base / "run"], base / "pkg", ops_root=ops_dir(), extend=["M=1:512"], interior=2,
                      keep_slower=True)
    return base / "pkg"


def test_gpu_package_routes_a_layernorm_through_graphs_and_compile(gpu_package):
    pkg = kernelloop.load_package(gpu_package)
    k = pkg["layernorm"]
    assert not k.disabled and k.table.entries[0].guard.arch.startswith("sm_")
    m = nn.LayerNorm(1024).half().cuda()
    x = torch.randn(300, 1024, device="cuda").half()   # M = 300: verified inside 1..512, never timed
    with torch.no_grad():
        ref = m(x)
        with kernelloop.apply(m, pkg):
            out = m(x)
            assert (out.float() - ref.float()).abs().max() < 2e-2
            assert k.hits.total() == 1
            static_x = x.clone()
            m(static_x)   # warm (compile) outside the capture
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_y = m(static_x)
            static_x.copy_(torch.randn_like(static_x))
            g.replay()
            torch.cuda.synchronize()
            assert (static_y.float() - nn.functional.layer_norm(static_x.float(), (1024,), m.weight.float(),
                                                                m.bias.float())).abs().max() < 2e-2
            compiled = torch.compile(m, fullgraph=True)
            assert (compiled(x).float() - ref.float()).abs().max() < 2e-2


def test_gpu_package_replays_the_launch_through_its_compiled_kernel(gpu_package):
    """From a plan's third call the launch goes straight to the compiled kernel (deliver/package/replay.py): the same
    output bit for bit as the JIT path, on new tensors each call, and inside a CUDA graph."""
    pkg = kernelloop.load_package(gpu_package)
    k = pkg["layernorm"]
    w = torch.randn(1024, device="cuda").half()
    b = torch.randn(1024, device="cuda").half()
    xs = [torch.randn(200, 1024, device="cuda").half() for _ in range(4)]
    jit = [k(x, w, b) for x in xs[:2]]                 # recorded, through Triton's JIT
    again = [k(x, w, b) for x in xs[:2]]               # replayed
    assert k.replays.total() == 2, k.counts()["not_replayed"]
    assert all(torch.equal(a, j) for a, j in zip(again, jit))
    ref = nn.functional.layer_norm(xs[2].float(), (1024,), w.float(), b.float())
    assert (k(xs[2], w, b).float() - ref).abs().max() < 2e-2   # fresh input, replayed
    static_x = xs[3].clone()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = k(static_x, w, b)
    static_x.copy_(xs[0])
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(static_y, jit[0])
