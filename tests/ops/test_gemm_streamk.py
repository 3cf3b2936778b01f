"""ops/gemm's stream-K template ("streamk": kernel.py's _gemm_sk_kernel with SK=1): its plan, the kernel in the CPU
interpreter through the verifier (every kind of piece: whole tiles, finished tiles, published partial tiles), its
workspace contract (poisoned or stale flags, nothing written past c or the workspace), the space, ahead-of-time
sm_90 builds against the spec's estimates, the evaluator battery, and a `gpu` tier that checks it on a CUDA device,
where the programs really run at once and wait on each other's flags.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":  # the GPU tier (pytest -m gpu) compiles for the device
    os.environ["TRITON_INTERPRET"] = "1"

import importlib.util  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelloop.base.builtin import ops_dir
from kernelloop.core.device import VIRTUAL_HOPPER  # noqa: E402
from kernelloop.base.records import DType, Status, Workload  # noqa: E402
from kernelloop.core.reference.inputs import TORCH_DTYPES, is_poison, make_inputs, poison_  # noqa: E402
from kernelloop.core.reference.truth import truth  # noqa: E402
from kernelloop.core.spec import load_op  # noqa: E402
from kernelloop.core.spec.space import prune, why_pruned, workload_names  # noqa: E402
from kernelloop.core.verify.compare import check_outputs, error_metrics  # noqa: E402
from kernelloop.core.verify.rules import check_source  # noqa: E402

import template_check  # noqa: E402
from battery import assert_battery_passes  # noqa: E402

GEMM = ops_dir() / "gemm"
HOPPER = VIRTUAL_HOPPER.with_(virtual=False)
pytestmark = pytest.mark.timeout(300)


def _module():
    s = importlib.util.spec_from_file_location("_test_gemm_streamk", GEMM / "kernel.py")
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


KERNEL = _module()
BUNDLE = load_op(GEMM)
SPEC = BUNDLE.spec
TEMPLATE = SPEC.template("streamk")


def _cfg(**over):
    cfg = dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=2, TMA=0, SK=1,
               EPILOGUE="none", TRANS_B=0)
    cfg.update(over)
    return cfg


# ---- the plan ---------------------------------------------------------------------------------------------------

def test_plan_spreads_few_tiles_over_every_program_and_cuts_only_the_ragged_waves():
    plan = KERNEL.stream_k_plan
    # 512x14336 in 128x256 tiles: 224 tiles on 132 SMs, 92 past the first wave: those and one full wave are cut
    assert plan(512, 14336, 4096, 128, 256, 64, 132, 160) == (132, 92 + 132)
    # 4096^3: 512 tiles = 3 waves + 116: 248 tiles cut, the other 264 dealt whole (two to a program)
    assert plan(4096, 4096, 4096, 128, 256, 64, 132, 160) == (132, 248)
    # fewer tiles than SMs: all of them cut (512x4096 in 128x256 tiles: 64)
    assert plan(512, 4096, 4096, 128, 256, 64, 132, 160) == (132, 64)
    # whole waves: nothing cut (132 tiles exactly)
    assert plan(128 * 33, 1024, 4096, 128, 256, 64, 132, 160) == (132, 0)
    # the workspace's slots and the number of k-steps bound the programs
    assert plan(512, 4096, 4096, 128, 256, 64, 132, 100) == (100, 64)
    assert plan(16, 32, 128, 16, 32, 64, 132, 160) == (2, 1)


# ---- the kernel in the interpreter ------------------------------------------------------------------------------

CASES = [  # (label, axes, programs, tile override)
    ("cut-waves", {"M": 70, "N": 150, "K": 130}, 4, {}),         # 3x3 = 9 tiles: 1 + 4 cut, 4 whole
    ("fewer-tiles", {"M": 5, "N": 100, "K": 1000}, 7, {}),       # 2 tiles of 16 k-steps over 7 programs
    ("one-tile-many-pieces", {"M": 16, "N": 40, "K": 640}, 9, {}),  # a tile finished from 9 pieces
    ("whole-waves", {"M": 64, "N": 128, "K": 96}, 4, {}),        # 2x2 = 4 tiles: none cut
    ("one-k-step", {"M": 33, "N": 65, "K": 48}, 3, {}),          # 1 k-step a tile: pieces are whole tiles
    ("big-tiles", {"M": 100, "N": 300, "K": 200}, 4, {"BLOCK_M": 64, "BLOCK_N": 128}),
]


def _run(axes, dtype, programs, *, trans_b=0, scratch=None, seed=11, over=None, distribution="normal"):
    w = Workload(op="gemm", axes=axes, dtype=dtype)
    a, b = make_inputs(SPEC, w, seed, "cpu", distribution)
    refs = truth(SPEC, GEMM / SPEC.reference, [a, b])
    bb = b.t().contiguous() if trans_b else b
    buf = poison_(torch.empty(axes["M"] + 1, axes["N"], dtype=TORCH_DTYPES[DType(dtype)]))
    numel = SPEC.scratch_numel(axes)
    ws = poison_(torch.empty(numel + 64)) if scratch is None else scratch
    KERNEL.launch(a, bb, buf[:axes["M"]], **_cfg(TRANS_B=trans_b, **(over or {})), PROGRAMS=programs,
                  scratch=ws[:numel])
    assert bool(is_poison(buf[axes["M"]]).all()), "the kernel wrote past the end of its output"
    assert bool(is_poison(ws[numel:]).all()), "the kernel wrote past the end of its workspace"
    v = check_outputs(SPEC, w, [buf[:axes["M"]]], refs, [a, b], [a, b], f"stream-K {axes}")
    return v, buf[:axes["M"]].clone(), refs[0], ws


@pytest.mark.parametrize("label,axes,programs,over", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_stream_k_passes_the_verifier_deterministically(label, axes, programs, over, dtype):
    v, c, ref, _ = _run(axes, dtype, programs, over=over)
    assert v.status is Status.PASSED, v.message
    assert v.metrics[0].error_cap_ratio < 1.0
    _, again, _, _ = _run(axes, dtype, programs, over=over)
    assert torch.equal(c.view(torch.uint8), again.view(torch.uint8)), "bitwise deterministic"
    assert error_metrics("c", torch.zeros_like(c), ref, SPEC.tolerance_for(
        Workload(op="gemm", axes=axes, dtype=dtype))).mismatched > 0, "zeros fail this case"


def test_stream_k_with_b_transposed_and_near_zero_inputs():
    for trans_b in (0, 1):
        v, _, _, _ = _run({"M": 40, "N": 72, "K": 520}, "fp16", 5, trans_b=trans_b, distribution="near_zero")
        assert v.status is Status.PASSED, v.message


def test_stream_k_matches_the_tiled_template_up_to_the_summation_order():
    """Cutting a tile's k-range changes only where the fp32 partial sums meet: the result is within a few output
    roundings of the one-tile-per-program kernel's."""
    axes = {"M": 48, "N": 96, "K": 768}
    _, sk, _, _ = _run(axes, "fp16", 6)
    w = Workload(op="gemm", axes=axes, dtype="fp16")
    a, b = make_inputs(SPEC, w, 11, "cpu", "normal")
    c = torch.empty(48, 96, dtype=torch.float16)
    KERNEL.launch(a, b, c, BLOCK_M=32, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=2)
    assert (sk.float() - c.float()).abs().max() <= 4 * c.float().abs().max() * 2 ** -10


