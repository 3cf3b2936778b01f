"""Roofline position from the spec's formulas, the DRAM-bytes check, and the assembled ProfileReport."""

import pytest

from kernelloop.tune.profile.report import make_report
from kernelloop.tune.profile.roofline import (DramTolerance, dram_check, roofline_from_ceilings, roofline_from_copy,
                                         roofline_position)
from kernelloop.base.records import (Ceilings, DType, Measurement, ProfileReport, Stats, Status, TimingPolicy, Trial,
                                Verdict, Workload)

W = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype=DType.fp16)
BYTES = 2 * 4096 * 4096 * 2 + 2 * 4096 * 2   # the spec's formula, by hand
FLOPS = 8 * 4096 * 4096
H200 = Ceilings(device="NVIDIA H200", driver="580.159.04", torch="2.11.0", copy_gbps=3300.0,
                matrix_tflops={"fp16": 700.0, "bf16": 700.0, "tf32": 350.0, "fp32": 50.0},
                vector_tflops={"fp16": 120.0, "fp32": 60.0})


def test_intensity_and_copy_roof(layernorm):
    spec = layernorm.spec
    r = roofline_from_copy(spec, W, 20.99, 20.40)
    assert r.bytes == BYTES and r.flops == FLOPS
    assert r.arithmetic_intensity == pytest.approx(FLOPS / BYTES)
    assert r.bandwidth_gbps == pytest.approx(BYTES / 20.40e-6 / 1e9)
    assert r.roof_us == pytest.approx(20.40) and r.fraction == pytest.approx(20.40 / 20.99)
    assert r.achieved_gbps == pytest.approx(BYTES / 20.99e-6 / 1e9)
    assert r.bound == "unknown" and r.peak_tflops is None and "copy" in r.ceiling_source  # no compute roof
    assert r.dram_check == "not-profiled"


def test_measured_ceilings_vector_and_matrix_roofs(layernorm):
    spec = layernorm.spec
    r = roofline_from_ceilings(spec, W, 21.0, H200)
    assert r.peak_name == "vector fp32" and r.peak_tflops == 60.0  # norms accumulate in fp32
    assert r.ridge_intensity == pytest.approx(60e12 / 3300e9)
    assert r.bound == "memory" and r.roof_us == pytest.approx(BYTES / 3300e9 * 1e6)
    assert r.fraction == pytest.approx(BYTES / 3300e9 * 1e6 / 21.0)
    assert r.ceiling_source == "measured ceilings NVIDIA H200|driver=580.159.04|torch=2.11.0"
    # A GEMM-like op is held to the matrix roof of its dtype and, at high intensity, is compute-bound.
    gemm = spec.model_copy(update={"name": "gemm", "bytes_formula": "3 * M * N * elem",
                                   "flops_formula": "2 * M * N * N"})
    g = roofline_from_ceilings(gemm, W, 200.0, H200)
    assert g.peak_name == "matrix fp16" and g.bound == "compute"
    assert g.roof_us == pytest.approx(2 * 4096 ** 3 / 700e12 * 1e6)


def test_unknown_roofs_and_missing_time(layernorm):
    r = roofline_position(layernorm.spec, W, None)
    assert r.fraction is None and r.achieved_gbps is None and r.bound == "unknown" and r.roof_us is None


@pytest.mark.parametrize("ratio, verdict", [(1.0, "ok"), (1.1, "ok"), (1.5, "re-reads"), (3.0, "re-reads"),
                                            (0.9, "ok"), (0.5, "below-formula")])
def test_dram_check(ratio, verdict):
    got_ratio, got, note = dram_check(1e8, ratio * 1e8)
    assert got == verdict and got_ratio == pytest.approx(ratio) and f"{ratio:.2f}x" in note


def test_dram_tolerance_is_a_parameter():
    assert dram_check(1e8, 1.1e8, DramTolerance(reread_ratio=1.05))[1] == "re-reads"
    assert dram_check(1e8, 0.9e8, DramTolerance(below_ratio=0.95))[1] == "below-formula"
    assert dram_check(1e8, None)[1] == "not-profiled"


def _trial(median_us: float | None) -> Trial:
    m = None
    if median_us is not None:
        pol = TimingPolicy(name="cold-l2-events", clock="cuda-events", warmup=5, samples=5, flush_bytes=1,
                           sleep_cycles=0, bootstrap=100)
        st = Stats(median_us=median_us, ci_low_us=median_us * 0.99, ci_high_us=median_us * 1.01, iqr_us=0.1, n=5)
        m = Measurement(subject="c-1", workload_id=W.id, policy=pol, kernel_samples_us=[median_us] * 5,
                        call_samples_us=[median_us] * 5, kernel=st, call=st, bytes_moved=BYTES, gbps=1.0)
    return Trial(run_id="r", index=0, candidate_id="c-1", workload_id=W.id, manifest_hash="m",
                 verdict=Verdict(status=Status.PASSED), measurement=m, started=0.0, finished=1.0)


def test_make_report_from_the_recorded_profile(layernorm, h200_profiles):
    kernel = h200_profiles[2]
    rep = make_report(_trial(29.5), layernorm.spec, W, kernel=kernel, copy_us=20.4)
    assert rep.classification.bottleneck.value == "compute-bound"
    assert rep.roofline.kernel_us == 29.5 and rep.roofline.fraction == pytest.approx(20.4 / 29.5)
    assert rep.roofline.dram_check == "not-profiled"  # this CSV has no DRAM byte count
    assert not any("ridge point" in n for n in rep.notes)  # no compute roof: which roof applies is unknown
    assert ProfileReport.from_json(rep.to_json()) == rep
    # Without a timing measurement the profiled duration (29 568 ns) is used, and the report says so.
    rep2 = make_report(_trial(None), layernorm.spec, W, kernel=kernel)
    assert rep2.roofline.kernel_us == pytest.approx(29.568)
    assert any("duration" in n for n in rep2.notes)
    # DRAM bytes in the profile are checked against the formula.
    rereads = kernel.model_copy(update={"metrics": {**kernel.metrics, "dram_bytes": 2.0 * BYTES}})
    rep3 = make_report(_trial(29.5), layernorm.spec, W, kernel=rereads, ceilings=H200)
    assert rep3.roofline.dram_check == "re-reads" and rep3.roofline.dram_ratio == pytest.approx(2.0)
    # With both roofs, compute-bound by throughput but memory-bound by intensity is called out.
    assert rep3.roofline.bound == "memory" and any("ridge point" in n for n in rep3.notes)
