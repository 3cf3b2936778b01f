"""The gemm ops (ops/gemm*): specs and workloads, static rules, the shared template against the verifier, pruning,
the baselines table, one optimize run end to end; and a `gpu` tier that runs the same checks on a CUDA device.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":  # the GPU tier (pytest -m gpu) compiles for the device
    os.environ["TRITON_INTERPRET"] = "1"

import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from functools import lru_cache  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from kernelloop.base.builtin import ops_dir
import kernelloop.base.records.spec as records_spec  # noqa: E402
import kernelloop.core.spec.space as space  # noqa: E402
from kernelloop.cli.app import app  # noqa: E402
from kernelloop.core.device import device_properties  # noqa: E402
from kernelloop.base.records import DType, Status, Workload  # noqa: E402
from kernelloop.core.reference.inputs import TORCH_DTYPES, is_poison, make_inputs, poison_  # noqa: E402
from kernelloop.core.reference.truth import truth  # noqa: E402
from kernelloop.core.spec import load_op, load_workloads  # noqa: E402
from kernelloop.core.verify.compare import check_outputs, error_metrics  # noqa: E402
from kernelloop.core.verify.rules import check_source  # noqa: E402

from battery import assert_battery_passes  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OPS = ops_dir()
GEMM_OPS = ["gemm", "gemm_bias", "gemm_bias_gelu", "gemm_bias_silu", "gemm_f32out", "gemm_nt"]
PINNED = {"gemm": ("none", 0), "gemm_bias": ("bias", 0), "gemm_bias_gelu": ("bias_gelu", 0),
          "gemm_bias_silu": ("bias_silu", 0), "gemm_f32out": ("none", 0), "gemm_nt": ("none", 1)}
SHARED_SUITES = [OPS / "gemm" / "workloads-prefill.toml", OPS / "gemm" / "workloads-decode.toml"]
SMEM_LIMIT = 232448  # sm_90's shared memory per block (opt-in)
# Per-test ceiling on the interpreter; the whole module runs in well under a minute on 2 cores.
pytestmark = pytest.mark.timeout(120)


@lru_cache(maxsize=None)
def bundle(op: str):
    return load_op(OPS / op)


def template(op: str):
    return bundle(op).spec.templates[0]


def kernel_module():
    path = OPS / "gemm" / "kernel.py"
    spec = importlib.util.spec_from_file_location("_test_gemm_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


KERNEL = kernel_module()


def has_interpreted_tma() -> bool:
    """Host-side tensor descriptors run in this Triton's interpreter (triton 3.9 here)."""
    return hasattr(__import__("triton").language, "make_tensor_descriptor")


# ---- specs, workloads, rules -----------------------------------------------------------------------------------

@pytest.mark.parametrize("op", GEMM_OPS)
def test_spec_workloads_and_static_rules(op):
    b = bundle(op)
    spec = b.spec
    assert spec.name == op and set(spec.dtypes) == {DType.fp16, DType.bf16}
    # gemm alone has the split-K template for 16-bit outputs, stream-K (both use the workspace) and the
    # warp-specialized persistent one, all in the one kernel file; gemm and gemm_nt also have the Gluon kernel (its
    # own file) and the swap-AB decode template (its own file; a workspace for its split-K); gemm also the three
    # generated from their schedules (each its own file), which the bias ops list too with their EPILOGUE pinned (the
    # schedules lower fused epilogues)
    schedules = ["schedule_ws", "schedule_subtiled", "schedule_pingpong"]
    assert [t.name for t in spec.templates] == {"gemm": ["tiled", "splitk", "streamk", "swapab", "persistent_ws",
                                                         "gluon_ws", "gluon_subtiled", "gluon_pingpong", *schedules],
                                                "gemm_nt": ["tiled", "gluon_ws", "swapab"],
                                                "gemm_f32out": ["tiled"]}.get(op, ["tiled", *schedules])
    assert {t.file for t in spec.templates if not t.name.startswith(("gluon", "schedule", "swapab"))} \
        == {spec.templates[0].file}
    assert (spec.scratch is not None) == (op in ("gemm", "gemm_nt"))
    t = spec.templates[0]
    # every variant runs the one shared template, pinned by single-valued parameters
    assert (b.folder / t.file).resolve() == (OPS / "gemm" / "kernel.py").resolve()
    assert b.template_sources["tiled"] == (OPS / "gemm" / "kernel.py").read_text()
    params = {p.name: p.values for p in t.params}
    epilogue, trans_b = PINNED[op]
    assert params["EPILOGUE"] == [epilogue] and params["TRANS_B"] == [trans_b]
    # gemm and the variants sharing its space also have TMA=2: the c tile stored in halves (epilogue subtiling)
    subtiled = op in ("gemm", "gemm_bias", "gemm_nt")
    # their pipelines go to 8 stages (small tiles on few-tile shapes), the other variants' to 5
    assert math.prod(len(v) for v in params.values()) <= (4608 if subtiled else 2048)
    assert params["num_stages"] == ([2, 3, 4, 5, 6, 8] if subtiled else [2, 3, 4, 5])
    assert params["TMA"] == ([0, 1, 2] if subtiled else [0, 1]) and params["PERSISTENT"] == [0, 1]
    assert params.get("SPLIT_K", [1]) == ([1, 2] if op == "gemm_f32out" else [1])
    assert check_source(b.template_sources["tiled"], spec) == []
    # tolerances: sqrt(K)-scaled atol, small enough that zeros fail; only in-domain distributions
    for d in spec.dtypes:
        tol = spec.tolerance[d]
        assert tol.atol_scale == "sqrt_(K)" and tol.atol <= 2e-6
    assert spec.inputs_policy.distributions == ["normal", "near_zero"]
    assert spec.heldout_axes == ["M"]
    axes = {"M": 3, "N": 5, "K": 7}
    assert spec.flops(axes, DType.fp16) == 2 * 3 * 5 * 7
    out_elem = 4 if op == "gemm_f32out" else 2
    bias = 5 * 2 if "bias" in op else 0
    assert spec.bytes_moved(axes, DType.fp16) == (3 * 7 + 7 * 5) * 2 + 3 * 5 * out_elem + bias
    for f in ("workloads.toml", "workloads-interpret.toml"):
        wl = load_workloads(b.folder / f, spec)
        assert wl and all(w.op == op for w in wl)
    gpu = load_workloads(b.folder / "workloads.toml", spec)
    assert {"M": 4096, "N": 4096, "K": 4096} in [w.axes for w in gpu]
    interp = load_workloads(b.folder / "workloads-interpret.toml", spec)
    assert {w.dtype for w in interp} == {DType.fp16, DType.bf16}
    assert all(max(w.axes.values()) <= 160 for w in interp)
    for suite in SHARED_SUITES:  # the Llama-3 suites carry no `op` key and serve every gemm folder
        assert load_workloads(suite, spec)


