"""ops/gemm's swap-AB decode template ("swapab": swapab_kernel.py, also in ops/gemm_nt with b as [N, K]): the kernel
in the CPU interpreter through the verifier (one token, ragged N and K, token tiles narrower than M, split-K with
uneven and empty k-ranges, both dtypes, both layouts of b, pointer and TMA loads), its workspace contract (poisoned
or stale counters, nothing written past c or the workspace), the epilogues applied once, the space over the Llama-3
decode suite, the evaluator battery, ahead-of-time sm_90 builds against the spec's estimates (warpgroup MMA with the
tokens as its narrow N), and a `gpu` tier that checks it on a CUDA device, where the k-ranges of a tile really
arrive in any order.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":  # the GPU tier (pytest -m gpu) compiles for the device
    os.environ["TRITON_INTERPRET"] = "1"

import importlib.util  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelloop.base.builtin import ops_dir  # noqa: E402
from kernelloop.core.device import VIRTUAL_HOPPER  # noqa: E402
from kernelloop.base.records import DType, Status, Workload, evaluate_expression  # noqa: E402
from kernelloop.core.reference.inputs import TORCH_DTYPES, is_poison, make_inputs, poison_  # noqa: E402
from kernelloop.core.reference.truth import truth  # noqa: E402
from kernelloop.core.spec import load_op, load_workloads  # noqa: E402
from kernelloop.core.spec.space import prune, why_pruned, workload_names  # noqa: E402
from kernelloop.core.verify.compare import check_outputs, error_metrics  # noqa: E402
from kernelloop.core.verify.rules import check_source  # noqa: E402

import template_check  # noqa: E402
from battery import assert_battery_passes  # noqa: E402

GEMM = ops_dir() / "gemm"
HOPPER = VIRTUAL_HOPPER.with_(virtual=False)
pytestmark = pytest.mark.timeout(300)


def _module():
    s = importlib.util.spec_from_file_location("_test_gemm_swapab", GEMM / "swapab_kernel.py")
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


KERNEL = _module()
BUNDLES = {op: load_op(ops_dir() / op) for op in ("gemm", "gemm_nt")}
SPEC = BUNDLES["gemm"].spec
TEMPLATE = SPEC.template("swapab")
DECODE = load_workloads(GEMM / "workloads-decode.toml", SPEC)


def _cfg(**over):
    cfg = dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=64, num_warps=4, num_stages=2, SPLIT_K=1, TMA=0, EPILOGUE="none",
               TRANS_B=0)
    cfg.update(over)
    return cfg


def _run(axes, dtype, cfg, *, scratch=None, seed=11, distribution="normal"):
    """One launch on poisoned c (a guard row after it) and a poisoned workspace (a guard tail after it); the
    verifier's verdict, c and the reference."""
    w = Workload(op="gemm", axes=axes, dtype=dtype)
    a, b = make_inputs(SPEC, w, seed, "cpu", distribution)
    refs = truth(SPEC, GEMM / SPEC.reference, [a, b])
    bb = b.t().contiguous() if cfg["TRANS_B"] else b
    buf = poison_(torch.empty(axes["M"] + 1, axes["N"], dtype=TORCH_DTYPES[DType(dtype)]))
    numel = SPEC.scratch_numel(axes)
    ws = poison_(torch.empty(numel + 64)) if scratch is None else scratch
    KERNEL.launch(a, bb, buf[:axes["M"]], **cfg, scratch=ws[:numel])
    assert bool(is_poison(buf[axes["M"]]).all()), "the kernel wrote past the end of its output"
    assert bool(is_poison(ws[numel:]).all()), "the kernel wrote past the end of its workspace"
    v = check_outputs(SPEC, w, [buf[:axes["M"]]], refs, [a, b], [a, b], f"swap-AB {axes} {cfg}")
    return v, buf[:axes["M"]].clone(), refs[0], ws


def _fix_tag(monkeypatch, seed: int) -> None:
    """The kernel module's tag source made to return `seed` (everything else of torch as it is)."""
    class Torch:
        def __getattr__(self, name):
            return getattr(torch, name)

        def Generator(self):
            return type("FixedSeed", (), {"seed": lambda _: seed})()
    monkeypatch.setattr(KERNEL, "torch", Torch())


def _has_interpreted_tma() -> bool:
    return hasattr(__import__("triton").language, "make_tensor_descriptor")


# ---- the kernel in the interpreter ------------------------------------------------------------------------------

