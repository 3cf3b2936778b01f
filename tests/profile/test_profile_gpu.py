"""gpu tier: Nsight Compute on a real candidate, and build resources of a real Triton build."""

import importlib.util
from pathlib import Path

import pytest

from kernelloop.profile.ncu_report_adapter import find_ncu

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {"BLOCK_N": 4096, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0}


@pytest.mark.gpu
@pytest.mark.timeout(900)
def test_ncu_profiles_one_candidate_kernel(tmp_path, layernorm):
    if find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) not installed on this GPU host")
    from kernelloop.profile.classify import classify
    from kernelloop.profile.ncu import NcuOptions, harness_job, profile_candidate
    from kernelloop.profile.roofline import dram_check
    from kernelloop.records import DType, Workload
    w = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype=DType.fp16)
    job = harness_job(ROOT / "ops" / "layernorm", ROOT / "ops" / "layernorm" / "kernel.py", CONFIG,
                      w.model_dump_json(), seed=1)
    res = profile_candidate(job, tmp_path, NcuOptions(kernel_regex="_layernorm_fwd", timeout_s=600))
    assert res.run.status == "ok", res.run.log[-3000:]
    k = res.kernel
    assert k is not None and "_layernorm_fwd" in k.kernel
    for key in ("duration_ns", "sol_compute_pct", "sol_memory_pct", "sol_dram_pct", "occupancy_achieved_pct",
                "registers_per_thread", "sched_eligible_warps"):
        assert key in k.metrics, (key, sorted(k.metrics), res.notes)
    c = classify(k)
    assert c.bottleneck.value != "unclassified" and c.evidence
    # One read of x and one write of y: the formula's bytes, with a cold cache (--cache-control all).
    dram = k.number("dram_bytes")
    if dram is not None:
        ratio, verdict, note = dram_check(layernorm.spec.bytes_moved(w.axes, w.dtype), dram)
        assert verdict == "ok", note


@pytest.mark.gpu
def test_build_resources_of_a_compiled_triton_kernel():
    import torch

    from kernelloop.profile.sass import find_tool, resources_from_triton
    if find_tool("cuobjdump") is None:
        pytest.skip("no cuobjdump")
    spec = importlib.util.spec_from_file_location("ln_gpu_kernel", ROOT / "ops" / "layernorm" / "kernel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.randn(256, 4096, device="cuda", dtype=torch.float16)
    w = torch.ones(4096, device="cuda", dtype=torch.float16)
    b = torch.zeros_like(w)
    y = torch.empty_like(x)
    mod.launch(x, w, b, y, eps=1e-5, **CONFIG)
    torch.cuda.synchronize()
    kernels = [k for cache in mod._layernorm_fwd.device_caches.values()
               for c in cache if isinstance(c, dict) for k in c.values()]
    assert len(kernels) == 1
    r = resources_from_triton(kernels[0])
    assert r.kernel == "_layernorm_fwd" and r.registers and r.registers <= 255
    assert r.ldg128_fraction == 1.0          # 4096 fp16 rows: 16-byte aligned, 128-bit loads
    assert r.local_loads == 0 and "cuobjdump" in r.source