def test_llama_suites():
    spec = bundle("gemm").spec
    prefill = load_workloads(SHARED_SUITES[0], spec)
    decode = load_workloads(SHARED_SUITES[1], spec)
    nk = {(4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336),
          (8192, 8192), (1024, 8192), (28672, 8192), (8192, 28672)}
    assert {(w.axes["N"], w.axes["K"]) for w in prefill} == nk == {(w.axes["N"], w.axes["K"]) for w in decode}
    assert {w.axes["M"] for w in prefill} == {512, 2048, 8192}
    assert {w.axes["M"] for w in decode} == {1, 16, 64, 128}
    assert len(prefill) == 24 and len(decode) == 32


# ---- the template against the verifier -------------------------------------------------------------------------

# (label, axes, config overrides). Shapes are tiny and mostly not multiples of the tiles; defaults below.
CASES = [
    ("tile-masked", {"M": 37, "N": 40, "K": 72}, {}),
    ("persistent-grouped", {"M": 37, "N": 40, "K": 72}, {"GROUP_M": 8, "PERSISTENT": 1}),
    ("one-row-short-k", {"M": 1, "N": 33, "K": 16}, {"BLOCK_N": 64}),
    ("even-k-3-stages", {"M": 20, "N": 64, "K": 128}, {"BLOCK_N": 64, "num_stages": 3}),
    ("k128-wide-n", {"M": 9, "N": 100, "K": 136}, {"BLOCK_M": 32, "BLOCK_K": 128, "BLOCK_N": 128}),
    ("tma-persistent", {"M": 37, "N": 40, "K": 72}, {"TMA": 1, "PERSISTENT": 1, "GROUP_M": 8}),
    ("tma-one-row-short-k", {"M": 1, "N": 40, "K": 16}, {"TMA": 1, "BLOCK_M": 64}),  # boxes past every edge
]
SUBTILE_CASES = [  # gemm, gemm_bias, gemm_nt: c stored as two [BLOCK_M, BLOCK_N / 2] halves, across partial tiles and N edges
    ("tma-subtiled-persistent", {"M": 37, "N": 72, "K": 72}, {"TMA": 2, "PERSISTENT": 1, "GROUP_M": 8}),
    ("tma-subtiled-one-row", {"M": 1, "N": 40, "K": 16}, {"TMA": 2, "BLOCK_M": 64, "BLOCK_N": 64}),
]
SPLIT_CASES = [
    ("split-k", {"M": 20, "N": 40, "K": 200}, {"SPLIT_K": 2}),
    ("split-k-persistent", {"M": 37, "N": 40, "K": 136}, {"SPLIT_K": 2, "PERSISTENT": 1}),
    ("split-k-tma", {"M": 5, "N": 40, "K": 256}, {"SPLIT_K": 2, "TMA": 1}),
]
BASE = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64, "GROUP_M": 1, "num_warps": 4, "num_stages": 2,
        "PERSISTENT": 0, "TMA": 0}


def config_for(op: str, overrides: dict) -> dict:
    params = {p.name: p.values for p in template(op).params}
    cfg = {**BASE, **overrides}
    if cfg["GROUP_M"] not in params["GROUP_M"]:
        cfg["GROUP_M"] = params["GROUP_M"][0]
    cfg.update(EPILOGUE=params["EPILOGUE"][0], TRANS_B=params["TRANS_B"][0])
    if "SPLIT_K" in params:
        cfg.setdefault("SPLIT_K", 1)
    for k, v in cfg.items():  # every test config is a point of the declared space
        assert v in params[k], (op, k, v)
    return cfg


