"""ops/gemm's warp-specialized Gluon template (gluon_kernel.py, template "gluon_ws", also in ops/gemm_nt with b as
[N, K]): its space and input checks on the CPU, ahead-of-time sm_90 builds of its whole pruned space against the spec's resource estimates, and a `gpu`
tier that runs it through the verifier on a CUDA device (both dtypes, b row-major and transposed, shapes that are
no multiple of a tile, deterministic, nothing written past c).
"""

import importlib.util
from pathlib import Path

import pytest
import torch

from kernelloop.base.builtin import ops_dir
from kernelloop.core.device import VIRTUAL_HOPPER
from kernelloop.base.records import Workload, evaluate_expression
from kernelloop.core.spec import load_op, load_workloads
from kernelloop.core.spec.space import prune, why_pruned, workload_names

import template_check

ROOT = Path(__file__).resolve().parents[2]
GEMM = ops_dir() / "gemm"
HOPPER = VIRTUAL_HOPPER.with_(virtual=False)
pytestmark = pytest.mark.timeout(300)


def _bundle(op="gemm"):
    return load_op(ops_dir() / op)


def _template(op="gemm", name="gluon_ws"):
    return next(t for t in _bundle(op).spec.templates if t.name == name)


def _pinned(op="gemm"):
    return {"EPILOGUE": "none", "TRANS_B": int(op == "gemm_nt")}


def _module():
    spec = importlib.util.spec_from_file_location("_test_gluon_kernel", GEMM / "gluon_kernel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cfg(bm=128, bn=256, warps=8, stages=3):
    return dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8, num_warps=warps, num_stages=stages)


@pytest.mark.parametrize("op", ["gemm", "gemm_nt"])
def test_space_is_sm90_only_and_keeps_the_measured_best(op):
    b = _bundle(op)
    t = _template(op)
    pin = _pinned(op)
    suite = load_workloads(GEMM / "workloads-prefill.toml", b.spec)
    for w in suite:
        kept, _ = prune(t, w, HOPPER)
        # the kernel records' best (128x256 on 8 warps, 3 stages) and 64-row tiles for every prefill shape
        assert _cfg() | pin in kept, w.axes
        assert any(c["BLOCK_M"] == 64 for c in kept)
        assert not prune(t, w, VIRTUAL_HOPPER)[0], "Gluon has no interpreter: nothing to run there"
        assert not prune(t, w, HOPPER.with_(capability=[8, 0]))[0], "sm_80 has no warpgroup MMA or TMA"
    w = suite[-1]
    # 128x256 on 4 warps would need 256 accumulator registers a thread; 8 warps on 64 rows have nothing to stack
    assert "accumulator" in why_pruned(t, w, HOPPER, _cfg(warps=4) | pin)
    assert "stacked" in why_pruned(t, w, HOPPER, _cfg(bm=64, warps=8) | pin)
    # rows of 16-byte multiples only (TMA)
    odd = Workload(op=op, axes={"M": 512, "N": 1001, "K": 4096}, dtype="bf16")
    assert "16-byte" in why_pruned(t, odd, HOPPER, _cfg() | pin)


def test_registers_per_thread_fill_the_register_file():
    mod = _module()
    t = _template()
    for warps, regs in ((8, 168), (4, 248)):
        assert mod.max_registers(warps) == regs
        threads = evaluate_expression(t.resources.threads, {"num_warps": warps})
        assert threads == (warps + 4) * 32 and regs * threads <= 65536


def test_launch_says_why_it_cannot_run():
    mod = _module()
    a = torch.ones(64, 64, dtype=torch.bfloat16)
    c = torch.empty(64, 64, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="sm_90"):
        mod.launch(a, a, c, **_cfg())
    with pytest.raises(ValueError, match="epilogue"):
        mod.launch(a, a, c, **_cfg(), EPILOGUE="bias")
    with pytest.raises(ValueError, match="SUBTILE=3"):
        mod.launch(a, a, c, **_cfg(), SUBTILE=3)
    with pytest.raises(ValueError, match="SUBTILE=2"):
        mod.launch(a, a, c, **_cfg(), SUBTILE=2, EPI_TMA=0)
    with pytest.raises(ValueError, match="PINGPONG=1"):
        mod.launch(a, a, c, **_cfg(bm=128, bn=128, warps=4), PINGPONG=1)
    with pytest.raises(ValueError, match="PINGPONG=1"):
        mod.launch(a, a, c, **_cfg(bm=128, bn=128, warps=8), PINGPONG=1, SUBTILE=2)
    with pytest.raises(ValueError, match="PINGPONG=2"):
        mod.launch(a, a, c, **_cfg(), PINGPONG=2)


