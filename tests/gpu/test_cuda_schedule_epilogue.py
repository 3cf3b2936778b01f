"""GPU tier: the fused epilogues of the typed GEMM schedules (kernelloop.tune.schedule.lower) on an sm_90 device.

Each library schedule's generated template (ops/gemm/schedule_*.py) is launched with every epilogue it lowers —
bias, bias + exact GELU, bias + SiLU, bias + ReLU — and without one, at fp16 and bf16, on shapes with whole tiles and
with a masked tail in M and N, and compared with torch's reference (F.gelu, F.silu, F.relu of a @ b + bias in
float64) within the gemm ops' tolerance. Configurations whose footprint the static gate rejects are not launched."""

import importlib.util

import pytest
import torch
import torch.nn.functional as F

from kernelloop.base.builtin import ops_dir
from kernelloop.tune.schedule.library import GENERATED_FILES, LIBRARY
from kernelloop.tune.schedule.resources import check_resources

pytestmark = pytest.mark.gpu

# (M, N, K): whole 128x256 tiles; a tail in M and N (masked by the TMA store, the bias load masked by N)
SHAPES = [(256, 512, 256), (200, 392, 320), (77, 136, 192)]
CONFIGS = {"gluon_ws": [dict(BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=3),
                        dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=4)],
           "gluon_subtiled": [dict(BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=4)],
           "gluon_pingpong": [dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=5),
                              dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=4)]}
ACTS = {"none": None, "bias": lambda x: x, "bias_gelu": F.gelu, "bias_silu": F.silu, "bias_relu": F.relu}
RTOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2}


def _module(name):
    path = ops_dir() / "gemm" / GENERATED_FILES[name]
    spec = importlib.util.spec_from_file_location(f"_epilogue_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("epilogue", sorted(ACTS))
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_fused_epilogue_matches_torch(name, epilogue, dtype):
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon schedules are sm_90 kernels")
    mod = _module(name)
    gen = torch.Generator(device="cuda").manual_seed(0)
    launched = 0
    for cfg in CONFIGS[name]:
        config = {**cfg, "BLOCK_K": 64, "GROUP_M": 8}
        if check_resources(LIBRARY[name]().bind({**config, "EPILOGUE": epilogue}), elem=2):
            continue   # the static gate keeps it off the GPU (e.g. the exact GELU over a 128-register accumulator)
        for M, N, K in SHAPES:
            a = (torch.randn(M, K, device="cuda", generator=gen) * 0.5 + 0.1).to(dtype)
            b = (torch.randn(K, N, device="cuda", generator=gen) * 0.5).to(dtype)
            bias = (torch.randn(N, device="cuda", generator=gen) * 0.5).to(dtype)
            c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
            args = (a, b, c) if epilogue == "none" else (a, b, bias, c)
            mod.launch(*args, **config, EPILOGUE=epilogue)
            torch.cuda.synchronize()
            ref = a.double() @ b.double()
            if epilogue != "none":
                ref = ACTS[epilogue](ref + bias.double())
            err = (c.double() - ref).abs()
            allowed = 1e-6 * K ** 0.5 + RTOL[dtype] * ref.abs()
            assert not torch.isnan(c).any(), f"{name} {cfg} {epilogue} {M}x{N}x{K}: unwritten outputs"
            worst = (err / allowed).max().item()
            assert worst <= 1.0, f"{name} {cfg} {epilogue} {M}x{N}x{K} {dtype}: worst error {worst:.2f}x allowed"
            launched += 1
    assert launched, f"{name} {epilogue}: every configuration was rejected by the static gate"