def run_case(op: str, axes: dict, dtype: str, cfg: dict, seed: int, distribution: str):
    """Launch on poisoned outputs with a poisoned guard row after them; the verifier's verdict and the outputs."""
    spec = bundle(op).spec
    w = Workload(op=op, axes=axes, dtype=dtype)
    inputs = make_inputs(spec, w, seed, "cpu", distribution)
    before = [t.clone() for t in inputs]
    out_dtype = TORCH_DTYPES[spec.tensor_dtype(spec.outputs[0], w.dtype)]
    buf = poison_(torch.empty(axes["M"] + 1, axes["N"], dtype=out_dtype))
    c = buf[:axes["M"]]
    KERNEL.launch(*inputs, c, **spec.scalars, **cfg)
    assert bool(is_poison(buf[axes["M"]]).all()), "the kernel wrote past the end of its output"
    refs = truth(spec, bundle(op).folder / spec.reference, before)
    verdict = check_outputs(spec, w, [c], refs, before, inputs, f"{op} {axes} {dtype} {distribution}")
    return verdict, c, refs[0], spec.tolerance_for(w)


def all_cases():
    for op in GEMM_OPS:
        for label, axes, over in CASES + (SPLIT_CASES if op == "gemm_f32out" else []) + \
                (SUBTILE_CASES if op in ("gemm", "gemm_bias", "gemm_nt") else []):
            for dtype in ("fp16", "bf16"):
                marks = []
                if over.get("TMA") and not has_interpreted_tma():
                    marks = [pytest.mark.skip(reason="this Triton's interpreter has no tensor descriptors")]
                yield pytest.param(op, axes, dtype, over, id=f"{op}-{label}-{dtype}", marks=marks)


@pytest.mark.parametrize("op,axes,dtype,over", list(all_cases()))
def test_kernel_passes_the_verifier_and_zeros_fail(op, axes, dtype, over):
    cfg = config_for(op, over)
    spec = bundle(op).spec
    for k, distribution in enumerate(spec.inputs_policy.distributions):
        verdict, c, ref, tol = run_case(op, axes, dtype, cfg, seed=1000 + k, distribution=distribution)
        assert verdict.status is Status.PASSED, verdict.message
        assert verdict.metrics[0].error_cap_ratio < 1.0
        # an all-zero answer fails on the tolerance itself, not only on the degenerate-output check
        zeros = torch.zeros_like(c)
        assert error_metrics("c", zeros, ref, tol).mismatched > 0
        bad = check_outputs(spec, Workload(op=op, axes=axes, dtype=dtype), [zeros], [ref], [], [], "zeros")
        assert bad.status is Status.WRONG_VALUES
        if k == 0:  # bitwise determinism (the verifier runs the first case three times); split-K included
            again, c2, _, _ = run_case(op, axes, dtype, cfg, seed=1000, distribution=distribution)
            assert torch.equal(c.view(torch.uint8), c2.view(torch.uint8))


def test_launch_rejects_a_mismatched_epilogue_and_split_k_on_16_bit_outputs():
    a, b = torch.ones(4, 8, dtype=torch.float16), torch.ones(8, 32, dtype=torch.float16)
    c = torch.empty(4, 32, dtype=torch.float16)
    cfg = config_for("gemm", {})
    with pytest.raises(ValueError, match="EPILOGUE"):
        KERNEL.launch(a, b, c, **{**cfg, "EPILOGUE": "bias"})
    with pytest.raises(ValueError, match="SPLIT_K"):
        KERNEL.launch(a, b, c, **cfg, SPLIT_K=2)
    with pytest.raises(ValueError, match="fp32 scratch of at least"):
        KERNEL.launch(a, b, c, **cfg, SPLIT_K=2, scratch=torch.empty(2 * 4 * 32 - 1))
    with pytest.raises(ValueError, match="fp32 scratch"):
        KERNEL.launch(a, b, c, **cfg, SPLIT_K=2, scratch=torch.empty(2 * 4 * 32, dtype=torch.float16))
    with pytest.raises(ValueError, match="contiguous fp32 scratch"):
        KERNEL.launch(a, b, c, **cfg, SPLIT_K=2, scratch=torch.empty(2, 2 * 4 * 32)[:, ::2].t())
    with pytest.raises(ValueError, match="indexed in 32 bits"):
        KERNEL.launch(torch.ones(65536, 8, dtype=torch.float16), torch.ones(8, 16384, dtype=torch.float16),
                      torch.empty(1, dtype=torch.float16).expand(65536, 16384), **cfg, SPLIT_K=2, scratch=torch.empty(1))
    with pytest.raises(ValueError, match="no epilogue"):
        KERNEL.launch(a, b, torch.ones(32, dtype=torch.float16), c, **{**cfg, "EPILOGUE": "bias"}, SPLIT_K=2,
                      scratch=torch.empty(2 * 4 * 32))


# ---- split-K with a 16-bit output: partial tiles in the harness's workspace ---------------------------------------

SPLITK_16_CASES = [
    ("k2", {"M": 20, "N": 40, "K": 200}, {"SPLIT_K": 2}),
    ("k3-ragged", {"M": 37, "N": 72, "K": 136}, {"SPLIT_K": 3, "BLOCK_M": 32, "BLOCK_N": 64}),
    ("k4-one-row", {"M": 1, "N": 40, "K": 256}, {"SPLIT_K": 4}),
    ("k8-ragged", {"M": 19, "N": 48, "K": 1000}, {"SPLIT_K": 8, "BLOCK_K": 64}),   # the last k-ranges short
    ("k8-empty-splits", {"M": 5, "N": 40, "K": 100}, {"SPLIT_K": 8, "BLOCK_K": 64}),  # 2 k-steps: 6 splits empty
]


def splitk_config(over: dict) -> dict:
    params = {p.name: p.values for p in bundle("gemm").spec.template("splitk").params}
    cfg = {**BASE, "GROUP_M": 8, "EPILOGUE": "none", "TRANS_B": 0, **over}
    for k, v in cfg.items():
        assert v in params[k], (k, v)
    return cfg


