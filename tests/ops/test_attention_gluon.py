"""ops/attention's warp-specialized Gluon template (attention/gluon_kernel.py, template "gluon_fa", shared with
ops/attention_causal): its space and input checks on the CPU, ahead-of-time sm_90 builds of a pruned space against
the spec's resource estimates (warpgroup MMAs of the right shapes, the register hand-over between partitions), and a
`gpu` tier that runs it through the verifier on a CUDA device (causal and not, MHA and GQA, head dims 64 and 128,
both dtypes, sequence lengths no block divides, deterministic, nothing written past o).
"""

import base64
import collections
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelloop.base.builtin import ops_dir
from kernelloop.core.device import VIRTUAL_HOPPER
from kernelloop.base.records import Workload, evaluate_expression
from kernelloop.core.spec import load_op, load_workloads
from kernelloop.core.spec.space import prune, why_pruned, workload_names

ROOT = Path(__file__).resolve().parents[2]
ATTENTION = ops_dir() / "attention"
HOPPER = VIRTUAL_HOPPER.with_(virtual=False)
OPS = ["attention", "attention_causal"]
pytestmark = pytest.mark.timeout(300)


def _template(op):
    return next(t for t in load_op(ops_dir() / op).spec.templates if t.name == "gluon_fa")


def _module():
    spec = importlib.util.spec_from_file_location("_test_attention_gluon", ATTENTION / "gluon_kernel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _w(op, B, H, HKV, S, D, dtype="fp16"):
    return Workload(op=op, axes={"B": B, "H": H, "HKV": HKV, "S": S, "D": D}, dtype=dtype)


def _cfg(op, bn=128, stages=2, pingpong=1, overlap=1, persistent=0):
    return dict(BLOCK_M=64, BLOCK_N=bn, num_warps=8, num_stages=stages, PINGPONG=pingpong, OVERLAP=overlap,
                PERSISTENT=persistent, CAUSAL=int(op == "attention_causal"))


@pytest.mark.parametrize("op", OPS)
def test_space_is_sm90_only_and_fits_shared_memory(op):
    t = _template(op)
    b = load_op(ops_dir() / op)
    for w in load_workloads(b.folder / "workloads.toml", b.spec):
        kept, _ = prune(t, w, HOPPER)
        assert kept, w.axes
        assert {c["CAUSAL"] for c in kept} == {int(op == "attention_causal")}
        for flag in ("PINGPONG", "OVERLAP", "PERSISTENT"):
            assert {c[flag] for c in kept} == {0, 1}, flag
        # d128 fits 3 stages of 128-key blocks (229,720 bytes built), d64 all 5
        stages = {c["num_stages"] for c in kept if c["BLOCK_N"] == 128}
        assert stages == ({2, 3} if w.axes["D"] == 128 else {2, 3, 4, 5}), (w.axes, stages)
        assert not prune(t, w, VIRTUAL_HOPPER)[0], "Gluon has no interpreter: nothing to run there"
        for cc in ([8, 0], [10, 0]):
            assert not prune(t, w, HOPPER.with_(capability=cc))[0], "warpgroup MMA is sm_90's alone"
    seed = _w(op, 8, 8, 8, 4096, 128)
    assert "shared" in why_pruned(t, seed, HOPPER, _cfg(op, stages=4))
    assert "kv block wider" in why_pruned(t, _w(op, 1, 2, 2, 50, 64), HOPPER, _cfg(op))
    assert "GQA" in why_pruned(t, _w(op, 1, 6, 4, 128, 128), HOPPER, _cfg(op))
    assert "head dims" in why_pruned(t, _w(op, 1, 4, 4, 128, 96), HOPPER, _cfg(op))


def test_registers_fill_the_register_file():
    mod = _module()
    t = _template("attention")
    assert mod.max_registers() == 168 and mod.consumer_registers() == 232
    threads = evaluate_expression(t.resources.threads, {"num_warps": 8})
    assert threads == 12 * 32 and mod.max_registers() * threads <= 65536
    # two consumer warpgroups and the loader's fit in the file whatever the loader keeps, and take what it leaves
    for loader in (24, 40, 56):
        regs = mod.consumer_registers(loader)
        assert regs % 8 == 0 and (2 * regs + loader) * 4 * 32 <= 65536 < (2 * (regs + 8) + loader) * 4 * 32


def test_launch_says_why_it_cannot_run():
    mod = _module()
    q = torch.zeros(1, 2, 64, 128, dtype=torch.float16)
    o = torch.empty_like(q)
    with pytest.raises(RuntimeError, match="sm_90"):
        mod.launch(q, q, q, o, BLOCK_N=128)

    class _Cuda(torch.Tensor):   # past the device check, to reach the argument checks
        @property
        def is_cuda(self):
            return True
    qc, oc = q.as_subclass(_Cuda), o.as_subclass(_Cuda)
    with pytest.raises(ValueError, match="BLOCK_M=64"):
        mod.launch(qc, qc, qc, oc, BLOCK_M=128, BLOCK_N=128)
    with pytest.raises(ValueError, match="num_warps=8"):
        mod.launch(qc, qc, qc, oc, BLOCK_N=128, num_warps=4)
    with pytest.raises(ValueError, match="PINGPONG"):
        mod.launch(qc, qc, qc, oc, BLOCK_N=128, PINGPONG=2)
    with pytest.raises(ValueError, match="OVERLAP"):
        mod.launch(qc, qc, qc, oc, BLOCK_N=128, OVERLAP=2)
    with pytest.raises(ValueError, match="PERSISTENT"):
        mod.launch(qc, qc, qc, oc, BLOCK_N=128, PERSISTENT=-1)
    with pytest.raises(ValueError, match="dtype"):
        mod.launch(qc.float(), qc, qc, oc, BLOCK_N=128)
    with pytest.raises(ValueError, match="contiguous"):
        mod.launch(qc.transpose(1, 2), qc, qc, oc, BLOCK_N=128)
    with pytest.raises(ValueError, match="head dim"):
        wide = torch.zeros(1, 2, 64, 96, dtype=torch.float16).as_subclass(_Cuda)
        mod.launch(wide, wide, wide, wide, BLOCK_N=128)


def _build(op, w, configs, keep_asm=False):
    from kernelloop.tune.profile.sass import find_tool
    from kernelloop.core.build.aot import build_configs
    if find_tool("cuobjdump") is None:
        pytest.skip("no cuobjdump (Triton's wheel ships one)")
    b = load_op(ops_dir() / op)
    return build_configs(b.spec, {"gluon_fa": ATTENTION / "gluon_kernel.py"}, w,
                         [{"template": "gluon_fa", **c} for c in configs], jobs=2, chunk=4, keep_asm=keep_asm)


@pytest.mark.parametrize("op,w", [
    ("attention", _w("attention", 8, 8, 8, 4096, 128)),
    ("attention_causal", _w("attention_causal", 2, 32, 8, 1000, 64, "bf16")),
], ids=["mha-d128-fp16", "causal-gqa-d64-bf16"])
def test_pruned_space_builds_for_sm90_within_the_estimates(op, w):
    """Every kept configuration of the seed shape with the overlap inside a warpgroup and a grid of one program a
    tile (d128: 12), two without the overlap and two persistent ones, and a subset of the d64 causal GQA space,
    builds for sm_90 with this host's Triton: no spills, 384 threads at maxnreg 168, shared memory at most 512 bytes
    under the estimate and within sm_90's opt-in limit."""
    from kernelloop.core.build.aot import BUILT
    from kernelloop.tune.search.prune_audit import _estimate
    t = _template(op)
    kept, _ = prune(t, w, HOPPER)
    two = [c for c in kept if c["num_stages"] == 2 and c["PINGPONG"]]
    serial = [c for c in two if not c["OVERLAP"] and not c["PERSISTENT"]]
    persistent = [c for c in two if c["OVERLAP"] and c["PERSISTENT"]]
    kept = [c for c in kept if c["OVERLAP"] and not c["PERSISTENT"]]
    if w.axes["D"] == 64:
        kept = [c for c in kept if c["num_stages"] in (2, 5)]
    assert len(kept) == (12 if w.axes["D"] == 128 else 8) and len(serial) == len(persistent) == 2
    kept += serial + persistent
    outs = _build(op, w, kept)
    names = workload_names(w, HOPPER)
    for cfg, o in zip(kept, outs):
        if o.status != BUILT and "no Gluon" in o.error:
            pytest.skip(o.error)
        assert o.status == BUILT, (cfg, o.error[-800:])
        est = _estimate(t, names, cfg)
        assert 0 <= est["shared"] - o.shared_bytes <= 512, (cfg, est["shared"], o.shared_bytes)
        assert o.shared_bytes <= HOPPER.shared_per_block_optin
        assert o.threads == evaluate_expression(t.resources.threads, {**names, **cfg}) == 384
        assert o.registers == _module().max_registers() <= est["regs"]
        if cfg["PERSISTENT"] and cfg["CAUSAL"]:
            # the tile loop's state: Triton 3.6 (the device's) builds these with an 8-24 byte stack frame, 3.9 with
            # none; nothing in local memory either way
            k = o.kernels[0]
            assert (k.get("LOCAL") or 0) == 0 and (k.get("STACK") or 0) <= 32, (cfg, k)
        else:
            assert not o.spills, cfg


def test_build_issues_warpgroup_mmas_and_hands_registers_over():
    """The PTX of one build: the scores as m64n{BLOCK_N} and the product as m64n{D} warpgroup MMAs (D / 16 and
    BLOCK_N / 16 of them a block), the loader down to 40 registers and the consumers up to 232; exp2 a score. Its
    SASS: ptxas added no warpgroup waits of its own (one per `warpgroup_mma_wait` of the source, 4 a consumer), so
    the product of block j - 1 is still in flight during the softmax of block j."""
    from kernelloop.tune.profile.sass import disassemble
    from kernelloop.core.build.aot import BUILT
    w = _w("attention", 1, 8, 8, 4096, 128)
    (o,) = _build("attention", w, [_cfg("attention", bn=64)], keep_asm=True)
    if o.status != BUILT and "no Gluon" in o.error:
        pytest.skip(o.error)
    assert o.status == BUILT, o.error[-800:]
    ptx = o.kernels[0]["asm"]["ptx"]
    mmas = collections.Counter(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)", ptx))
    # per consumer: block 0's scores, the loop's scores and product, the last product (8 or 4 instructions each)
    assert mmas == {"m64n64k16": 2 * 2 * 8, "m64n128k16": 2 * 2 * 4}, mmas
    regs = [int(r) for r in re.findall(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+(\d+)", ptx)]
    assert 40 in regs and 232 in [int(r) for r in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx)]
    assert "ex2.approx" in ptx
    sass = disassemble(base64.b64decode(o.kernels[0]["asm"]["cubin_b64"]))
    assert len(re.findall(r"WARPGROUP\.DEPBAR", sass)) == 2 * 4
    assert len(re.findall(r"\bHGMMA\.64x(?:64|128)x16\.F32", sass)) == sum(mmas.values())


# ---- GPU tier --------------------------------------------------------------------------------------------------

GPU_CHECK = r"""
import importlib.util, json, sys, torch
from pathlib import Path
from kernelloop.base.records import Workload
from kernelloop.core.reference.inputs import is_poison, make_inputs, poison_
from kernelloop.core.reference.truth import truth
from kernelloop.core.spec import load_op
from kernelloop.core.verify.compare import check_outputs, error_metrics
ops = Path(sys.argv[1])
s = importlib.util.spec_from_file_location("gluon_fa_gpu", ops / "attention" / "gluon_kernel.py")
kernel = importlib.util.module_from_spec(s); s.loader.exec_module(kernel)
SHAPES = [dict(B=1, H=8, HKV=8, S=4096, D=128), dict(B=2, H=4, HKV=2, S=1000, D=128), dict(B=2, H=4, HKV=4, S=130, D=64),
          dict(B=1, H=4, HKV=1, S=1, D=64), dict(B=1, H=32, HKV=8, S=512, D=128)]
CONFIGS = json.loads(sys.argv[2])
rows = []
for op in ("attention", "attention_causal"):
    bundle = load_op(ops / op)
    spec = bundle.spec
    for cfg in CONFIGS:
        for axes in SHAPES:
            stages = cfg["num_stages"] if axes["D"] == 64 or cfg["BLOCK_N"] * cfg["num_stages"] <= 384 else 2
            run_cfg = dict(cfg, num_stages=stages, CAUSAL=int(op == "attention_causal"))
            for dtype in ("fp16", "bf16"):
                w = Workload(op=op, axes=axes, dtype=dtype)
                q, k, v = make_inputs(spec, w, 7, "cuda", "heavy_tail" if axes["S"] == 130 else "normal")
                refs = truth(spec, bundle.folder / spec.reference, [q, k, v])
                n = q.numel()
                runs = []
                for _ in range(2):
                    buf = poison_(torch.empty(n + 4096, dtype=q.dtype, device="cuda"))
                    o = buf[:n].view(q.shape)
                    kernel.launch(q, k, v, o, **run_cfg)
                    torch.cuda.synchronize()
                    assert bool(is_poison(buf[n:]).all()), "wrote past o"
                    runs.append(o.clone())
                v_ = check_outputs(spec, w, [runs[0]], refs, [q, k, v], [q, k, v], "gpu")
                det = torch.equal(runs[0].view(torch.uint8), runs[1].view(torch.uint8))
                zeros_fail = error_metrics("o", torch.zeros_like(runs[0]), refs[0], spec.tolerance_for(w)).mismatched > 0
                rows.append(dict(op=op, cfg=run_cfg, axes=axes, dtype=dtype, status=v_.status.value,
                                 message=v_.message[:300], deterministic=det, zeros_fail=zeros_fail,
                                 ratio=v_.metrics[0].error_cap_ratio if v_.metrics else None))
print(json.dumps({"rows": rows}))
"""

GPU_CONFIGS = [dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=2, PINGPONG=1, OVERLAP=1),
               dict(BLOCK_M=64, BLOCK_N=64, num_warps=8, num_stages=3, PINGPONG=0, OVERLAP=1),
               dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=3, PINGPONG=1, OVERLAP=1),
               dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=2, PINGPONG=1, OVERLAP=0),
               dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=2, PINGPONG=1, OVERLAP=1, PERSISTENT=1)]


@pytest.mark.gpu
@pytest.mark.timeout(500)
def test_gpu_gluon_fa_passes_the_verifier():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, "-c", GPU_CHECK, str(ops_dir()), json.dumps(GPU_CONFIGS)], env=env,
                       text=True, capture_output=True, timeout=480)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = json.loads(p.stdout.strip().splitlines()[-1])["rows"]
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "attention-gluon-gpu.json").write_text(json.dumps(rows, indent=1))
    assert len(rows) == 2 * len(GPU_CONFIGS) * 5 * 2
    failed = [r for r in rows if r["status"] != "PASSED" or not r["deterministic"] or not r["zeros_fail"]]
    assert not failed, failed[:5]
