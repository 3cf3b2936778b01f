"""Ahead-of-time builds for sm_90 without a GPU: each configuration gets the verdict its build earns (built with
resources, compile error, refused by the launcher, hung, crashed), and one configuration's hang or crash costs
only itself."""

import os
import textwrap
from pathlib import Path

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.core.device import VIRTUAL_HOPPER
from kernelloop.tune.profile.sass import find_tool
from kernelloop.base.records import Workload
from kernelloop.core.spec import load_op
from kernelloop.core.build.aot import BUILT, COMPILE_ERROR, CRASHED, LAUNCH_ERROR, TIMEOUT, BuildOutcome, build_configs, \
    launch_limits


# A template for rmsnorm's signature (x, weight, y, eps) whose MODE parameter chooses how its build ends.
TEMPLATE = textwrap.dedent('''
    import os, time
    import triton
    import triton.language as tl

    @triton.jit
    def _scale(X, Y, N, BLOCK: tl.constexpr, BAD: tl.constexpr):
        if BAD:
            offs = tl.arange(0, 3)          # not a power of two: the compiler refuses it
        else:
            offs = tl.arange(0, BLOCK)
        m = offs < N
        tl.store(Y + offs, tl.load(X + offs, mask=m) * 2, mask=m)

    def launch(x, weight, y, *, eps, MODE, BLOCK, num_warps):
        if MODE == "refuse":
            raise ValueError("this launcher does not take MODE=refuse")
        if MODE == "hang":
            time.sleep(3600)
        if MODE == "crash":
            os._exit(3)
        if MODE == "exit-4-at-end":   # builds, and makes its process exit with code 4 when it ends
            import atexit
            atexit.register(os._exit, 4)
        assert x.is_cuda                     # the template sees a CUDA tensor, as on the GPU
        _scale[(1,)](x, y, x.numel(), BLOCK=BLOCK, BAD=MODE == "bad", num_warps=num_warps)
''')


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    if find_tool("cuobjdump") is None:
        pytest.skip("no cuobjdump (Triton's wheel ships one)")
    folder = tmp_path_factory.mktemp("aot")
    (folder / "modes.py").write_text(TEMPLATE)
    spec = load_op(ops_dir() / "rmsnorm").spec
    return spec, {"modes": folder / "modes.py"}, Workload(op="rmsnorm", axes={"M": 4, "N": 64}, dtype="fp16")


def cfg(mode, block=64, warps=4):
    return {"template": "modes", "MODE": mode, "BLOCK": block, "num_warps": warps}


def test_each_configuration_gets_the_verdict_of_its_build(setup):
    spec, files, w = setup
    configs = [cfg("ok"), cfg("bad"), cfg("refuse"), cfg("crash"), cfg("ok", 128, 8), cfg("same")]
    seen = []
    outs = build_configs(spec, files, w, configs, jobs=1, chunk=8, timeout_s=120,
                         progress=lambda n, s: seen.append(n))
    assert [o.status for o in outs] == [BUILT, COMPILE_ERROR, LAUNCH_ERROR, CRASHED, BUILT, BUILT]
    assert seen == [6]
    ok, bad, refuse, crash, wide, same = outs
    assert ok.config == {"MODE": "ok", "BLOCK": 64, "num_warps": 4} and ok.template == "modes"
    (k,) = ok.kernels
    assert k["name"] == "_scale" and k["num_warps"] == 4 and 0 < k["REG"] <= 255 and k["shared"] >= 0
    assert wide.kernels[0]["num_warps"] == 8 and wide.threads == 256
    assert "arange" in bad.error and "ValueError: this launcher" in refuse.error
    assert crash.error.startswith("the build process exited with code 3")
    assert not ok.spills and launch_limits(ok, VIRTUAL_HOPPER) == []
    # the launch each one asked for: grid, scalar arguments (N = 4 x 64), binary; "same" launches what "ok" does
    assert k["grid"] == [1] and k["scalars"] == [256] and len(k["cubin_sha256"]) == 64
    assert same.launches == ok.launches is not None and wide.launches != ok.launches
    assert bad.launches is None and crash.launches is None