@pytest.mark.parametrize("axes,over", [pytest.param(a, o, id=label) for label, a, o in SPLITK_16_CASES])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_split_k_with_a_16_bit_output_passes_the_verifier_deterministically(axes, over, dtype):
    spec = bundle("gemm").spec
    cfg = splitk_config(over)
    w = Workload(op="gemm", axes=axes, dtype=dtype)
    numel = spec.scratch_numel(axes)
    assert numel >= 8 * axes["M"] * axes["N"], "eight partial planes for outputs of at most 2^21 elements"
    outs = []
    for seed in (7, 7, 8):
        inputs = make_inputs(spec, w, seed, "cpu", "normal")
        before = [t.clone() for t in inputs]
        buf = poison_(torch.empty(axes["M"] + 1, axes["N"], dtype=TORCH_DTYPES[DType(dtype)]))
        c = buf[:axes["M"]]
        ws = poison_(torch.empty(numel + 64))      # a guard after the workspace
        KERNEL.launch(*inputs, c, **cfg, scratch=ws[:numel])
        assert bool(is_poison(buf[axes["M"]]).all()), "the kernel wrote past the end of its output"
        assert bool(is_poison(ws[numel:]).all()), "the kernel wrote past the end of its workspace"
        used = cfg["SPLIT_K"] * axes["M"] * axes["N"]
        assert not bool(is_poison(ws[:used]).any()), "every partial plane is written before it is read"
        refs = truth(spec, bundle("gemm").folder / spec.reference, before)
        verdict = check_outputs(spec, w, [c], refs, before, inputs, f"split-K {axes} {dtype}")
        assert verdict.status is Status.PASSED, verdict.message
        assert verdict.metrics[0].error_cap_ratio < 1.0
        outs.append(c.clone())
    assert torch.equal(outs[0].view(torch.uint8), outs[1].view(torch.uint8)), "bitwise deterministic"
    assert not torch.equal(outs[0], outs[2])


def test_split_k_template_is_kept_only_for_few_tiles_and_the_workspace_only_for_small_outputs():
    spec = bundle("gemm").spec
    t = spec.template("splitk")
    few = {"M": 512, "N": 1024, "K": 4096}
    wide = {"M": 512, "N": 8192, "K": 4096}          # 2^22 elements: four planes at most
    many = {"M": 4096, "N": 4096, "K": 4096}
    # split-K's planes, or stream-K's 160 partial 128x256 tiles and flags where that is more
    streamk = 160 * (128 * 256 + 2)
    assert spec.scratch_numel(few) == max(8 * 512 * 1024, streamk)
    assert spec.scratch_numel(wide) == max(4 * 512 * 8192, streamk) == 4 * 512 * 8192
    assert spec.scratch_numel(many) == streamk
    kept = {name: space.prune(t, Workload(op="gemm", axes=axes, dtype="bf16"), H200_LIKE)[0]
            for name, axes in (("few", few), ("wide", wide), ("many", many))}
    assert kept["many"] == []
    assert kept["few"] and {c["SPLIT_K"] for c in kept["few"]} == {2, 3, 4, 8}
    assert kept["wide"] and {c["SPLIT_K"] for c in kept["wide"]} == {2, 3, 4}
    # 16 tiles of 128x256 split 8 ways: 128 programs, one wave on 132 SMs
    assert any(c["BLOCK_M"] == 128 and c["BLOCK_N"] == 256 and c["SPLIT_K"] == 8 for c in kept["few"])
    # every kept configuration leaves SMs idle without split-K and fits its partial planes in the workspace
    for name, axes in (("few", few), ("wide", wide)):
        assert all(math.ceil(axes["M"] / c["BLOCK_M"]) * math.ceil(axes["N"] / c["BLOCK_N"]) < 132
                   for c in kept[name])
        assert all(c["SPLIT_K"] * axes["M"] * axes["N"] <= spec.scratch_numel(axes) for c in kept[name])


# ---- pruning -------------------------------------------------------------------------------------------------

def smem_estimate(cfg: dict, elem: int) -> int:
    """The a and b tiles' pipeline buffers: num_stages of them, one fewer below 64 rows (as Triton 3.9 builds them)."""
    stages = cfg["num_stages"] - (cfg["BLOCK_M"] < 64)
    return stages * (cfg["BLOCK_M"] * cfg["BLOCK_K"] + cfg["BLOCK_K"] * cfg["BLOCK_N"]) * elem


H200_LIKE = device_properties("interpret").with_(virtual=False, name="H200-like (sm_90, 132 SMs)")


def _same_space_as_gemm(op: str) -> bool:
    """The template block equals gemm's apart from the pinned EPILOGUE / TRANS_B (so are the pruned spaces)."""
    def strip(t):
        d = t.model_dump()
        return {**d, "file": "", "params": [p for p in d["params"] if p["name"] not in ("EPILOGUE", "TRANS_B")]}
    return strip(template(op)) == strip(template("gemm"))


def _suites(op: str):
    b = bundle(op)
    yield b.folder / "workloads-interpret.toml", device_properties("interpret")
    yield b.folder / "workloads.toml", H200_LIKE
    if op == "gemm" or not _same_space_as_gemm(op):
        for suite in SHARED_SUITES:
            yield suite, H200_LIKE