def test_pingpong_template_gives_each_warpgroup_a_tile_of_its_own():
    """gluon_pingpong: two math warpgroups of 4 warps, each holding a whole tile (at most 128x128 or 64x256 fp32
    accumulators, 128 registers a thread), two staging buffers (128x128 keeps 5 stages, 6 overflow); each math
    thread gets the 232 registers the loader's warpgroup leaves."""
    mod = _module()
    pp = _template(name="gluon_pingpong")
    pin = _pinned() | {"PINGPONG": 1}
    w = Workload(op="gemm", axes={"M": 2048, "N": 4096, "K": 4096}, dtype="fp16")
    kept = prune(pp, w, HOPPER)[0]
    assert {(c["BLOCK_M"], c["BLOCK_N"]) for c in kept} == {(64, 128), (64, 256), (128, 128)}
    assert {c["num_warps"] for c in kept} == {8} and {c["PINGPONG"] for c in kept} == {1}
    assert why_pruned(pp, w, HOPPER, _cfg(bm=128, bn=128, warps=8, stages=5) | pin) is None
    assert "shared" in why_pruned(pp, w, HOPPER, _cfg(bm=128, bn=128, warps=8, stages=6) | pin)
    assert "accumulator" in why_pruned(pp, w, HOPPER, _cfg(bm=128, bn=256, warps=8, stages=3) | pin)
    assert not prune(pp, w, VIRTUAL_HOPPER)[0]
    assert mod.pingpong_math_registers() == 232
    # both math warpgroups and the loader's warpgroup fit in the register file, whatever the loader keeps, and
    # the math warpgroups get what the loader gives back (to a multiple of 8)
    for loader in (24, 40, 56):
        regs = mod.pingpong_math_registers(loader)
        assert regs % 8 == 0 and (2 * regs + loader) * 4 * 32 <= 65536 < (2 * (regs + 8) + loader) * 4 * 32


def test_subtiled_template_fits_four_stages_of_the_128x256_tile():
    """gluon_subtiled (two half-width accumulators, c staged half by half): 128x256 keeps 4 stages where gluon_ws
    keeps 3; 5 stages still overflow; the rest of its space is gluon_ws's 256-wide tiles."""
    w = Workload(op="gemm", axes={"M": 2048, "N": 4096, "K": 4096}, dtype="bf16")
    sub, whole = _template(name="gluon_subtiled"), _template()
    pin = _pinned()
    assert why_pruned(sub, w, HOPPER, _cfg(stages=4) | pin | {"SUBTILE": 2}) is None
    assert "shared" in why_pruned(whole, w, HOPPER, _cfg(stages=4) | pin)
    assert "shared" in why_pruned(sub, w, HOPPER, _cfg(stages=5) | pin | {"SUBTILE": 2})
    kept = prune(sub, w, HOPPER)[0]
    assert {c["BLOCK_N"] for c in kept} == {256} and {c["SUBTILE"] for c in kept} == {2}
    assert not prune(sub, w, VIRTUAL_HOPPER)[0]


def _build(configs, axes, dtype="fp16", op="gemm", name="gluon_ws"):
    from kernelloop.tune.profile.sass import find_tool
    from kernelloop.core.build.aot import build_configs
    if find_tool("cuobjdump") is None:
        pytest.skip("no cuobjdump (Triton's wheel ships one)")
    b = _bundle(op)
    w = Workload(op=op, axes=axes, dtype=dtype)
    outs = build_configs(b.spec, {name: GEMM / "gluon_kernel.py"}, w,
                         [{"template": name, **c} for c in configs], jobs=2)
    return w, outs


@pytest.mark.parametrize("op,name", [("gemm", "gluon_ws"), ("gemm_nt", "gluon_ws"), ("gemm", "gluon_subtiled"),
                                     ("gemm", "gluon_pingpong")])
def test_whole_pruned_space_builds_for_sm90_within_the_estimates(op, name):
    """Every configuration pruning keeps builds for sm_90 (this host's Triton, ahead of time), without spills, with
    the threads the spec says, shared memory at most 256 bytes under the estimate and registers at maxnreg."""
    from kernelloop.core.build.aot import BUILT
    from kernelloop.tune.search.prune_audit import _estimate
    t = _template(op, name)
    axes = {"M": 2048, "N": 4096, "K": 4096}
    kept, _ = prune(t, Workload(op=op, axes=axes, dtype="fp16"), HOPPER)
    assert len(kept) == {"gluon_ws": len(kept) if 10 <= len(kept) <= 20 else -1, "gluon_subtiled": 5,
                         "gluon_pingpong": 9}[name]
    assert all(c["TRANS_B"] == _pinned(op)["TRANS_B"] for c in kept)
    w, outs = _build(kept, axes, op=op, name=name)
    names = workload_names(w, HOPPER)
    mod = _module()
    for cfg, o in zip(kept, outs):
        if o.status != BUILT and "no Gluon" in o.error:
            pytest.skip(o.error)
        assert o.status == BUILT, (cfg, o.error[-800:])
        est = _estimate(t, names, cfg)
        assert 0 <= est["shared"] - o.shared_bytes <= 256, (cfg, est["shared"], o.shared_bytes)
        assert o.shared_bytes <= HOPPER.shared_per_block_optin
        threads = evaluate_expression(t.resources.threads, {**names, **cfg})
        assert o.threads == threads == (cfg["num_warps"] + 4) * 32, (cfg, o.threads)
        assert est["regs"] >= o.registers
        # (ping-pong: built with num_warps=4 for each math warpgroup, the register file shared by all 12 warps)
        assert o.registers == mod.max_registers(cfg["num_warps"]), (cfg, o.registers)
        assert not o.spills, cfg


