"""STREAM_STORE only changes the cache policy of the output store: identical results (interpreter)."""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":  # the GPU tier (pytest -m gpu) compiles for the device
    os.environ["TRITON_INTERPRET"] = "1"  # before any triton import in this module's kernels

import importlib.util
from pathlib import Path

import pytest
import torch
from kernelloop.base.builtin import ops_dir

OPS = ops_dir()


def _kernel(op):
    spec = importlib.util.spec_from_file_location(f"_ss_{op}", OPS / op / "kernel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
@pytest.mark.parametrize("block", [512, 128])  # single-pass and looped paths for N = 300
def test_stream_store_is_bitwise_identical(op, block):
    k = _kernel(op)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 300, generator=g) + 0.5
    extra = {"layernorm": [torch.randn(300, generator=g), torch.randn(300, generator=g)],
             "rmsnorm": [torch.randn(300, generator=g)], "softmax": []}[op]
    scal = {"softmax": {}}.get(op, {"eps": 1e-5})
    outs = []
    for ss in (0, 1):
        y = torch.full_like(x, float("nan"))
        k.launch(x, *extra, y, **scal, BLOCK_N=block, ROWS=1, num_warps=4, EVICT_FIRST=0, STREAM_STORE=ss)
        outs.append(y)
    assert torch.isfinite(outs[0]).all()
    assert torch.equal(outs[0], outs[1])