@pytest.mark.parametrize("op", GEMM_OPS)
def test_pruning_keeps_a_space_for_every_workload_within_shared_memory(op):
    t = template(op)
    spec = bundle(op).spec
    for path, props in _suites(op):
        for w in load_workloads(path, spec):
            kept, report = space.prune(t, w, props)
            assert kept, f"{path.name}: {w.label} has an empty space: {report.as_dict()}"
            for cfg in kept:
                assert smem_estimate(cfg, w.dtype.itemsize) <= SMEM_LIMIT, (w.label, cfg)
                names = {**w.axes, "elem": w.dtype.itemsize, **cfg}
                assert records_spec.evaluate_expression(t.resources.shared_bytes, names) <= SMEM_LIMIT, (w.label, cfg)
                assert cfg["BLOCK_M"] == 16 or cfg["BLOCK_M"] <= max(16, 1 << (w.axes["M"] - 1).bit_length())
                if props.virtual:
                    assert cfg["TMA"] == 0  # never run through the interpreter by the loop
    # gemm_bias and gemm_nt share gemm's space and rules; the activations model more registers, f32out has split-K
    assert _same_space_as_gemm(op) == (op in ("gemm", "gemm_bias", "gemm_nt"))


# ---- baselines and the loop ----------------------------------------------------------------------------------

@pytest.mark.parametrize("op", GEMM_OPS)
def test_baselines_table(op):
    path = OPS / op / "baselines.py"
    spec = importlib.util.spec_from_file_location(f"_test_{op}_baselines", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert "cublas" in mod.BASELINES and all(callable(f) for f in mod.BASELINES.values())
    if op == "gemm_f32out":
        return  # torch.mm(out_dtype=float32) exists on CUDA only
    s = bundle(op).spec
    w = Workload(op=op, axes={"M": 5, "N": 6, "K": 7}, dtype="bf16")
    inputs = [t.float() for t in make_inputs(s, w, 0, "cpu")]
    want = truth(s, OPS / op / s.reference, inputs)[0]
    got = mod.BASELINES["cublas"]()(*inputs)
    assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-5)


def test_optimize_gemm_end_to_end(tmp_path):
    """On the first workload of the interpreter suite (M and N off the tiles, K off BLOCK_K: masked edges and a
    masked last k-step): the checks hold per workload; the suite's other two would add interpreter time only."""
    out = tmp_path / "run"
    wl = tmp_path / "workloads.toml"
    wl.write_text('op = "gemm"\n[[workload]]\naxes = { M = 48, N = 40, K = 72 }\ndtype = "fp16"\n')
    r = CliRunner().invoke(app, ["optimize", str(OPS / "gemm"), "--device", "interpret", "--budget", "2",
                                 "--no-confirm", "--json", "--out", str(out), "--workloads", str(wl)])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert summary["status"] == "complete" and summary["interpreter"] is True
    assert summary["counts"] == {"PASSED": 2 * len(summary["workloads"])}
    assert all(w["trials"] == w["passed"] == 2 for w in summary["workloads"])


# ---- GPU tier --------------------------------------------------------------------------------------------------