CASES = [  # (label, axes, config overrides)
    ("one-token", {"M": 1, "N": 100, "K": 300}, {}),                                   # ragged N and K
    ("one-token-split3", {"M": 1, "N": 100, "K": 1000}, {"SPLIT_K": 3}),               # uneven k-ranges
    ("empty-last-range", {"M": 3, "N": 70, "K": 300}, {"SPLIT_K": 4}),                 # 5 k-steps over 4 ranges
    ("two-token-tiles", {"M": 17, "N": 130, "K": 520}, {"SPLIT_K": 2}),                # tokens past one tile
    ("wide-tiles-split16", {"M": 40, "N": 72, "K": 2048},
     {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 16}),
    ("k256", {"M": 5, "N": 64, "K": 520}, {"BLOCK_K": 256, "num_stages": 3}),
]


@pytest.mark.parametrize("label,axes,over", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_swapab_passes_the_verifier_deterministically(label, axes, over, trans_b, dtype):
    cfg = _cfg(TRANS_B=trans_b, **over)
    v, c, ref, ws = _run(axes, dtype, cfg)
    assert v.status is Status.PASSED, v.message
    assert v.metrics[0].error_cap_ratio < 1.0
    # a second call on the workspace as the first one left it (its partial planes, its cleared counters): the same bits
    v2, again, _, _ = _run(axes, dtype, cfg, scratch=ws)
    assert v2.status is Status.PASSED, v2.message
    assert torch.equal(c.view(torch.uint8), again.view(torch.uint8)), "bitwise deterministic"
    assert error_metrics("c", torch.zeros_like(c), ref, SPEC.tolerance_for(
        Workload(op="gemm", axes=axes, dtype=dtype))).mismatched > 0, "zeros fail this case"


@pytest.mark.skipif(not _has_interpreted_tma(), reason="this Triton's interpreter has no tensor descriptors")
@pytest.mark.parametrize("trans_b", [0, 1])
def test_swapab_tma_loads_zero_fill_past_every_edge(trans_b):
    """TMA=1 (host descriptors, run here by Triton 3.9's interpreter): one token in a 16-wide box, N and K off the
    tiles, split-K."""
    for axes, over in (({"M": 1, "N": 40, "K": 200}, {}), ({"M": 9, "N": 136, "K": 520}, {"SPLIT_K": 3}),
                       ({"M": 33, "N": 64, "K": 256}, {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128})):
        v, _, _, _ = _run(axes, "bf16", _cfg(TMA=1, TRANS_B=trans_b, **over))
        assert v.status is Status.PASSED, (axes, v.message)


def test_split_k_sums_in_split_order_whoever_arrives_last():
    """The last program to arrive adds the planes 0..SPLIT_K-1 in order, so c does not depend on who that is: the
    split-K result equals, bit for bit, the planes (each its own SPLIT_K=1 launch over its k-range) added in
    order, rounded once."""
    axes, split = {"M": 5, "N": 64, "K": 768}, 4
    w = Workload(op="gemm", axes=axes, dtype="fp16")
    a, b = make_inputs(SPEC, w, 3, "cpu", "normal")
    _, c, _, _ = _run(axes, "fp16", _cfg(SPLIT_K=split), seed=3)
    span = 768 // split
    total = torch.zeros(5, 64)
    for s in range(split):
        part = torch.empty(5, 64, dtype=torch.float32)   # an fp32 c: the plane itself, unrounded
        KERNEL.launch(a[:, s * span:(s + 1) * span].contiguous(), b[s * span:(s + 1) * span].contiguous(), part,
                      **_cfg())
        total += part
    assert torch.equal(c.view(torch.uint8), total.to(torch.float16).view(torch.uint8))


def test_a_counter_left_with_this_calls_tag_would_be_counted_on(monkeypatch):
    """What the tag protects against: a counter that already holds this call's tag with arrivals counts them, so
    the tile is finished early, from planes that were never written (poison: NaN). Fresh tags make that a 2^-49
    event; forcing the tag shows the check is real."""
    axes = {"M": 2, "N": 64, "K": 512}
    cfg = _cfg(SPLIT_K=4)
    numel = SPEC.scratch_numel(axes)
    need = KERNEL.workspace_numel(2, 64, 4, 16, 64)
    ws = poison_(torch.empty(numel))
    token = 2 ** 40 + 12345
    ws[need - 2:need].view(torch.int64)[0] = (token << 8) + 2   # two arrivals already counted under this tag
    w = Workload(op="gemm", axes=axes, dtype="fp16")
    a, b = make_inputs(SPEC, w, 5, "cpu", "normal")
    c = poison_(torch.empty(2, 64, dtype=torch.float16))
    with monkeypatch.context() as m:
        _fix_tag(m, token - 2 ** 40)
        KERNEL.launch(a, b, c, **cfg, scratch=ws)
    assert torch.isnan(c.float()).any(), "a stale counter under this call's tag finishes the tile too early"
    # with the tag of another call, the same workspace gives the right answer
    v, _, _, _ = _run(axes, "fp16", cfg, scratch=ws, seed=5)
    assert v.status is Status.PASSED, v.message


def test_a_launch_replayed_with_the_same_tag_finds_its_counters_clear(monkeypatch):
    """A CUDA graph replays a launch with the tag it was captured with: the last program to arrive sets each
    counter back to 0, so the replay counts from the first arrival again (without that it would count on from
    SPLIT_K and never finish a tile)."""
    axes = {"M": 3, "N": 130, "K": 520}
    numel = SPEC.scratch_numel(axes)
    ws = poison_(torch.empty(numel))
    _fix_tag(monkeypatch, 777)
    first, c1, _, _ = _run(axes, "bf16", _cfg(SPLIT_K=4), scratch=ws)
    assert first.status is Status.PASSED, first.message
    tiles = 1 * 3   # one 16-token tile by three 64-row weight tiles
    need = KERNEL.workspace_numel(3, 130, 4, 16, 64)
    assert torch.equal(ws[need - 2 * tiles:need].view(torch.int64), torch.zeros(tiles, dtype=torch.int64))
    again, c2, _, _ = _run(axes, "bf16", _cfg(SPLIT_K=4), scratch=ws)
    assert again.status is Status.PASSED, again.message
    assert torch.equal(c1.view(torch.uint8), c2.view(torch.uint8))


def test_epilogues_apply_once_to_the_finished_tile():
    """Bias (one value per row of c^T), GELU and SiLU run where the tile is finished: after the last k-range's
    reduction, never on a partial."""
    torch.manual_seed(0)
    a = torch.randn(3, 700).to(torch.float16)
    b = torch.randn(700, 90).to(torch.float16)
    bias = torch.randn(90).to(torch.float16)
    ref = a.double() @ b.double() + bias.double()
    acts = {"bias": lambda x: x, "bias_gelu": torch.nn.functional.gelu, "bias_silu": torch.nn.functional.silu}
    for epi, f in acts.items():
        for split in (1, 4):
            c = torch.empty(3, 90, dtype=torch.float16)
            ws = poison_(torch.empty(KERNEL.workspace_numel(3, 90, split, 16, 64)))
            KERNEL.launch(a, b, bias, c, **_cfg(EPILOGUE=epi, SPLIT_K=split), scratch=ws)
            assert ((c.double() - f(ref)).abs() / (f(ref).abs() + 1)).max() < 4e-3, (epi, split)


def test_launch_refuses_a_missing_or_small_workspace_and_a_mismatched_epilogue():
    a, b, c = torch.ones(4, 256, dtype=torch.float16), torch.ones(256, 64, dtype=torch.float16), \
        torch.empty(4, 64, dtype=torch.float16)
    need = KERNEL.workspace_numel(4, 64, 2, 16, 64)
    assert need == 2 * 4 * 64 + 2
    with pytest.raises(ValueError, match="SPLIT_K=2 needs"):
        KERNEL.launch(a, b, c, **_cfg(SPLIT_K=2))
    with pytest.raises(ValueError, match="SPLIT_K=2 needs"):
        KERNEL.launch(a, b, c, **_cfg(SPLIT_K=2), scratch=torch.empty(need - 1))
    with pytest.raises(ValueError, match="SPLIT_K=2 needs"):
        KERNEL.launch(a, b, c, **_cfg(SPLIT_K=2), scratch=torch.empty(need, dtype=torch.float16))
    with pytest.raises(ValueError, match="255"):
        KERNEL.launch(a, b, c, **_cfg(SPLIT_K=256), scratch=torch.empty(10 ** 6))
    with pytest.raises(ValueError, match="EPILOGUE"):
        KERNEL.launch(a, b, c, **_cfg(EPILOGUE="bias"))
    KERNEL.launch(a, b, c, **_cfg())   # no split: no workspace needed
    assert torch.equal(c, torch.full((4, 64), 256.0, dtype=torch.float16))


# ---- spec, space, static rules ----------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["gemm", "gemm_nt"])
def test_template_source_passes_the_static_rules_and_both_layouts_share_one_space(op):
    b = BUNDLES[op]
    t = b.spec.template("swapab")
    assert check_source(b.template_sources["swapab"], b.spec) == []
    assert (b.folder / t.file).resolve() == (GEMM / "swapab_kernel.py").resolve()
    params = {p.name: p.values for p in t.params}
    assert params["EPILOGUE"] == ["none"] and params["TRANS_B"] == [int(op == "gemm_nt")]
    # the same space, rules and estimates as gemm's apart from b's layout (and so the TMA stride rule: b's rows
    # are N long in gemm, K long in gemm_nt), and the same workspace
    def strip(t):
        d = t.model_dump()
        return {**d, "file": "", "params": [p for p in d["params"] if p["name"] != "TRANS_B"],
                "constraints": [c for c in d["constraints"] if "16-byte" not in c["reason"]]}
    assert strip(t) == strip(TEMPLATE)
    (aligned,) = [c.expr for c in t.constraints if "16-byte" in c.reason]
    assert aligned == ("TMA == 0 or (K * elem) % 16 == 0" if op == "gemm_nt"
                       else "TMA == 0 or ((K * elem) % 16 == 0 and (N * elem) % 16 == 0)")
    for w in DECODE:
        assert b.spec.scratch_numel(w.axes) >= max(
            KERNEL.workspace_numel(w.axes["M"], w.axes["N"], c["SPLIT_K"], c["BLOCK_M"], c["BLOCK_N"])
            for c in prune(t, Workload(op=op, axes=w.axes, dtype=w.dtype), HOPPER)[0])


def _programs(cfg, axes):
    return -(-axes["M"] // cfg["BLOCK_M"]) * -(-axes["N"] // cfg["BLOCK_N"]) * cfg["SPLIT_K"]


def test_decode_suite_keeps_a_searchable_space_that_fills_the_gpu():
    """Over the 32 Llama-3 decode GEMMs: tens to a few hundred configurations each; tokens on the MMA's narrow side
    (16 for M = 1 and 16; the whole 64 or half of 128), split-K only where the tiles leave SMs idle and never past
    the workspace, and no grid under half the SMs unless K cannot be split further."""
    sms = HOPPER.sm_count
    for w in DECODE:
        kept, _ = prune(TEMPLATE, w, HOPPER)
        M, N, K = w.axes["M"], w.axes["N"], w.axes["K"]
        assert 50 <= len(kept) <= 300, (w.label, len(kept))
        assert {c["BLOCK_M"] for c in kept} == {1: {16}, 16: {16}, 64: {64}, 128: {64, 128}}[M], w.label
        assert {c["TMA"] for c in kept} == {0, 1}
        for c in kept:
            tiles = _programs(c, w.axes) // c["SPLIT_K"]
            assert c["SPLIT_K"] == 1 or tiles * c["SPLIT_K"] < 2 * sms, (w.label, c)
            assert c["SPLIT_K"] * M * N + 2 * tiles <= SPEC.scratch_numel(w.axes), (w.label, c)
            assert 2 * _programs(c, w.axes) >= sms or c["SPLIT_K"] == 16 or K < 4 * c["BLOCK_K"] * c["SPLIT_K"]
        # the narrow k/v projections (N = 1024) split 8 or 16 ways; the widest (N = 28672) mostly not at all
        if N == 1024:
            assert {c["SPLIT_K"] for c in kept} <= {4, 8, 16} and 16 in {c["SPLIT_K"] for c in kept}
        if N == 28672:
            assert {c["SPLIT_K"] for c in kept} <= {1, 2}
    # prefill shapes have no swap-AB space; the interpreter suite keeps a small one (pointer loads only)
    assert not prune(TEMPLATE, Workload(op="gemm", axes={"M": 512, "N": 4096, "K": 4096}, dtype="bf16"), HOPPER)[0]
    for w in load_workloads(GEMM / "workloads-interpret.toml", SPEC):
        kept = prune(TEMPLATE, w, VIRTUAL_HOPPER)[0]
        assert kept and all(c["TMA"] == 0 for c in kept), w.label


def test_pruning_reasons_name_what_they_prune():
    w = Workload(op="gemm", axes={"M": 1, "N": 4096, "K": 4096}, dtype="bf16")
    base = _cfg(BLOCK_N=128, BLOCK_K=128, num_stages=4, SPLIT_K=4, TMA=1)
    assert why_pruned(TEMPLATE, w, HOPPER, base) is None
    assert "re-read" in why_pruned(TEMPLATE, Workload(op="gemm", axes={**w.axes, "M": 64}, dtype="bf16"), HOPPER,
                                   base)
    assert "half the SMs" in why_pruned(TEMPLATE, w, HOPPER, {**base, "SPLIT_K": 1})
    assert "idle" in why_pruned(TEMPLATE, w, HOPPER, {**base, "SPLIT_K": 16, "num_stages": 2})
    assert "two warpgroups" in why_pruned(TEMPLATE, w, HOPPER, {**base, "BLOCK_N": 64, "num_warps": 8})
    assert "shared" in why_pruned(TEMPLATE, Workload(op="gemm", axes={**w.axes, "K": 65536}, dtype="bf16"), HOPPER,
                                  {**base, "BLOCK_N": 256, "BLOCK_K": 256, "num_stages": 4, "SPLIT_K": 8})
    assert "few tokens" in why_pruned(TEMPLATE, Workload(op="gemm", axes={**w.axes, "M": 129}, dtype="bf16"), HOPPER,
                                      base)


def test_swapab_passes_the_evaluator_battery_through_the_harness_workspace(tmp_path):
    """The worker's workspace (poisoned before every verified call and timed sample), held-out shapes, repeats."""
    assert_battery_passes(BUNDLES["gemm"], "swapab", _cfg(SPLIT_K=2),
                          [({"M": 3, "N": 100, "K": 300}, "bf16")], tmp_path)
    assert_battery_passes(BUNDLES["gemm_nt"], "swapab", _cfg(SPLIT_K=2, TRANS_B=1),
                          [({"M": 16, "N": 72, "K": 260}, "fp16")], tmp_path)


# ---- ahead-of-time sm_90 builds ---------------------------------------------------------------------------------

# Per op one decode shape (gemm: the Llama-3-8B k/v projection at 16 tokens, split 8 or 16 ways; gemm_nt: q/o at
# 128 tokens, token tiles of 64 and 128, unsplit and split), and of its pruned space the configuration with the most
# registers estimated for each choice of the parameters named: the edge where a build would spill.
AOT_CASES = {"gemm": ({"M": 16, "N": 1024, "K": 4096}, ("BLOCK_N", "num_warps", "TMA")),
             "gemm_nt": ({"M": 128, "N": 4096, "K": 4096}, ("BLOCK_M", "TMA", "SPLIT_K"))}


def _register_edge(t, w, keys):
    names = workload_names(w, HOPPER)
    best = {}
    for c in prune(t, w, HOPPER)[0]:
        k = tuple(c[p] for p in keys)
        score = (evaluate_expression(t.resources.regs_per_thread, {**names, **c}),
                 evaluate_expression(t.resources.shared_bytes, {**names, **c}))
        if k not in best or score > best[k][0]:
            best[k] = (score, c)
    return [c for _, c in best.values()]


@pytest.mark.parametrize("op", ["gemm", "gemm_nt"])
def test_ahead_of_time_builds_use_warpgroup_mma_with_the_tokens_as_its_narrow_n(op):
    """sm_90 builds (this host's Triton) at the register edge of the pruned space: every one builds without spills,
    issues `wgmma` m64nBLOCK_Mk16 (the weight rows on the MMA's M side, the tokens on its N side; no `mma.sync`),
    loads through TMA exactly when asked, takes its tile's counter with one thread's compare-and-swap, and stays
    within the estimates: shared memory never below the build and at most 8 bytes above it (its barriers: 16 bytes
    a stage with b as [K, N], 8 with b as [N, K]), registers never below.
    (The whole pruned spaces of four decode shapes, 580 configurations, were built the same way: see the spec.)"""
    from kernelloop.tune.profile.sass import find_tool
    from kernelloop.core.build.aot import BUILT, build_configs
    from kernelloop.tune.search.prune_audit import _estimate
    if find_tool("cuobjdump") is None:
        pytest.skip("no cuobjdump (Triton's wheel ships one)")
    b = BUNDLES[op]
    t = b.spec.template("swapab")
    axes, keys = AOT_CASES[op]
    w = Workload(op=op, axes=axes, dtype="bf16")
    cfgs = _register_edge(t, w, keys)
    assert 8 <= len(cfgs) <= 16, len(cfgs)
    assert {c["BLOCK_M"] for c in cfgs} == ({16} if op == "gemm" else {64, 128})
    outs = build_configs(b.spec, {"swapab": GEMM / "swapab_kernel.py"}, w,
                         [{"template": "swapab", **c} for c in cfgs], jobs=2, keep_asm=True)
    names = workload_names(w, HOPPER)
    for cfg, o in zip(cfgs, outs):
        assert o.status == BUILT, (cfg, o.error[-800:])
        assert not o.spills, cfg
        est = _estimate(t, names, cfg)
        assert 0 <= est["shared"] - o.shared_bytes <= 8, (cfg, est["shared"], o.shared_bytes)
        assert est["regs"] >= o.registers, (cfg, est["regs"], o.registers)
        assert o.threads == evaluate_expression(t.resources.threads, {**names, **cfg})
        (kernel,) = o.kernels
        ptx = kernel["asm"]["ptx"]
        assert set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)", ptx)) == \
            {f"m64n{cfg['BLOCK_M']}k16"}, cfg
        assert "mma.sync" not in ptx
        assert ("cp.async.bulk.tensor" in ptx) == bool(cfg["TMA"]), cfg
        cas = re.findall(r"(@%p\d+ )?atom\.global\.(\w+)\.gpu\.cas\.b64", ptx)
        if cfg["SPLIT_K"] > 1:
            assert cas and all(pred for pred, _ in cas), "one thread takes the counter"
            assert {sem for _, sem in cas} == {"relaxed", "acq_rel"}
        else:
            assert not cas
        assert kernel["grid"][0] == _programs(cfg, axes)


# ---- GPU tier --------------------------------------------------------------------------------------------------

# decode shapes (one token to 128; the k/v projection, a square one, the widest), and shapes off every tile
GPU_SHAPES = [{"M": 1, "N": 1024, "K": 8192}, {"M": 16, "N": 4096, "K": 4096}, {"M": 64, "N": 1024, "K": 4096},
              {"M": 128, "N": 28672, "K": 8192}, {"M": 5, "N": 1000, "K": 4000}, {"M": 100, "N": 520, "K": 200}]
GPU_CONFIGS = [_cfg(BLOCK_N=128, BLOCK_M=16, BLOCK_K=128, num_warps=4, num_stages=4, SPLIT_K=4, TMA=1),
               _cfg(BLOCK_N=64, BLOCK_M=16, BLOCK_K=128, num_warps=4, num_stages=6, SPLIT_K=16, TMA=1),
               _cfg(BLOCK_N=256, BLOCK_M=32, BLOCK_K=64, num_warps=8, num_stages=4, SPLIT_K=8, TMA=0),
               _cfg(BLOCK_N=128, BLOCK_M=64, BLOCK_K=64, num_warps=4, num_stages=3, SPLIT_K=1, TMA=1),
               _cfg(BLOCK_N=128, BLOCK_M=128, BLOCK_K=64, num_warps=8, num_stages=3, SPLIT_K=2, TMA=0)]


def _unpinned(cfg):
    return {k: v for k, v in cfg.items() if k != "TRANS_B"}


def test_the_gpu_check_itself_runs_in_the_interpreter():
    """The GPU tier's check (template_check.py) on this CPU: two configurations (split and not) on a one-token
    shape, both dtypes and layouts, the second call on the workspace the first one left."""
    rows = template_check.check("swapab_kernel.py", [_unpinned(_cfg(SPLIT_K=3)), _unpinned(_cfg(BLOCK_K=128))],
                                [{"M": 1, "N": 100, "K": 400}], calls=2, workspace="kernel", fresh_workspace=False,
                                device="cpu", timeout=240)
    assert len(rows) == 2 * 2 * 2 and not template_check.failures(rows), rows


@pytest.mark.gpu
@pytest.mark.timeout(400)
def test_gpu_swapab_passes_the_verifier():
    """On the GPU the k-ranges of a tile finish in any order and the last to arrive reduces them: five
    configurations (split 1 to 16, TMA and pointer loads, 4 and 8 warps, token tiles 16 to 128) x six shapes
    (decode shapes and shapes off every tile) x fp16/bf16 x b row-major/transposed; three calls each, the later two
    on the workspace the call before left, bitwise equal; nothing written past c or the workspace."""
    rows = template_check.check("swapab_kernel.py", [_unpinned(c) for c in GPU_CONFIGS], GPU_SHAPES, calls=3,
                                workspace="kernel", fresh_workspace=False, out_name="gemm-swapab-gpu")
    assert len(rows) == 5 * 6 * 2 * 2
    failed = template_check.failures(rows)
    assert not failed, failed[:5]
