"""benchmarks/profile_classes.py on a CPU host: a stand-in ncu (the recorded H200 CSV) and a stand-in CUDA device."""

import importlib.util
import json
from pathlib import Path

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.core.archive import Archive

ROOT = Path(__file__).resolve().parents[2]


def _bench_module():
    spec = importlib.util.spec_from_file_location("profile_classes_bench", ROOT / "benchmarks" / "profile_classes.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def two_workload_run(tmp_path, layernorm, monkeypatch):
    from tests.cli.test_profile_cli import CFG, ENV, W, _measure
    from kernelloop.base.records import BuildArtifact, Candidate, DType, Status, Trial, Verdict, Workload
    monkeypatch.setenv("KERNELLOOP_CACHE_DIR", str(tmp_path / "cache"))
    small = Workload(op="layernorm", axes={"M": 1, "N": 4096}, dtype=DType.fp16)
    cand = Candidate(op="layernorm", template="rowwise", source=layernorm.template_sources["rowwise"],
                     config={**CFG, "num_warps": 4}, proposer="search:random")
    with Archive(tmp_path / "src-run" / "archive.sqlite") as a:
        a.create_run("r-1", layernorm.spec, {"m": 1}, "m-1", ENV, {"secret": "s"})
        for i, w in enumerate((small, W)):
            a.record_trial(Trial(run_id="r-1", index=i, candidate_id=cand.id, workload_id=w.id, manifest_hash="m-1",
                                 build=BuildArtifact(registers=40, compile_s=1.0, toolchain="t"),
                                 verdict=Verdict(status=Status.PASSED), measurement=_measure(cand.id, 21.79),
                                 started=i, finished=i + 1), cand, w)
            a.put_baseline("r-1", w.id, "copy", _measure("copy", 20.40))
            a.put_baseline("r-1", w.id, "eager", _measure("eager", 32.7))
    return tmp_path / "src-run"


def test_benchmark_profiles_the_4096_workload_and_leaves_the_source_archive_alone(two_workload_run, tmp_path,
                                                                                 monkeypatch):
    import torch

    from kernelloop.tune.profile import ncu_report_adapter
    from tests.profile.test_ncu_runner import FAKE_NCU
    exe = tmp_path / "ncu"
    exe.write_text(FAKE_NCU)
    exe.chmod(0o755)
    monkeypatch.setenv("KERNELLOOP_NCU", str(exe))
    monkeypatch.setattr(ncu_report_adapter, "load_ncu_report_module", lambda ncu=None: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    before = (two_workload_run / "archive.sqlite").read_bytes()
    bench = _bench_module()
    out = tmp_path / "pc.json"
    rc = bench.main([str(two_workload_run), "--out", str(out), "--work", str(tmp_path / "work")])
    assert rc == 0
    assert (two_workload_run / "archive.sqlite").read_bytes() == before       # profiled into a copy
    data = json.loads(out.read_text())
    trial, eager = data["rows"]
    assert trial["workload"] == "layernorm[4096x4096]:fp16" and trial["subject"] == "trial 1"
    assert eager["subject"] == "eager" and eager["launches"] == 7 and eager["class"] == "compute-bound"
    assert trial["timing_fraction"] == pytest.approx(20.40 / 21.79) and trial["agrees"] is False  # 29.5 vs 21.8 us
    assert trial["matrix_op"] is False and trial["compute_bound"] is None
    assert "| subject | class (launches) |" in data["table"]
    with Archive(tmp_path / "work" / "src-run" / "archive.sqlite") as a:
        assert len(a.baseline_profiles("r-1")) == 1
    with pytest.raises(SystemExit):
        bench.main([])
    assert bench.main([str(tmp_path / "none"), "--out", str(out)]) == 2


def test_clean_agreement_compares_the_profile_with_the_clean_l2_time(layernorm):
    from kernelloop.base.records import DType, Workload
    bench = _bench_module()
    w = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype=DType.fp16)
    nbytes = layernorm.spec.bytes_moved(w.axes, w.dtype)
    rec = {"aggregate": {"duration_ns": 20_832.0, "dram_bytes": nbytes * 2 / 3}}
    a = bench.clean_agreement(None, ops_dir() / "layernorm", w, rec, subject_us=21.5, copy_us=20.0)
    assert a["timing_fraction"] == pytest.approx(20.0 / 21.5)
    assert a["profile_fraction"] == pytest.approx(20.0 / 20.832)
    assert a["difference"] == pytest.approx(21.5 / 20.832 - 1) and a["agrees"] is True
    assert a["timing_source"] == "clean-L2 bench (read flush)" and "0.667x the formula" in a["note"]
    # Nothing to compare without a clean time, a copy or a profile.
    assert bench.clean_agreement(None, ops_dir() / "layernorm", w, rec, subject_us=None, copy_us=20.0) == {}
    assert bench.clean_agreement(None, ops_dir() / "layernorm", w, {"aggregate": None}, 21.5, 20.0) == {}
    row = bench.row_of("layernorm", {"classification": None, "aggregate": None, "agreement": None,
                                     "workload": w.label, "profiled": False, "roofline": None,
                                     "clean_agreement": a}, "trial 1")
    assert row["clean_agrees"] is True and row["clean_timing_us"] == 21.5
    assert "| 21.50 |" in bench.markdown([row])


def test_same_instrument_divides_each_instrument_by_its_own_copy():
    bench = _bench_module()
    rec = {"aggregate": {"duration_ns": 18_050.0}}
    # Recorded on the H200: ncu 18.05 µs for the LayerNorm winner; timer 20.78 µs; timer copy 19.34 µs.
    a = bench.same_instrument(rec, copy_ncu_ns=16_600.0, subject_us=20.78, copy_us=19.34)
    assert a["profile_fraction"] == pytest.approx(16.6 / 18.05) and a["timing_fraction"] == pytest.approx(19.34 / 20.78)
    assert a["difference"] == pytest.approx(abs(16.6 / 18.05 - 19.34 / 20.78) / (19.34 / 20.78))
    assert a["agrees"] is True and a["copy_ncu_us"] == pytest.approx(16.6)
    assert bench.same_instrument(rec, None, 20.78, 19.34) == {}
    assert bench.same_instrument({"aggregate": None}, 16_600.0, 20.78, 19.34) == {}
    far = bench.same_instrument(rec, copy_ncu_ns=12_000.0, subject_us=20.78, copy_us=19.34)
    assert far["agrees"] is False