def test_a_hanging_build_is_stopped_and_the_rest_still_build(setup):
    spec, files, w = setup
    # the limit counts from each configuration's start, not from the process's imports
    outs = build_configs(spec, files, w, [cfg("ok"), cfg("hang"), cfg("ok", 128, 8)], jobs=1, chunk=8, timeout_s=15)
    assert [o.status for o in outs] == [BUILT, TIMEOUT, BUILT]
    assert outs[1].error == "no result within 15 s"


def test_launch_limits_name_each_limit_a_kernel_breaks():
    props = VIRTUAL_HOPPER
    o = BuildOutcome(template="t", config={}, status=BUILT, kernels=[
        {"name": "a", "shared": 232448, "num_warps": 32, "REG": 64},                 # fits exactly
        {"name": "b", "shared": 232449, "num_warps": 8, "REG": 255},                # one byte over
        {"name": "c", "shared": 0, "num_warps": 64, "REG": 40},                     # 2048 threads
        {"name": "d", "shared": 0, "num_warps": 16, "REG": 255}])                   # 255 x 512 registers
    limits = launch_limits(o, props)
    assert len(limits) == 4 and limits[0].startswith("b: shared memory 232449")
    assert limits[1].startswith("c: 2048 threads") and limits[2].startswith("c: 40 registers x 2048")
    assert limits[3].startswith("d: 255 registers x 512")
    assert o.shared_bytes == 232449 and o.threads == 2048 and o.registers == 255
    assert BuildOutcome(template="t", config={}, status=BUILT, kernels=[{"STACK": 16}]).spills


def test_a_process_failing_after_its_builds_keeps_their_results(setup):
    spec, files, w = setup
    outs = build_configs(spec, files, w, [cfg("ok"), cfg("exit-4-at-end"), cfg("ok", 128, 8)], jobs=1, chunk=8,
                         timeout_s=120)
    assert [o.status for o in outs] == [BUILT, BUILT, BUILT]


@pytest.mark.gpu
def test_ahead_of_time_builds_match_the_kernels_a_real_launch_compiles():
    """On the GPU host: the audit's builds (another process, compile only) report the shared memory and registers
    of the very kernels a real launch compiles and runs, for a GEMM configuration near the shared-memory limit."""
    import importlib.util

    import torch

    b = load_op(ops_dir() / "gemm")
    t = b.spec.templates[0]
    w = Workload(op="gemm", axes={"M": 4096, "N": 4096, "K": 4096}, dtype="fp16")
    cfg = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4, PERSISTENT=1, TMA=2,
               EPILOGUE="none", TRANS_B=0)
    (aot,) = build_configs(b.spec, {"tiled": b.folder / t.file}, w, [{"template": "tiled", **cfg}], jobs=1)
    assert aot.status == BUILT, aot.error
    spec = importlib.util.spec_from_file_location("_aot_real_gemm", b.folder / t.file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a, bb = (torch.randn(4096, 4096, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty(4096, 4096, device="cuda", dtype=torch.float16)
    mod.launch(a, bb, c, **cfg)
    torch.cuda.synchronize()
    kernels = [k for entry in mod._gemm_kernel.device_caches.values()
               for cache in entry if isinstance(cache, dict) for k in cache.values() if hasattr(k, "asm")]
    assert kernels, "the real launch compiled nothing"
    real = kernels[-1]
    assert real.metadata.shared == aot.shared_bytes
    assert real.n_regs == aot.registers
    assert torch.allclose(c.float(), (a.float() @ bb.float()), rtol=2e-2, atol=1.0)


def test_the_build_process_module_imports_no_torch_before_its_read_only_view():
    """`python -m kernelloop.core.build.aot_child` imports its packages and the module before main() confines the
    process; the read-only view needs one thread, so none of that may import torch."""
    import subprocess
    import sys
    src = str(Path(__file__).resolve().parents[2] / "src")
    code = ("import os, sys, kernelloop.core.build.aot_child as c; "
            "print('torch' in sys.modules, len(os.listdir('/proc/self/task')), callable(c.main))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": src}, check=True)
    assert out.stdout.split() == ["False", "1", "True"]
