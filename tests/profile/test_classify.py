"""Bottleneck classes (CUDAMaster's rules plus near-limit) and the evidence each keeps."""

import pytest

from kernelloop.tune.profile.classify import EVIDENCE, Thresholds, classify, decide
from kernelloop.base.records import BottleneckClass as C, BuildResources, KernelProfile


def test_recorded_h200_kernels(h200_profiles):
    got = [classify(p).bottleneck for p in h200_profiles]
    # 0/5: torch's normal-distribution kernel, compute 73 %, memory 15.6 %; 1: a 16-block launch, everything < 2 %;
    # 2-4: torch layer_norm, compute 65 % (> 30 %) above memory 47.5 %; 6: the fp16 GEMM, compute 90 % over memory 70 %.
    assert got == [C.COMPUTE, C.MEMORY_LATENCY, C.COMPUTE, C.COMPUTE, C.COMPUTE, C.COMPUTE, C.COMPUTE]
    ln = classify(h200_profiles[2])
    assert ln.compute_pct == 65.06 and ln.memory_pct == 47.53 and ln.dram_pct == 32.33
    assert "compute 65.1 % > 30 % and above memory 47.5 %" in ln.reason
    assert ln.thresholds["compute_pct"] == 30.0
    gemm = classify(h200_profiles[6])
    assert "near the limit (> 80 %)" in gemm.reason


@pytest.mark.parametrize("compute, memory, dram, expected", [
    (20, 50, 40, C.MEMORY_BANDWIDTH),
    (20, 25, 35, C.MEMORY_BANDWIDTH),      # DRAM alone above the threshold is enough
    (20, 35, 10, C.MEMORY_BANDWIDTH),      # overall memory (e.g. L2) alone too
    (20, 25, 25, C.MEMORY_LATENCY),
    (30, 30, 30, C.MEMORY_LATENCY),        # strictly greater than the thresholds
    (31, 10, 10, C.COMPUTE),
    (55, 59, 59, C.MEMORY_BANDWIDTH),      # both above 30 %: the busier unit decides
    (59, 55, 55, C.COMPUTE),
    (50, 90, 85, C.MEMORY_BANDWIDTH),      # CUDAMaster's compute-first reading would say compute
    (65, 65, 10, C.NEAR_LIMIT),            # both above 60 % and within 10 points
    (70, 61, 10, C.NEAR_LIMIT),
    (90, 70, 12, C.COMPUTE),               # both above 60 % but compute 20 points ahead
    (10, 85, 85, C.MEMORY_BANDWIDTH),
    (85, 5, 5, C.COMPUTE),
    (None, 50, 50, C.UNKNOWN),
    (50, None, None, C.UNKNOWN),
])
def test_decision_table(compute, memory, dram, expected):
    assert decide(compute, memory, dram)[0] is expected


def test_thresholds_are_parameters(h200_profiles):
    ln = h200_profiles[2]
    # With a 70 % compute threshold torch's layer_norm (65 % compute, 47.5 % memory) is bandwidth-bound.
    assert classify(ln, Thresholds(compute_pct=70)).bottleneck is C.MEMORY_BANDWIDTH
    assert classify(ln, Thresholds(compute_pct=70, memory_pct=50)).bottleneck is C.MEMORY_LATENCY
    # A 25-point balance gap makes the GEMM (90 % / 70 %) balanced-near-limit.
    assert classify(h200_profiles[6], Thresholds(balanced_gap=25)).bottleneck is C.NEAR_LIMIT
    assert "near the limit" not in classify(h200_profiles[6], Thresholds(near_limit_pct=95)).reason


def test_latency_evidence_is_filtered_and_reports_what_is_missing(h200_profiles):
    c = classify(h200_profiles[1])
    keys = [e.key for e in c.evidence]
    assert set(keys) <= {k for k, _ in EVIDENCE[C.MEMORY_LATENCY]}
    ev = {e.key: e.value for e in c.evidence}
    assert ev["occupancy_achieved_pct"] == 12.44 and ev["grid_size"] == 16.0 and ev["waves_per_sm"] == 0.02
    assert "sol_l1_pct" not in keys and "dram_frequency_hz" not in keys
    assert {"sched_eligible_warps", "warp_cycles_per_issued", "stall_*"} <= set(c.missing)
    # Only the rules of the class's sections, largest estimated speed-up first.
    assert [r.name for r in c.rules] == ["LaunchConfiguration", "AchievedOccupancy", "TheoreticalOccupancy"]
    assert all(e.why for e in c.evidence)


def _profile(**metrics) -> KernelProfile:
    return KernelProfile(kernel="k", source="csv", metrics=metrics)


def test_top_stalls_and_build_evidence():
    p = _profile(sol_compute_pct=12.0, sol_memory_pct=20.0, sol_dram_pct=15.0, occupancy_achieved_pct=20.0,
                 stall_long_scoreboard=9.0, stall_barrier=1.0, stall_wait=2.0, stall_mio_throttle=4.0)
    c = classify(p, Thresholds(top_stalls=2), build=BuildResources(registers=168, spills=4, local_loads=6))
    assert c.bottleneck is C.MEMORY_LATENCY
    keys = [e.key for e in c.evidence]
    assert [k for k in keys if k.startswith("stall_")] == ["stall_long_scoreboard", "stall_mio_throttle"]
    assert {"registers", "spills", "local_loads"} <= set(keys)
    bw = classify(_profile(sol_compute_pct=12.0, sol_memory_pct=70.0, sol_dram_pct=68.0, dram_bytes=7e7),
                  build=BuildResources(global_loads={128: 3, 16: 1}))
    assert bw.bottleneck is C.MEMORY_BANDWIDTH
    ev = {e.key: e.value for e in bw.evidence}
    assert ev["ldg128_fraction"] == 0.75 and ev["dram_bytes"] == 7e7
    assert not any(k.startswith("stall_") for k in ev)


def test_unknown_without_speed_of_light():
    c = classify(_profile(occupancy_achieved_pct=50.0))
    assert c.bottleneck is C.UNKNOWN and c.evidence == [] and "Speed Of Light" in c.reason
