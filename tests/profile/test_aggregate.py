"""Several launches in one profiled call (summed; class of the longest), and the profile-vs-timing agreement.

The multi-launch reports are concatenations of rows recorded on an H200 (tests/fixtures/ncu): no metric value here
is made up. Timings are the ones archived in benchmarks/results/2026-11-30-h200 (eager layernorm 32.7 us, a device
copy of the same bytes 20.40 us, on fp16 [4096, 4096]).
"""

from pathlib import Path

import pytest

from kernelloop.tune.profile.aggregate import AGREEMENT_TOLERANCE, aggregate, agreement, dram_bytes_of
from kernelloop.tune.profile.ncu_csv import parse_details_csv, read_csv_text, split_preamble
from kernelloop.tune.profile.report import make_baseline_report, roofline_for
from kernelloop.base.records import BottleneckClass, DType, Workload

NCU_CSV = Path(__file__).resolve().parents[1] / "fixtures" / "ncu" / "h200-torch-layernorm-sol-occupancy-launch.csv.xz"
W = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype=DType.fp16)
EAGER_US, COPY_US = 32.7, 20.40   # archived timings (cold L2, CUDA events) of eager layernorm and the copy roof


def _rows_of(launches: list[str]) -> str:
    """The recorded CSV restricted to the rows of the given launch IDs (header and tool messages kept)."""
    notes, body = split_preamble(read_csv_text(NCU_CSV))
    header, *rows = body.splitlines()
    keep = [r for r in rows if any(r.startswith(f'"{lid}",') for lid in launches)]
    return "\n".join([*notes, header, *keep]) + "\n"


def test_two_recorded_layer_norm_launches_are_summed():
    kernels = parse_details_csv(_rows_of(["2", "3"]))
    assert [k.launch_id for k in kernels] == [2, 3]
    agg = aggregate(kernels)
    assert agg.launches == 2 and agg.duration_ns == 29_568.0 + 29_216.0
    assert agg.dominant == 0 and agg.kernels[0].share == pytest.approx(29_568.0 / (29_568.0 + 29_216.0))
    # Duration-weighted DRAM throughput: 32.33 % over 29.568 us and 32.55 % over 29.216 us.
    assert agg.dram_pct == pytest.approx((32.33 * 29_568.0 + 32.55 * 29_216.0) / (29_568.0 + 29_216.0))
    assert agg.dram_bytes is None              # that recording has no Memory Workload Analysis: bytes unknown
    assert [k.bottleneck for k in agg.kernels] == [BottleneckClass.COMPUTE] * 2


def test_the_longest_launch_gives_the_class_and_every_launch_keeps_its_own():
    # A random-number kernel, a layer_norm and a cuBLAS GEMM, as one "call" (recorded rows, launches 1, 2, 6).
    kernels = parse_details_csv(_rows_of(["1", "2", "6"]))
    agg = aggregate(kernels)
    total = 2_496.0 + 29_568.0 + 181_536.0
    assert agg.duration_ns == total and agg.launches == 3
    assert agg.dominant == 2 and agg.kernels[2].kernel.startswith("nvjet_sm90")
    assert [k.bottleneck.value for k in agg.kernels] == ["memory-latency-bound", "compute-bound",
                                                          "compute-bound"]
    assert agg.kernels[2].share == pytest.approx(181_536.0 / total)
    assert sum(k.share for k in agg.kernels) == pytest.approx(1.0)
    assert agg.kernels[2].compute_pct == 90.44 and agg.kernels[2].memory_pct == 69.96


def test_whole_recording_and_unknowns():
    kernels = parse_details_csv(read_csv_text(NCU_CSV))
    agg = aggregate(kernels)
    assert agg.launches == 7 and agg.dominant == 6
    assert agg.duration_ns == sum(k.metrics["duration_ns"] for k in kernels)
    # A launch without a duration makes the sum unknown (and never dominates).
    stripped = kernels[6].model_copy(update={"metrics": {k: v for k, v in kernels[6].metrics.items()
                                                         if k != "duration_ns"}})
    agg2 = aggregate([*kernels[:6], stripped])
    assert agg2.duration_ns is None and agg2.dram_pct is None and agg2.dominant == 0
    assert agg2.kernels[6].share is None
    with pytest.raises(ValueError):
        aggregate([])