# One op per process, in a fresh interpreter without TRITON_INTERPRET (this module sets it for the CPU tests above);
# the processes compile in parallel. Prints one JSON line: the worst |err| / allowed per dtype and one row per case.
GPU_SWEEP = r"""
import importlib.util, json, sys, torch
from pathlib import Path
from kernelloop.base.records import Workload, evaluate_expression
from kernelloop.core.reference.inputs import TORCH_DTYPES, is_poison, make_inputs, poison_
from kernelloop.core.reference.truth import truth
from kernelloop.core.spec import load_op
from kernelloop.core.verify.compare import check_outputs, error_metrics
ops_dir, op = Path(sys.argv[1]), sys.argv[2]
s = importlib.util.spec_from_file_location("gemm_kernel_gpu", ops_dir / "gemm" / "kernel.py")
kernel = importlib.util.module_from_spec(s); s.loader.exec_module(kernel)
SHAPES = [{"M": 1000, "N": 1000, "K": 4096}, {"M": 1, "N": 1024, "K": 8192}, {"M": 333, "N": 520, "K": 200}]
BIG = {"M": 4096, "N": 4096, "K": 4096}
CONFIGS = [
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3, PERSISTENT=1, TMA=1),
    dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=128, GROUP_M=1, num_warps=4, num_stages=5, PERSISTENT=0, TMA=0),
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4, PERSISTENT=0, TMA=0),
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=4, PERSISTENT=0, TMA=1),
    dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=128, GROUP_M=1, num_warps=4, num_stages=3, PERSISTENT=1, TMA=0),
]
b = load_op(ops_dir / op); spec = b.spec
params = {p.name: p.values for p in spec.templates[0].params}
configs = [dict(c) for c in (CONFIGS if op in ("gemm", "gemm_f32out") else CONFIGS[:2])]
if "SPLIT_K" in params:
    configs += [dict(c, SPLIT_K=2) for c in CONFIGS[1:4]]
FEW = {"M": 512, "N": 1024, "K": 4096}  # 32 tiles of 128x128 on 132 SMs: where split-K pays
SPLITK = any(t.name == "splitk" for t in spec.templates)
if SPLITK:  # gemm's splitk template: a 16-bit c summed from fp32 partials in the workspace
    configs += [dict(c, SPLIT_K=k, PERSISTENT=0, GROUP_M=8) for c, k in ((CONFIGS[1], 2), (CONFIGS[3], 3),
                                                                           (CONFIGS[4], 4), (CONFIGS[0], 8))]
rows, worst, skipped = [], {}, []
for i, cfg in enumerate(configs):
    cfg.update(EPILOGUE=params["EPILOGUE"][0], TRANS_B=params["TRANS_B"][0])
    if cfg["GROUP_M"] not in params["GROUP_M"]:
        cfg["GROUP_M"] = params["GROUP_M"][0]
    smem = evaluate_expression(spec.templates[0].resources.shared_bytes, {**BIG, "elem": 2, **cfg})
    if smem > 232448:  # pruning never keeps it (e.g. the persistent TMA 128x256 tile with an fp32 c staged)
        skipped.append(cfg); continue
    partials = SPLITK and cfg.get("SPLIT_K", 1) > 1
    for axes in SHAPES + ([FEW] if partials else [BIG] if i == 0 or cfg.get("SPLIT_K", 1) > 1 else []):
        for dtype in ("fp16", "bf16"):
            w = Workload(op=op, axes=axes, dtype=dtype)
            for k, dist in enumerate(spec.inputs_policy.distributions):
                inputs = make_inputs(spec, w, 7 + k, "cuda", dist)
                out_dt = TORCH_DTYPES[spec.tensor_dtype(spec.outputs[0], w.dtype)]
                runs = []
                for _ in range(3 if k == 0 else 1):
                    buf = poison_(torch.empty(axes["M"] + 1, axes["N"], dtype=out_dt, device="cuda"))
                    ws = {"scratch": poison_(torch.empty(spec.scratch_numel(axes), device="cuda"))} if partials else {}
                    kernel.launch(*inputs, buf[:axes["M"]], **ws, **cfg)
                    torch.cuda.synchronize()
                    assert bool(is_poison(buf[axes["M"]]).all()), "wrote past the output"
                    runs.append(buf[:axes["M"]].clone())
                refs = truth(spec, b.folder / spec.reference, inputs)
                v = check_outputs(spec, w, [runs[0]], refs, inputs, inputs, "gpu")
                det = all(torch.equal(runs[0].view(torch.uint8), r.view(torch.uint8)) for r in runs[1:])
                ratio = v.metrics[0].error_cap_ratio if v.metrics else float("inf")
                zeros_fail = error_metrics("c", torch.zeros_like(runs[0]), refs[0],
                                           spec.tolerance_for(w)).mismatched > 0
                key = f"{op}:{dtype}"
                worst[key] = max(worst.get(key, 0.0), ratio)
                short = {n: cfg.get(n, 1) for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "PERSISTENT", "TMA",
                                                     "SPLIT_K")}
                rows.append(dict(op=op, dtype=dtype, dist=dist, axes=axes, cfg=short,
                                 status=v.status.value, message=v.message[:300], ratio=ratio, deterministic=det,
                                 zeros_fail=zeros_fail))
perf = {}
if op == "gemm":  # information only: the seed shape, the first config against cuBLAS (torch.matmul)
    from triton.testing import do_bench
    a, bb = (torch.randn(4096, 4096, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty(4096, 4096, device="cuda", dtype=torch.float16)
    cfg = configs[0]  # 128x256x64, 3 stages, 8 warps, persistent, TMA
    perf = {"config": cfg, "ours_ms": do_bench(lambda: kernel.launch(a, bb, c, **cfg)),
            "cublas_ms": do_bench(lambda: torch.matmul(a, bb))}
print(json.dumps({"worst_ratio": worst, "rows": rows, "perf": perf, "skipped": skipped}))
"""


@pytest.mark.gpu
@pytest.mark.timeout(580)
def test_gpu_sweep_passes_the_verifier():
    """TMA, persistent, split-K and the pointer path on the device: PASSED, deterministic, zeros fail."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    procs = {op: subprocess.Popen([sys.executable, "-c", GPU_SWEEP, str(OPS), op], env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for op in GEMM_OPS}
    results, errors = {}, {}
    for op, p in procs.items():
        out, err = p.communicate(timeout=560)
        if p.returncode:
            errors[op] = err[-3000:]
        else:
            results[op] = json.loads(out.strip().splitlines()[-1])
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "gemm-gpu-sweep.json").write_text(json.dumps(results, indent=1))
    print(json.dumps({op: r["worst_ratio"] for op, r in results.items()}, indent=1))
    print(json.dumps(results.get("gemm", {}).get("perf", {})))
    assert not errors, errors
    rows = [row for r in results.values() for row in r["rows"]]
    failed = [row for row in rows if row["status"] != "PASSED" or not row["deterministic"] or not row["zeros_fail"]]
    assert not failed, failed[:5]


def test_subtiled_epilogue_fits_four_stages_at_128x256_for_sm90():
    """Storing c in halves frees half the c staging buffer: the persistent 128x256x64 tile fits 4 stages (it needs
    262,176 bytes with the whole tile staged), and the spec's estimate follows the build to within 64 bytes."""
    from kernelloop.core.device import VIRTUAL_HOPPER
    from kernelloop.tune.profile.sass import find_tool
    from kernelloop.core.build.aot import BUILT, build_configs
    from kernelloop.tune.search.prune_audit import _estimate
    from kernelloop.core.spec.space import why_pruned, workload_names
    if find_tool("cuobjdump") is None:
        pytest.skip("no cuobjdump (Triton's wheel ships one)")
    b = bundle("gemm")
    t = b.spec.templates[0]
    w = Workload(op="gemm", axes={"M": 4096, "N": 4096, "K": 4096}, dtype="fp16")
    props = VIRTUAL_HOPPER.with_(virtual=False)
    base = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4, PERSISTENT=1,
                EPILOGUE="none", TRANS_B=0)
    whole, halves = ({"template": "tiled", **base, "TMA": tma} for tma in (1, 2))
    outs = build_configs(b.spec, {"tiled": b.folder / t.file}, w, [whole, halves], jobs=1)
    assert [o.status for o in outs] == [BUILT, BUILT], [o.error for o in outs]
    assert outs[0].shared_bytes > props.shared_per_block_optin >= outs[1].shared_bytes
    assert why_pruned(t, w, props, {k: v for k, v in whole.items() if k != "template"}) is not None
    assert why_pruned(t, w, props, {k: v for k, v in halves.items() if k != "template"}) is None
    for cfg, o in zip((whole, halves), outs):
        est = _estimate(t, workload_names(w, props), {k: v for k, v in cfg.items() if k != "template"})["shared"]
        assert 0 <= est - o.shared_bytes <= 64, (cfg["TMA"], est, o.shared_bytes)