def test_stale_flags_from_an_earlier_call_never_read_as_set():
    """A workspace reused without poisoning still holds the flags and partial tiles of the call before; each call
    draws its own flag value, so the second call waits for this call's pieces, not the old ones (in the
    interpreter a program that read an old flag would add an old partial tile: a different c)."""
    axes = {"M": 16, "N": 40, "K": 640}
    v1, c1, _, ws = _run(axes, "bf16", 9, seed=3)
    v2, c2, _, _ = _run(axes, "bf16", 9, seed=4, scratch=ws)
    fresh, c3, _, _ = _run(axes, "bf16", 9, seed=4)
    assert v1.status is v2.status is fresh.status is Status.PASSED, (v1.message, v2.message)
    assert torch.equal(c2.view(torch.uint8), c3.view(torch.uint8))


def test_bias_and_activation_epilogues_apply_once_to_the_finished_tile():
    """The epilogue runs where a tile is finished (whole, or from its pieces), never on a partial tile."""
    torch.manual_seed(0)
    a = torch.randn(20, 700).to(torch.float16)
    b = torch.randn(700, 50).to(torch.float16)
    bias = torch.randn(50).to(torch.float16)
    ref = a.double() @ b.double() + bias.double()
    for epi, f in (("bias", lambda x: x), ("bias_silu", lambda x: x * torch.sigmoid(x))):
        c = torch.empty(20, 50, dtype=torch.float16)
        ws = poison_(torch.empty(8 * (32 * 64 + 2)))
        KERNEL.launch(a, b, bias, c, **_cfg(EPILOGUE=epi), PROGRAMS=8, scratch=ws)
        assert ((c.double() - f(ref)).abs() / (f(ref).abs() + 1)).max() < 4e-3, epi


def test_launch_refuses_a_missing_or_small_workspace():
    a, b, c = torch.ones(16, 64, dtype=torch.float16), torch.ones(64, 64, dtype=torch.float16), \
        torch.empty(16, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="SK=1 needs"):
        KERNEL.launch(a, b, c, **_cfg())
    with pytest.raises(ValueError, match="SK=1 needs"):
        KERNEL.launch(a, b, c, **_cfg(), scratch=torch.empty(32 * 64 + 1))
    with pytest.raises(ValueError, match="SK=1 needs"):
        KERNEL.launch(a, b, c, **_cfg(), scratch=torch.empty(2 * (32 * 64 + 2), dtype=torch.float16))


# ---- spec, space, static rules ----------------------------------------------------------------------------------