def test_dram_bytes_of_prefers_the_total_then_read_plus_write():
    k = parse_details_csv(_rows_of(["2"]))[0]
    assert dram_bytes_of(k) is None
    rw = k.model_copy(update={"metrics": {**k.metrics, "dram_read_bytes": 10.0, "dram_write_bytes": 5.0}})
    assert dram_bytes_of(rw) == 15.0
    total = rw.model_copy(update={"metrics": {**rw.metrics, "dram_bytes": 20.0}})
    assert dram_bytes_of(total) == 20.0
    both = aggregate([rw, total])
    assert both.dram_bytes == 35.0


def test_agreement_math_under_the_copy_roof(layernorm):
    spec = layernorm.spec
    nbytes = spec.bytes_moved(W.axes, W.dtype)
    roof = roofline_for(spec, W, EAGER_US, copy_us=COPY_US)
    assert roof.bandwidth_gbps == pytest.approx(nbytes / (COPY_US * 1e-6) / 1e9)
    # Profile: the formula's bytes in the recorded eager duration (29.568 us); timing: the archived 32.7 us.
    a = agreement(spec, W, roof, profile_bytes=nbytes, profile_ns=29_568.0, timing_us=EAGER_US, timing_source="t")
    assert a.timing_fraction == pytest.approx(COPY_US / EAGER_US)
    assert a.profile_fraction == pytest.approx(COPY_US / 29.568)
    assert a.difference == pytest.approx(EAGER_US / 29.568 - 1)
    assert a.agrees is False and a.tolerance == AGREEMENT_TOLERANCE and "1.000x the formula" in a.note
    same = agreement(spec, W, roof, profile_bytes=nbytes, profile_ns=EAGER_US * 1e3, timing_us=EAGER_US)
    assert same.difference == pytest.approx(0.0) and same.agrees is True
    # DRAM bytes below the formula (writes still in L2 at the kernel's end) change the DRAM throughput, not the
    # roofline fraction, which uses the formula's bytes like the timing side.
    held = agreement(spec, W, roof, profile_bytes=nbytes * 2 / 3, profile_ns=EAGER_US * 1e3, timing_us=EAGER_US)
    assert held.profile_fraction == pytest.approx(same.profile_fraction) and held.agrees is True
    assert held.profile_gbps == pytest.approx(same.profile_gbps * 2 / 3) and "0.667x the formula" in held.note
    # Missing pieces: no fraction, no verdict, and the note names what is missing.
    none = agreement(spec, W, roofline_for(spec, W, EAGER_US), profile_bytes=None, profile_ns=29_568.0,
                     timing_us=EAGER_US)
    assert none.agrees is None and none.difference is None and "bandwidth roof" in none.note
    assert "no profiled DRAM bytes" in none.note
    nodur = agreement(spec, W, roof, profile_bytes=nbytes, profile_ns=None, timing_us=EAGER_US)
    assert nodur.agrees is None and "a profiled duration" in nodur.note


def test_baseline_report_of_a_multi_launch_call(layernorm):
    kernels = parse_details_csv(_rows_of(["2", "3", "4"]))
    rep = make_baseline_report("eager", layernorm.spec, W, kernels=kernels, copy_us=COPY_US, artifact="a.ncu-rep")
    assert rep.baseline == "eager" and rep.trial_id == "" and rep.workload_id == W.id
    assert rep.aggregate.launches == 3 and rep.kernel.launch_id == 2        # 29.568 us is the longest
    assert rep.classification.bottleneck is BottleneckClass.COMPUTE
    assert any("3 launches" in n for n in rep.notes)
    assert any("no timing measurement" in n for n in rep.notes)            # no measurement given: ncu's time
    assert rep.roofline.kernel_us == pytest.approx((29_568.0 + 29_216.0 + 29_472.0) / 1e3)
    assert rep.agreement is not None and rep.agreement.timing_us is None and rep.agreement.agrees is None