@pytest.mark.parametrize("op", ["gemm", "gemm_nt"])
def test_shared_memory_estimate_is_never_below_the_build(op):
    """The spec's shared-memory estimate against sm_90 builds of configurations around the limit, on both sides of
    the 64-row boundary where Triton's pipeline keeps one buffer fewer, with and without TMA, persistent or not."""
    from kernelloop.core.device import VIRTUAL_HOPPER
    from kernelloop.tune.profile.sass import find_tool
    from kernelloop.core.build.aot import BUILT, build_configs
    from kernelloop.tune.search.prune_audit import _estimate
    from kernelloop.core.spec.space import workload_names
    if find_tool("cuobjdump") is None:
        pytest.skip("no cuobjdump (Triton's wheel ships one)")
    b = bundle(op)
    t = b.spec.templates[0]
    w = Workload(op=op, axes={"M": 4096, "N": 4096, "K": 4096}, dtype="fp16")
    pinned = {"EPILOGUE": PINNED[op][0], "TRANS_B": PINNED[op][1]}
    cfgs = [{"template": "tiled", "BLOCK_M": bm, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 8,
             "num_stages": st, "PERSISTENT": pe, "TMA": tma, **pinned}
            for bm, st, pe, tma in ((32, 4, 0, 0), (32, 4, 1, 1), (64, 2, 0, 0), (64, 2, 1, 1), (16, 3, 1, 0))]
    outs = build_configs(b.spec, {"tiled": b.folder / t.file}, w, cfgs, jobs=1)
    names = workload_names(w, VIRTUAL_HOPPER.with_(virtual=False))
    for cfg, o in zip(cfgs, outs):
        assert o.status == BUILT, o.error
        est = _estimate(t, names, {k: v for k, v in cfg.items() if k != "template"})["shared"]
        assert 0 <= est - o.shared_bytes <= 64, (cfg, est, o.shared_bytes)


def test_split_k_template_passes_the_evaluator_battery_through_the_harness_workspace(tmp_path):
    """The worker allocates the workspace the spec declares and passes it as `scratch=`: the splitk template, through
    the full battery (held-out shapes, repeats, timed-call re-checks with the workspace poisoned before each)."""
    assert_battery_passes(bundle("gemm"), "splitk", splitk_config({"SPLIT_K": 3}),
                          [({"M": 20, "N": 40, "K": 200}, "bf16"), ({"M": 33, "N": 48, "K": 160}, "fp16")], tmp_path)


# ---- the warp-specialized persistent template -------------------------------------------------------------------

def ws_config(over: dict) -> dict:
    params = {p.name: p.values for p in bundle("gemm").spec.template("persistent_ws").params}
    cfg = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 3, "WS": 0,
           "EPILOGUE": "none", "TRANS_B": 0, **over}
    for k, v in cfg.items():
        assert v in params[k], (k, v)
    return cfg


@pytest.mark.skipif(not has_interpreted_tma(), reason="this Triton's interpreter has no tensor descriptors")
@pytest.mark.parametrize("ws", [0, 1])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_persistent_ws_template_passes_the_verifier(ws, dtype):
    """Device-side descriptors, the persistent tile loop and the epilogue's own tile index, on ragged shapes; the
    interpreter ignores the specialization itself, so WS=1 must compute bit for bit what WS=0 does."""
    import triton
    triton.set_allocator(lambda size, alignment, stream: torch.zeros(size, dtype=torch.int8))
    spec = bundle("gemm").spec
    cfg = ws_config({"WS": ws})
    for axes in ({"M": 37, "N": 72, "K": 136}, {"M": 5, "N": 40, "K": 256}, {"M": 64, "N": 200, "K": 64}):
        verdict, c, ref, tol = run_case("gemm", axes, dtype, cfg, seed=11, distribution="normal")
        assert verdict.status is Status.PASSED, verdict.message
        other, c0, _, _ = run_case("gemm", axes, dtype, {**cfg, "WS": 1 - ws}, seed=11, distribution="normal")
        assert torch.equal(c.view(torch.uint8), c0.view(torch.uint8))


def test_persistent_ws_template_refuses_column_major_operands():
    a = torch.ones(8, 4, dtype=torch.float16).t()   # [4, 8], stride (1, 4)
    b, c = torch.ones(8, 32, dtype=torch.float16), torch.empty(4, 32, dtype=torch.float16)
    with pytest.raises(ValueError, match="row-major"):
        KERNEL.launch(a, b, c, **ws_config({}))


