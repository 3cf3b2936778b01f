"""ops/attention and ops/attention_causal: specs, workloads, the shared flash template under the Triton CPU
interpreter (judged by the verifier's own `check_outputs` at the spec tolerance), the reference against
PyTorch SDPA, pruning, baselines, and one end-to-end `kernelloop optimize` run.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":  # the GPU tier (pytest -m gpu) compiles for the device
    os.environ["TRITON_INTERPRET"] = "1"

import importlib.util  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelloop.base.builtin import ops_dir
from kernelloop.core.device import VIRTUAL_HOPPER  # noqa: E402
from kernelloop.base.records import Status, Workload  # noqa: E402
from kernelloop.core.reference.inputs import is_poison, make_inputs, poison_  # noqa: E402
from kernelloop.core.reference.truth import truth  # noqa: E402
from kernelloop.core.spec import load_op, load_workloads  # noqa: E402
from kernelloop.core.spec.space import expand, prune  # noqa: E402
from kernelloop.core.verify.compare import check_outputs, error_metrics  # noqa: E402
from kernelloop.core.verify.rules import check_source  # noqa: E402

OPS = ["attention", "attention_causal"]
H200 = VIRTUAL_HOPPER.with_(virtual=False, name="H200 (limits of sm_90)")
BUNDLES = {op: load_op(ops_dir() / op) for op in OPS}
# Rows past S in the last q tile divide by a row sum built on zero (or neighbouring) rows; numpy may warn
# about it in the interpreter. Nothing of it reaches memory (the guard rows below stay poisoned).
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


KERNEL = _module(ops_dir() / "attention" / "kernel.py", "_test_attention_kernel")


def _flash(bundle):
    return next(t for t in bundle.spec.templates if t.name == "flash")


def _workload(op, B, H, HKV, S, D, dtype):
    return Workload(op=op, axes={"B": B, "H": H, "HKV": HKV, "S": S, "D": D}, dtype=dtype)


# ---- specs and workloads --------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_spec_loads_with_its_workloads_and_passes_static_rules(op):
    b = BUNDLES[op]
    assert b.spec.name == op and [d.value for d in b.spec.dtypes] == ["fp16", "bf16"]
    assert b.spec.scalars == {}  # the scale 1/sqrt(D) comes from the head dim
    for f in ("workloads.toml", "workloads-interpret.toml"):
        wls = load_workloads(b.folder / f, b.spec)
        assert wls and all(w.axes["H"] % w.axes["HKV"] == 0 for w in wls)
        assert any(w.axes["HKV"] < w.axes["H"] for w in wls), "every suite has a GQA workload"
        assert {w.dtype.value for w in wls} >= ({"fp16"} if f == "workloads.toml" else {"fp16", "bf16"})
    gpu = load_workloads(b.folder / "workloads.toml", b.spec)
    assert {"B": 8, "H": 8, "HKV": 8, "S": 4096, "D": 128} in [w.axes for w in gpu]
    assert {w.axes["S"] for w in gpu} >= {512, 1024, 2048, 4096, 8192, 16384}
    interp = load_workloads(b.folder / "workloads-interpret.toml", b.spec)
    assert all(w.axes["B"] <= 2 and w.axes["H"] <= 4 and w.axes["S"] <= 100 for w in interp)
    assert any(w.axes["S"] % 2 for w in interp)
    # the Triton flash template and the Gluon warp-specialized one (tests/ops/test_attention_gluon.py)
    assert [t.name for t in b.spec.templates] == ["flash", "gluon_fa"]
    for template in b.spec.templates:
        causal = {p.name: p.values for p in template.params}["CAUSAL"]
        assert causal == [1 if op == "attention_causal" else 0]
        assert check_source(b.template_sources[template.name], b.spec) == []
        assert len(expand(template)) <= 1000


def test_both_ops_share_one_template_source():
    a, c = BUNDLES["attention"], BUNDLES["attention_causal"]
    assert c.spec.templates[0].file == "../attention/kernel.py"
    assert a.template_sources == c.template_sources
    # flops: the causal op counts the visible triangle only
    w = {"B": 1, "H": 2, "HKV": 1, "S": 64, "D": 64}
    assert a.spec.flops(w, a.spec.dtypes[0]) == 2 * c.spec.flops(w, c.spec.dtypes[0]) == 4 * 2 * 64 * 64 * 64
    assert a.spec.bytes_moved(w, a.spec.dtypes[0]) == (2 * 2 * 64 * 64 + 2 * 1 * 64 * 64) * 2


@pytest.mark.parametrize("op", OPS)
def test_pruning_keeps_a_space_for_every_workload(op):
    b = BUNDLES[op]
    template = _flash(b)
    for f, props in (("workloads.toml", H200), ("workloads-interpret.toml", VIRTUAL_HOPPER)):
        for w in load_workloads(b.folder / f, b.spec):
            kept, report = prune(template, w, props)
            assert kept, f"{f}: {w.label} has an empty space: {report.as_dict()}"
            # warp specialization is never kept for sm_90 (it failed to compile on the H200) nor the interpreter
            assert not any(c["WARP_SPEC"] for c in kept)
            assert props is H200 or all(c["USE_TMA"] != 2 for c in kept)
            assert w.axes["HKV"] < w.axes["H"] or all(c["KV_ORDER"] != 1 for c in kept)
    # on a Blackwell-class device it is kept, with host descriptors only
    blackwell = H200.with_(capability=[10, 0])
    kept, _ = prune(template, _workload(op, 8, 8, 8, 4096, 128, "fp16"), blackwell)
    assert any(c["WARP_SPEC"] for c in kept) and all(c["USE_TMA"] == 1 for c in kept if c["WARP_SPEC"])
    # GQA validity lives in the template: kv heads that do not divide q heads leave nothing to try
    kept, report = prune(template, _workload(op, 1, 6, 4, 128, 128, "fp16"), H200)
    assert kept == [] and any("GQA" in r for r in report.reasons)
    kept, report = prune(template, _workload(op, 1, 4, 4, 128, 96, "fp16"), H200)
    assert kept == [] and any("head dims" in r for r in report.reasons)


# ---- the template under the interpreter ----------------------------------------------------------------------

def _run(op, w, cfg, seed, distribution):
    """Launch into a poisoned output that is a strided view with a poisoned guard row after each head."""
    b = BUNDLES[op]
    inputs = make_inputs(b.spec, w, seed, "cpu", distribution)
    B, H, S, D = (w.axes[a] for a in ("B", "H", "S", "D"))
    buf = poison_(torch.empty(B, H, S + 1, D, dtype=inputs[0].dtype))
    out = buf[:, :, :S]
    KERNEL.launch(*inputs, out, **cfg)
    assert bool(is_poison(buf[:, :, S]).all()), "the kernel wrote past the end of a head"
    refs = truth(b.spec, b.folder / b.spec.reference, inputs)
    return inputs, out, refs[0]


# (op, B, H, HKV, S, D, dtype, config); every config also goes through both spec distributions.
CASES = [
    pytest.param("attention", 2, 4, 2, 77, 64, "fp16",
                 dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, KV_ORDER=1, USE_TMA=0), id="gqa-S77-d64-fp16"),
    pytest.param("attention", 1, 2, 2, 100, 128, "bf16",
                 dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, KV_ORDER=2, USE_TMA=1), id="mha-S100-d128-bf16-tma"),
    pytest.param("attention", 1, 4, 1, 64, 128, "fp16",
                 dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, KV_ORDER=0, USE_TMA=1), id="mqa-S64-blocks-past-S"),
    pytest.param("attention_causal", 2, 4, 2, 77, 64, "bf16",
                 dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, KV_ORDER=1, USE_TMA=0, CAUSAL_SKIP=1),
                 id="causal-gqa-S77-bf16-skip"),
    pytest.param("attention_causal", 1, 2, 2, 100, 128, "fp16",
                 dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, KV_ORDER=2, USE_TMA=0, CAUSAL_SKIP=0),
                 id="causal-S100-d128-noskip"),
    pytest.param("attention_causal", 1, 4, 2, 90, 64, "fp16",
                 dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, KV_ORDER=0, USE_TMA=1, CAUSAL_SKIP=1),
                 id="causal-gqa-S90-tma"),
    pytest.param("attention_causal", 1, 2, 1, 1, 64, "bf16",
                 dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, KV_ORDER=1, USE_TMA=1, CAUSAL_SKIP=1),
                 id="causal-S1"),
    # S % BLOCK_N == 0: no masked tail loop (EVEN_S); device descriptors with the last q tile partial
    pytest.param("attention", 2, 4, 2, 96, 128, "bf16",
                 dict(BLOCK_M=128, BLOCK_N=32, num_warps=4, KV_ORDER=1, USE_TMA=2, WARP_SPEC=1),
                 id="gqa-S96-even-device-tma-ws"),
    pytest.param("attention", 1, 2, 2, 128, 64, "fp16",
                 dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, KV_ORDER=0, USE_TMA=0), id="mha-S128-even"),
    pytest.param("attention_causal", 1, 2, 1, 64, 64, "fp16",
                 dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, KV_ORDER=0, USE_TMA=2, CAUSAL_SKIP=1),
                 id="causal-S64-even-device-tma"),
]


@pytest.mark.parametrize("op,B,H,HKV,S,D,dtype,cfg", CASES)
def test_template_matches_reference_within_spec_tolerance(op, B, H, HKV, S, D, dtype, cfg):
    w = _workload(op, B, H, HKV, S, D, dtype)
    causal = 1 if op == "attention_causal" else 0
    for k, dist in enumerate(BUNDLES[op].spec.inputs_policy.distributions):
        inputs, out, ref = _run(op, w, {**cfg, "CAUSAL": causal, "num_stages": 2}, 1000 * S + k, dist)
        v = check_outputs(BUNDLES[op].spec, w, [out], [ref], inputs, inputs, dist)
        assert v.status is Status.PASSED, f"{dist}: {v.status.value} {v.message}"


def test_causal_template_is_not_the_non_causal_one():
    """The masks matter: the causal output differs from the full one, and is judged wrong against it."""
    w = _workload("attention", 1, 2, 2, 40, 64, "fp16")
    cfg = dict(BLOCK_M=64, BLOCK_N=32, num_warps=4)
    inputs, full, ref = _run("attention", w, {**cfg, "CAUSAL": 0}, 5, "normal")
    _, causal, _ = _run("attention_causal", w.model_copy(update={"op": "attention_causal"}),
                        {**cfg, "CAUSAL": 1}, 5, "normal")
    v = check_outputs(BUNDLES["attention"].spec, w, [causal], [ref], inputs, inputs, "causal vs full")
    assert v.status is Status.WRONG_VALUES
    assert torch.equal(full[:, :, -1], causal[:, :, -1]), "the last query sees every key in both"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_zero_output_fails_the_tolerance(op, dtype):
    b = BUNDLES[op]
    for S in (1, 7, 100):
        w = _workload(op, 2, 4, 2, S, 64, dtype)
        for k, dist in enumerate(b.spec.inputs_policy.distributions):
            inputs = make_inputs(b.spec, w, 77 + k, "cpu", dist)
            ref = truth(b.spec, b.folder / b.spec.reference, inputs)[0]
            zeros = torch.zeros_like(inputs[0])
            m = error_metrics("o", zeros, ref, b.spec.tolerance_for(w))
            assert m.mismatched > 0.9 * m.total, f"S={S} {dist}: zeros pass on {1 - m.mismatched / m.total:.1%}"
            v = check_outputs(b.spec, w, [zeros], [ref], inputs, inputs, dist)
            assert v.status is Status.WRONG_VALUES


# ---- the reference ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_reference_matches_torch_sdpa_in_float64_and_chunks_exactly(op, monkeypatch):
    ref = _module(ops_dir() / op / "reference.py", f"_test_ref_{op}")
    g = torch.Generator().manual_seed(3)
    for B, H, HKV, S, D in ((2, 4, 2, 33, 64), (1, 8, 1, 50, 128), (1, 2, 2, 1, 64)):
        q = torch.randn(B, H, S, D, generator=g, dtype=torch.float64) + 0.5
        k = torch.randn(B, HKV, S, D, generator=g, dtype=torch.float64) + 0.5
        v = torch.randn(B, HKV, S, D, generator=g, dtype=torch.float64) + 0.5
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=op == "attention_causal",
                                                                enable_gqa=H != HKV)
        got = ref.reference(q, k, v)
        assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
        monkeypatch.setattr(ref, "SCORE_ELEMS", B * H * S * 4)  # 4 query rows per chunk
        assert torch.allclose(ref.reference(q, k, v), want, rtol=1e-12, atol=1e-12)
        monkeypatch.undo()


# ---- baselines --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_baselines_are_the_sdpa_backends_and_need_cuda(op):
    mod = _module(ops_dir() / op / "baselines.py", f"_test_base_{op}")
    assert set(mod.BASELINES) == {"sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "sdpa-math"}
    assert mod.CAUSAL is (op == "attention_causal")
    if not torch.cuda.is_available():
        for factory in mod.BASELINES.values():
            with pytest.raises(RuntimeError, match="CUDA"):
                factory()


@pytest.mark.parametrize("op", OPS)
def test_baselines_share_one_implementation_that_honours_causal(op, monkeypatch):
    # Both ops' baselines.py list their names (read without importing) and take factories from one module; the
    # math backend, run on CPU tensors, computes each op's own reference (causal or not) with and without GQA.
    from kernelloop.core.execute import sdpa_baselines
    from kernelloop.tune.loop.winners import op_baseline_names
    assert op_baseline_names(BUNDLES[op]) == ["sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "sdpa-math"]
    mod = _module(ops_dir() / op / "baselines.py", f"_test_shared_base_{op}")
    assert mod.sdpa_factory is sdpa_baselines.sdpa_factory
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    fn = mod.BASELINES["sdpa-math"]()
    ref = _module(ops_dir() / op / "reference.py", f"_test_shared_ref_{op}")
    g = torch.Generator().manual_seed(0)
    for hkv in (2, 1):
        q = torch.randn(1, 2, 5, 16, generator=g, dtype=torch.float64)
        k, v = (torch.randn(1, hkv, 5, 16, generator=g, dtype=torch.float64) for _ in range(2))
        assert torch.allclose(fn(q, k, v), ref.reference(q, k, v), rtol=1e-9, atol=1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("op", OPS)
def test_gpu_template_and_sdpa_baselines_match_the_reference(op):
    """On the GPU host: pointer and TMA paths, MHA and GQA, odd S, against the fp64 truth; SDPA likewise."""
    b = BUNDLES[op]
    base = _module(ops_dir() / op / "baselines.py", f"_test_gpu_base_{op}")
    causal = 1 if op == "attention_causal" else 0
    for shape, dtype in (((2, 8, 2, 1000, 128), "fp16"), ((3, 4, 4, 333, 64), "bf16")):
        w = _workload(op, *shape, dtype)
        inputs = make_inputs(b.spec, w, 11, "cuda", "normal")
        ref = truth(b.spec, b.folder / b.spec.reference, inputs)[0]
        for cfg in (dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3, KV_ORDER=0, USE_TMA=0),
                    dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3, KV_ORDER=1, USE_TMA=1),
                    dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=2, KV_ORDER=2, USE_TMA=0)):
            out = poison_(torch.empty_like(inputs[0]))
            KERNEL.launch(*inputs, out, CAUSAL=causal, **cfg)
            v = check_outputs(b.spec, w, [out], [ref], inputs, inputs, str(cfg))
            assert v.status is Status.PASSED, f"{cfg}: {v.message}"
        for name, factory in base.BASELINES.items():
            try:
                fn = factory()
                out = fn(*inputs)
            except RuntimeError as e:  # a backend this build or shape does not support is a note, not a failure
                print(f"{name}: unavailable ({e})")
                continue
            v = check_outputs(b.spec, w, [out], [ref], inputs, inputs, name)
            assert v.status is Status.PASSED, f"{name}: {v.message}"


# ---- end to end -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_optimize_end_to_end_in_the_interpreter(op, tmp_path):
    """The loop drives the op: pruning, search, verification battery (held-out B and S), archive. On the interpreter
    suite's grouped-query workload with an odd S (HKV < H, S off every block size): the checks hold per workload,
    and the suite's two other workloads would triple the interpreter time without adding a case."""
    from typer.testing import CliRunner

    from kernelloop.cli.app import app

    wl = tmp_path / "workloads.toml"
    wl.write_text(f'op = "{op}"\n[[workload]]\naxes = {{ B = 1, H = 4, HKV = 2, S = 77, D = 64 }}\ndtype = "fp16"\n')
    r = CliRunner().invoke(app, ["optimize", str(ops_dir() / op), "--device", "interpret", "--workloads", str(wl),
                                 "--budget", "2", "--no-confirm", "--json", "--out", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert summary["status"] == "complete" and summary["interpreter"] is True
    assert summary["counts"] == {"PASSED": 2 * len(summary["workloads"])}, summary["counts"]
    assert all("best" in w for w in summary["workloads"])