def test_pruned_four_stage_128x256_does_not_fit():
    """The estimate's one exclusion that matters: 128x256 with 4 stages and the staged c tile builds past sm_90's
    shared memory per block, so pruning it loses nothing."""
    from kernelloop.core.build.aot import BUILT
    t = _template()
    axes = {"M": 4096, "N": 4096, "K": 4096}
    cfg = _cfg(stages=4) | {"EPILOGUE": "none", "TRANS_B": 0}
    assert "shared" in why_pruned(t, Workload(op="gemm", axes=axes, dtype="fp16"), HOPPER, cfg)
    _, outs = _build([cfg], axes)
    if outs[0].status != BUILT and "no Gluon" in outs[0].error:
        pytest.skip(outs[0].error)
    assert outs[0].status == BUILT, outs[0].error[-800:]
    assert outs[0].shared_bytes > HOPPER.shared_per_block_optin


# ---- GPU tier --------------------------------------------------------------------------------------------------

GPU_SHAPES = [{"M": 1000, "N": 1000, "K": 4000}, {"M": 333, "N": 520, "K": 200}, {"M": 4096, "N": 4096, "K": 4096},
              {"M": 1, "N": 1024, "K": 8192}]
GPU_CONFIGS = [dict(BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=3),
               dict(BLOCK_M=128, BLOCK_N=128, num_warps=4, num_stages=6),
               dict(BLOCK_M=64, BLOCK_N=256, num_warps=4, num_stages=4),
               dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=3),
               dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=5)]


def _gpu_check(name: str, configs: list | None = None) -> list[dict]:
    rows = template_check.check("gluon_kernel.py", [dict(c, BLOCK_K=64, GROUP_M=8) for c in configs or GPU_CONFIGS],
                                GPU_SHAPES, calls=2, out_name=name)
    failed = template_check.failures(rows)
    assert not failed, failed[:5]
    return rows


@pytest.mark.gpu
@pytest.mark.timeout(400)
def test_gpu_gluon_passes_the_verifier():
    assert len(_gpu_check("gemm-gluon-gpu")) == 5 * 4 * 2 * 2


@pytest.mark.gpu
@pytest.mark.timeout(400)
def test_gpu_gluon_subtiled_passes_the_verifier():
    """The two half-width accumulators (b's halves sliced out of each slot, transposed or not) and the c tile stored
    half by half: the same four shapes, both dtypes, b row-major and transposed."""
    configs = [dict(BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=4, SUBTILE=2),
               dict(BLOCK_M=64, BLOCK_N=256, num_warps=4, num_stages=5, SUBTILE=2)]
    assert len(_gpu_check("gemm-gluon-subtiled-gpu", configs)) == 2 * 4 * 2 * 2


@pytest.mark.gpu
@pytest.mark.timeout(400)
def test_gpu_gluon_pingpong_passes_the_verifier():
    """Two math warpgroups taking turns over one ring: shapes with an odd and an even number of tiles a program
    (1000x1000 has 32 tiles of 128x128: programs with one tile leave the second warpgroup idle), a ragged k, both
    dtypes, b row-major and transposed, deterministic, nothing written past c."""
    configs = [dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=5, PINGPONG=1),
               dict(BLOCK_M=64, BLOCK_N=256, num_warps=8, num_stages=4, PINGPONG=1),
               dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=3, PINGPONG=1)]
    assert len(_gpu_check("gemm-gluon-pingpong-gpu", configs)) == 3 * 4 * 2 * 2


def test_kernel_records_script_configurations_bind_to_their_templates():
    """benchmarks/gemm_kernels.py's configurations (the tiled template's and, marked "template": "gluon_ws", the
    Gluon kernel's) are accepted by the launch they are passed to; without a GPU the script says so."""
    import inspect
    spec = importlib.util.spec_from_file_location("_gemm_kernels_script", ROOT / "benchmarks" / "gemm_kernels.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    mods = {"tiled": script._kernel_module(), "gluon_ws": script._kernel_module("gluon_kernel")}
    a = torch.empty(8, 8)
    assert {"gluon", "large", "narrow"} <= set(script.SHAPES) and set(script.CONFIGS) == set(script.SHAPES)
    templates = set()
    for cfg in (c for cs in script.CONFIGS.values() for c in cs):
        kw = dict(cfg)
        name = kw.pop("template", "tiled")
        templates.add(name)
        inspect.signature(mods[name].launch).bind(a, a, a, scratch=None, **kw)
    assert templates == {"tiled", "gluon_ws"}
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="CUDA"):
            script.main(["--out", "/dev/null", "--shapes", "gluon"])