def test_persistent_ws_template_passes_the_evaluator_battery(tmp_path):
    if not has_interpreted_tma():
        pytest.skip("this Triton's interpreter has no tensor descriptors")
    assert_battery_passes(bundle("gemm"), "persistent_ws", ws_config({"BLOCK_M": 64, "BLOCK_N": 64}),
                          [({"M": 48, "N": 40, "K": 72}, "fp16")], tmp_path)


def test_ws_and_split_k_estimates_against_sm90_builds():
    """Ahead-of-time sm_90 builds: the shared-memory estimates of the persistent_ws and splitk templates are never
    below the build (at most 1 KB above); WS=1 at 4 warps builds 12 warps (a producer and two consumer warp groups:
    specialized), at 8 warps it builds 8 (not specialized: pruned); 64x256 does not specialize at all (pruned)."""
    from kernelloop.core.device import VIRTUAL_HOPPER
    from kernelloop.tune.profile.sass import find_tool
    from kernelloop.core.build.aot import BUILT, build_configs
    from kernelloop.tune.search.prune_audit import _estimate
    from kernelloop.core.spec.space import why_pruned, workload_names
    if find_tool("cuobjdump") is None:
        pytest.skip("no cuobjdump (Triton's wheel ships one)")
    b = bundle("gemm")
    props = VIRTUAL_HOPPER.with_(virtual=False)
    cases = [("persistent_ws", {"M": 4096, "N": 4096, "K": 4096}, ws_config(o)) for o in (
        {"BLOCK_M": 128, "BLOCK_N": 256, "num_stages": 3, "WS": 1},
        {"BLOCK_M": 64, "BLOCK_N": 128, "num_stages": 2, "WS": 1},
        {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 3, "WS": 0, "num_warps": 8})]
    cases += [("splitk", {"M": 512, "N": 1024, "K": 4096}, splitk_config(o)) for o in (
        {"BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 4, "SPLIT_K": 3, "TMA": 1, "num_warps": 8},
        {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 128, "num_stages": 5, "SPLIT_K": 2},
        {"BLOCK_M": 128, "BLOCK_N": 256, "num_stages": 2, "SPLIT_K": 2, "num_warps": 8})]
    t = b.spec.template("persistent_ws")
    w = Workload(op="gemm", axes={"M": 4096, "N": 4096, "K": 4096}, dtype="fp16")
    unspecialized = ws_config({"BLOCK_M": 128, "BLOCK_N": 128, "WS": 1, "num_warps": 8})
    failing = ws_config({"BLOCK_M": 64, "BLOCK_N": 256, "WS": 1})
    # one build process per (template, workload): the pruned ones after the kept ones of the same workload
    extra = [("persistent_ws", w.axes, c) for c in (unspecialized, failing)]
    groups: dict = {}
    for name, axes, cfg in cases + extra:
        groups.setdefault((name, tuple(axes.items())), []).append(cfg)
    built = {}
    for (name, axes), cfgs in groups.items():
        outs = build_configs(b.spec, {name: b.folder / b.spec.template(name).file},
                             Workload(op="gemm", axes=dict(axes), dtype="fp16"),
                             [{"template": name, **c} for c in cfgs], jobs=1)
        built.update({(name, json.dumps(c, sort_keys=True)): o for c, o in zip(cfgs, outs)})
    for name, axes, cfg in cases:
        tk = b.spec.template(name)
        wk = Workload(op="gemm", axes=axes, dtype="fp16")
        assert why_pruned(tk, wk, props, cfg) is None, (name, cfg)
        o = built[(name, json.dumps(cfg, sort_keys=True))]
        assert o.status == BUILT, o.error
        est = _estimate(tk, workload_names(wk, props), cfg)["shared"]
        assert 0 <= est - o.shared_bytes <= 1024, (name, cfg, est, o.shared_bytes)
        if cfg.get("WS"):
            assert {k["num_warps"] for k in o.kernels} == {12}, (cfg, o.kernels)
    outs = [built[("persistent_ws", json.dumps(c, sort_keys=True))] for c in (unspecialized, failing)]
    assert outs[0].status == BUILT and {k["num_warps"] for k in outs[0].kernels} == {8}
    assert outs[1].status != BUILT and "PassManager" in outs[1].error
    assert why_pruned(t, w, props, unspecialized) and why_pruned(t, w, props, failing)


@pytest.mark.parametrize("op,over", [
    ("gemm", {"PERSISTENT": 1, "GROUP_M": 8}),
    ("gemm_bias_gelu", {"PERSISTENT": 1, "GROUP_M": 8}),
    ("gemm_f32out", {"PERSISTENT": 1, "SPLIT_K": 2}),
])
def test_flattened_persistent_loop_computes_what_the_nested_loop_does(op, over):
    """FLATTEN=1 (a launch option of the template, outside the searched space: benchmarks/gemm_kernels.py measures
    it) fuses the persistent tile loop with its k-loop; the interpreter runs the fused loop as written, so the
    result must pass the verifier and equal the nested loop's bit for bit, over partial tiles and several tiles a
    program."""
    cfg = config_for(op, over)
    for axes in ({"M": 37, "N": 72, "K": 136}, {"M": 70, "N": 40, "K": 64}):
        verdict, c, _, _ = run_case(op, axes, "fp16", {**cfg, "FLATTEN": 1}, seed=5, distribution="normal")
        assert verdict.status is Status.PASSED, verdict.message
        _, c0, _, _ = run_case(op, axes, "fp16", cfg, seed=5, distribution="normal")
        assert torch.equal(c.view(torch.uint8), c0.view(torch.uint8))