def test_template_source_passes_the_static_rules_and_the_space_targets_ragged_waves():
    assert check_source(BUNDLE.template_sources["streamk"], SPEC) == []
    params = {p.name: p.values for p in TEMPLATE.params}
    assert params["SK"] == [1] and params["EPILOGUE"] == ["none"] and params["TRANS_B"] == [0]

    def kept(M, N, K):
        return prune(TEMPLATE, Workload(op="gemm", axes={"M": M, "N": N, "K": K}, dtype="bf16"), HOPPER)[0]
    ragged = kept(512, 14336, 4096)
    assert ragged and all(c["BLOCK_M"] >= 64 and c["BLOCK_N"] >= 128 for c in ragged)
    assert any(c["BLOCK_M"] == 128 and c["BLOCK_N"] == 256 and c["TMA"] == 2 for c in ragged)
    # 4224 = 33 x 128 rows by 1024 = 4 x 256 columns: 132 tiles, one whole wave; the 128x256 tile is pruned there
    cfg = {**ragged[0], "BLOCK_M": 128, "BLOCK_N": 256, "num_warps": 8, "num_stages": 3, "TMA": 1}
    why = why_pruned(TEMPLATE, Workload(op="gemm", axes={"M": 4224, "N": 1024, "K": 4096}, dtype="bf16"), HOPPER, cfg)
    assert why is not None and "whole waves" in why
    # the workspace holds 160 partial 128x256 tiles and flags at model shapes
    assert SPEC.scratch_numel({"M": 512, "N": 14336, "K": 4096}) >= 160 * (128 * 256 + 2)


def test_ahead_of_time_builds_fit_the_estimates():
    """sm_90 builds (this host's Triton) of kept configurations around the shared-memory limit: built, no spills,
    and the spec's shared-memory estimate never below the build."""
    from kernelloop.tune.profile.sass import find_tool
    from kernelloop.core.build.aot import BUILT, build_configs
    from kernelloop.tune.search.prune_audit import _estimate
    if find_tool("cuobjdump") is None:
        pytest.skip("no cuobjdump (Triton's wheel ships one)")
    w = Workload(op="gemm", axes={"M": 512, "N": 14336, "K": 4096}, dtype="bf16")
    base = dict(BLOCK_K=64, GROUP_M=8, SK=1, EPILOGUE="none", TRANS_B=0)
    cfgs = [dict(base, BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=4, TMA=2),
            dict(base, BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=3, TMA=1),
            dict(base, BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=2, TMA=0),
            dict(base, BLOCK_M=64, BLOCK_N=256, num_warps=8, num_stages=5, TMA=2),
            dict(base, BLOCK_M=128, BLOCK_N=128, num_warps=4, num_stages=5, TMA=1)]
    assert all(why_pruned(TEMPLATE, w, HOPPER, c) is None for c in cfgs)
    outs = build_configs(SPEC, {"streamk": GEMM / TEMPLATE.file}, w, [{"template": "streamk", **c} for c in cfgs],
                         jobs=2, chunk=3)
    names = workload_names(w, HOPPER)
    for cfg, o in zip(cfgs, outs):
        assert o.status == BUILT, o.error[-800:]
        assert all(not k.get("LOCAL") for k in o.kernels), (cfg, "spills")
        est = _estimate(TEMPLATE, names, cfg)["shared"]
        assert o.shared_bytes <= est <= o.shared_bytes + 33000, (cfg, est, o.shared_bytes)
        assert o.shared_bytes <= HOPPER.shared_per_block_optin


def test_stream_k_passes_the_evaluator_battery_through_the_harness_workspace(tmp_path):
    """The worker's workspace (poisoned before every verified call and timed sample), held-out shapes, repeats."""
    assert_battery_passes(BUNDLE, "streamk", _cfg(),
                          [({"M": 20, "N": 140, "K": 300}, "bf16"), ({"M": 33, "N": 48, "K": 160}, "fp16")], tmp_path)


# ---- GPU tier --------------------------------------------------------------------------------------------------

GPU_SHAPES = [{"M": 512, "N": 14336, "K": 4096}, {"M": 1000, "N": 1000, "K": 4000}, {"M": 333, "N": 520, "K": 200},
              {"M": 4096, "N": 4096, "K": 4096}, {"M": 1, "N": 1024, "K": 8192}, {"M": 512, "N": 1024, "K": 4096}]
GPU_CONFIGS = [dict(BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=4, TMA=2),
               dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=4, TMA=1),
               dict(BLOCK_M=64, BLOCK_N=256, num_warps=8, num_stages=3, TMA=0)]


@pytest.mark.gpu
@pytest.mark.timeout(400)
def test_gpu_stream_k_passes_the_verifier():
    """On the GPU the programs run at once: a program finishing a tile spins on the flags of the lower programs
    holding its other pieces. Three configurations x six shapes (ragged waves, fewer tiles than SMs, whole waves,
    one row, shapes no multiple of a tile) x fp16/bf16 x b row-major/transposed; three calls each, bitwise equal."""
    rows = template_check.check("kernel.py", [dict(c, BLOCK_K=64, GROUP_M=8, SK=1) for c in GPU_CONFIGS], GPU_SHAPES,
                                calls=3, workspace="spec", out_name="gemm-streamk-gpu")
    assert len(rows) == 3 * 6 * 2 * 2
    failed = template_check.failures(rows)
    assert not failed, failed[:5]
