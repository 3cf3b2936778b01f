"""gpu tier: Nsight Compute on a real candidate, and build resources of a real Triton build."""

import importlib.util

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.tune.profile.ncu_report_adapter import find_ncu

CONFIG = {"BLOCK_N": 4096, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0}


@pytest.mark.gpu
@pytest.mark.timeout(900)
def test_ncu_profiles_one_candidate_kernel(tmp_path, layernorm):
    if find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) not installed on this GPU host")
    from kernelloop.tune.profile.classify import classify
    from kernelloop.tune.profile.ncu import NcuOptions, harness_job, profile_candidate
    from kernelloop.tune.profile.roofline import dram_check
    from kernelloop.base.records import DType, Workload
    w = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype=DType.fp16)
    job = harness_job(ops_dir() / "layernorm", ops_dir() / "layernorm" / "kernel.py", CONFIG,
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
    # One read of x and one write of y. With a cold cache (--cache-control all) every byte of x comes from DRAM;
    # y (32 MiB) fits in the H200's 60 MiB L2, so part of it is written back only after the kernel ends
    # (measured 2026-11-30: total DRAM bytes 0.68x the formula). Reads must match x; the total must not exceed
    # the formula (no re-reads).
    formula = layernorm.spec.bytes_moved(w.axes, w.dtype)
    reads = k.number("dram_read_bytes")
    if reads is not None:
        assert 0.9 <= reads / (formula / 2) <= 1.1, (reads, formula)
    dram = k.number("dram_bytes")
    if dram is not None:
        ratio, verdict, note = dram_check(formula, dram)
        assert verdict != "re-reads", note


@pytest.mark.gpu
def test_build_resources_of_a_compiled_triton_kernel():
    import torch

    from kernelloop.tune.profile.sass import find_tool, resources_from_triton
    if find_tool("cuobjdump") is None:
        pytest.skip("no cuobjdump")
    spec = importlib.util.spec_from_file_location("ln_gpu_kernel", ops_dir() / "layernorm" / "kernel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.randn(256, 4096, device="cuda", dtype=torch.float16)
    w = torch.ones(4096, device="cuda", dtype=torch.float16)
    b = torch.zeros_like(w)
    y = torch.empty_like(x)
    mod.launch(x, w, b, y, eps=1e-5, **CONFIG)
    torch.cuda.synchronize()
    kernels = [k for cache in mod._layernorm_fwd.device_caches.values()
               for c in cache if isinstance(c, dict) for k in c.values() if hasattr(k, "asm")]
    assert len(kernels) == 1
    r = resources_from_triton(kernels[0])
    assert r.kernel == "_layernorm_fwd" and r.registers and r.registers <= 255
    assert r.ldg128_fraction == 1.0          # 4096 fp16 rows: 16-byte aligned, 128-bit loads
    assert r.local_loads == 0 and "cuobjdump" in r.source


# -- issue 4: baselines under Nsight Compute, profile vs timing ------------------------------------------------

GEMM_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3,
               "PERSISTENT": 1, "TMA": 1, "EPILOGUE": "none", "TRANS_B": 0}


def _median(xs):
    import statistics
    return statistics.median(xs)


@pytest.mark.gpu
@pytest.mark.timeout(900)
@pytest.mark.xfail(strict=True, reason=(
    "issue 4 expects eager layernorm to be memory-bandwidth-bound with profile and timing within 5 %; on the H200 "
    "with torch 2.11 (2026-11-30, five runs) its kernel is compute-bound under the issue's own 30 % rule (SM 65.8 % "
    "> 30 % and above memory 48.0 %) and the two fractions differ by ~10 %: kept as a strict xfail, so a torch or "
    "classifier change that makes it pass is noticed"))
def test_eager_layernorm_is_bandwidth_bound_and_its_profile_agrees_with_its_timing(tmp_path, layernorm):
    """Eager layernorm fp16 [4096, 4096]: every launch of its call profiled (harness baseline mode), class of the
    longest launch, and the bandwidth-roof fraction from ncu (DRAM bytes / duration) within 5 % of the one from
    the run's timer (formula bytes / cold-L2 kernel median), both under the same roof: a device copy of the bytes."""
    if find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) not installed on this GPU host")
    from kernelloop.core.bench.policy import COLD_L2_EVENTS
    from kernelloop.core.bench.timer import sample
    from kernelloop.core.execute.worker import make_baseline
    from kernelloop.tune.profile.aggregate import aggregate, agreement
    from kernelloop.tune.profile.ncu import NcuOptions, baseline_job, profile_candidate
    from kernelloop.tune.profile.roofline import roofline_from_copy
    from kernelloop.base.records import BottleneckClass, DType, Workload
    from kernelloop.core.reference.inputs import make_inputs
    spec = layernorm.spec
    w = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype=DType.fp16)
    job = baseline_job(ops_dir() / "layernorm", "eager", w, seed=1)
    res = profile_candidate(job, tmp_path, NcuOptions(launch_count=None, timeout_s=600))
    assert res.run.status == "ok" and res.kernels, (res.run.log[-3000:], res.notes)
    agg = aggregate(res.kernels)
    top = agg.kernels[agg.dominant]
    assert top.bottleneck is BottleneckClass.MEMORY_BANDWIDTH, (top.kernel, top.reason,
                                                                res.kernels[agg.dominant].metrics)
    assert agg.dram_bytes is not None and agg.duration_ns is not None, res.kernels[agg.dominant].metrics

    nbytes = spec.bytes_moved(w.axes, w.dtype)
    inputs = make_inputs(spec, w, 1, "cuda")
    ref_file = str(ops_dir() / "layernorm" / spec.reference)
    subjects = {name: make_baseline(name, inputs, spec.scalars, reference_file=ref_file, bytes_moved=nbytes,
                                    device="cuda") for name in ("eager", "copy")}
    samples = sample(subjects, COLD_L2_EVENTS, seed=0)
    eager_us, copy_us = (_median(samples[n]["kernel_us"]) for n in ("eager", "copy"))
    roof = roofline_from_copy(spec, w, eager_us, copy_us, dram_bytes=agg.dram_bytes)
    a = agreement(spec, w, roof, profile_bytes=agg.dram_bytes, profile_ns=agg.duration_ns, timing_us=eager_us)
    assert a.difference is not None and a.difference <= 0.05, a.model_dump()


@pytest.mark.gpu
@pytest.mark.timeout(900)
def test_gemm_candidate_is_compute_bound(tmp_path):
    """A tensor-core GEMM (ops/gemm template, 128x256x64 tiles, TMA, persistent) on fp16 4096^3."""
    if find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) not installed on this GPU host")
    from kernelloop.tune.profile.aggregate import aggregate
    from kernelloop.tune.profile.ncu import NcuOptions, harness_job, profile_candidate
    from kernelloop.base.records import BottleneckClass, DType, Workload
    w = Workload(op="gemm", axes={"M": 4096, "N": 4096, "K": 4096}, dtype=DType.fp16)
    job = harness_job(ops_dir() / "gemm", ops_dir() / "gemm" / "kernel.py", GEMM_CONFIG, w.model_dump_json(),
                      seed=1)
    res = profile_candidate(job, tmp_path, NcuOptions(launch_count=None, timeout_s=600))
    assert res.run.status == "ok" and res.kernels, (res.run.log[-3000:], res.notes)
    agg = aggregate(res.kernels)
    top = agg.kernels[agg.dominant]
    assert "_gemm_kernel" in top.kernel and agg.launches == 1
    assert top.bottleneck is BottleneckClass.COMPUTE, (top.reason, res.kernels[agg.dominant].metrics)
