"""`kernelloop profile`: class, kept evidence, roofline position and hypothesis record, read from the archive."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.core.archive import Archive
from kernelloop.cli import common
from kernelloop.cli.app import app
from kernelloop.cli.profile import NO_PROFILE
from kernelloop.tune.profile.ceilings import store_ceilings
from kernelloop.tune.profile.ncu_csv import read_details_csv, select_kernel
from kernelloop.tune.profile.report import make_report
from kernelloop.base.records import (BuildArtifact, Candidate, Ceilings, DType, Environment, Measurement, Stats, Status,
                                TimingPolicy, Trial, Verdict, Workload)

ROOT = Path(__file__).resolve().parents[2]
NCU_CSV = ROOT / "tests" / "fixtures" / "ncu" / "h200-torch-layernorm-sol-occupancy-launch.csv.xz"
W = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype=DType.fp16)
ENV = Environment(device="cuda", gpu="NVIDIA H200", driver="580.159.04", torch="2.11.0", triton="3.6.0",
                  python="3.12", host="h")
POLICY = TimingPolicy(name="cold-l2-events", clock="cuda-events", warmup=10, samples=60, flush_bytes=256 << 20,
                      sleep_cycles=1 << 20, bootstrap=1000)
CFG = {"BLOCK_N": 4096, "ROWS": 1, "EVICT_FIRST": 0, "STREAM_STORE": 0}
H200 = Ceilings(device="NVIDIA H200", driver="580.159.04", torch="2.11.0", copy_gbps=3300.0,
                vector_tflops={"fp32": 60.0})
runner = CliRunner()


def _measure(subject: str, median: float) -> Measurement:
    st = Stats(median_us=median, ci_low_us=median * 0.995, ci_high_us=median * 1.005, iqr_us=0.1, n=60)
    nbytes = 2 * 4096 * 4096 * 2 + 2 * 4096 * 2
    return Measurement(subject=subject, workload_id=W.id, policy=POLICY, kernel_samples_us=[median] * 3,
                       call_samples_us=[median + 30] * 3, kernel=st, call=st, bytes_moved=nbytes,
                       gbps=nbytes / (median * 1e-6) / 1e9)


@pytest.fixture
def run(tmp_path, layernorm, monkeypatch):
    """A run with a parent (16 warps, 25.79 us) and a planner child (4 warps, 21.79 us) and a copy baseline."""
    monkeypatch.setenv("KERNELLOOP_CACHE_DIR", str(tmp_path / "cache"))   # never the user's ceilings
    source = layernorm.template_sources["rowwise"]
    parent = Candidate(op="layernorm", template="rowwise", source=source, config={**CFG, "num_warps": 16},
                       proposer="search:random")
    child = Candidate(op="layernorm", template="rowwise", source=source, config={**CFG, "num_warps": 4},
                      parent_ids=[parent.id], proposer="rule-planner",
                      hypothesis="sol_compute_pct down; latency_us down -10%")
    trials = []
    with Archive(tmp_path / "run" / "archive.sqlite") as a:
        a.create_run("r-1", layernorm.spec, {"m": 1}, "m-1", ENV, {})
        for i, (c, us) in enumerate([(parent, 25.79), (child, 21.79)]):
            t = Trial(run_id="r-1", index=i, candidate_id=c.id, workload_id=W.id, manifest_hash="m-1",
                      build=BuildArtifact(registers=40, spills=0, shared_bytes=64, compile_s=1.0, toolchain="t"),
                      verdict=Verdict(status=Status.PASSED), measurement=_measure(c.id, us), started=i,
                      finished=i + 1)
            a.record_trial(t, c, W)
            trials.append(t)
        a.put_baseline("r-1", W.id, "copy", _measure("copy", 20.40))
    return tmp_path / "run", trials


def _json(args):
    r = runner.invoke(app, ["profile", *args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_without_profiles_the_roofline_comes_from_the_measurement(run):
    folder, (parent, child) = run
    out = _json([str(folder)])
    assert out["op"] == "layernorm" and out["gpu"] == "NVIDIA H200"
    (rec,) = out["trials"]                                   # the best trial of the one workload: the child
    assert rec["trial"] == child.id and rec["profiled"] is False and rec["classification"] is None
    assert NO_PROFILE in rec["notes"]
    roof = rec["roofline"]
    assert roof["fraction"] == pytest.approx(20.40 / 21.79) and roof["bound"] == "unknown"  # no compute roof
    assert roof["arithmetic_intensity"] == pytest.approx(8 * 4096 * 4096 / (2 * 4096 * 4096 * 2 + 2 * 4096 * 2))
    assert "copy" in roof["ceiling_source"]
    assert rec["build"]["registers"] == 40
    # The hypothesis record: latency moved as predicted (intervals disjoint, -15.5 % beats -10 %); the compute
    # throughput is not observed without profiles.
    assert rec["hypothesis_text"] == "sol_compute_pct down; latency_us down -10%"
    outcomes = {o["hypothesis"]["metric"]: o for o in rec["outcomes"]}
    assert outcomes["latency_us"]["status"] == "confirmed" and outcomes["latency_us"]["magnitude_met"] is True
    assert outcomes["latency_us"]["change"] == pytest.approx(21.79 / 25.79 - 1)
    assert outcomes["sol_compute_pct"]["status"] == "inconclusive"
    assert rec["parent_trial"] == parent.id


def test_measured_ceilings_are_used_when_cached(run, tmp_path):
    folder, _ = run
    store_ceilings(H200)
    roof = _json([str(folder)])["trials"][0]["roofline"]
    assert roof["ceiling_source"].startswith("measured ceilings NVIDIA H200")
    assert roof["peak_name"] == "vector fp32" and roof["ridge_intensity"] == pytest.approx(60e12 / 3300e9)
    assert roof["bound"] == "memory" and roof["fraction"] == pytest.approx(67125248 / 3300e9 * 1e6 / 21.79)


def test_archived_profiles_give_class_evidence_and_outcomes(run, layernorm):
    folder, (parent, child) = run
    kernel = select_kernel(read_details_csv(NCU_CSV), "layer_norm")
    faster = kernel.model_copy(update={"metrics": {**kernel.metrics, "sol_compute_pct": 50.0}})
    with Archive(folder / "archive.sqlite") as a:
        for t, k in ((parent, kernel), (child, faster)):
            a.put_profile("r-1", t.id, make_report(t, layernorm.spec, W, kernel=k, ceilings=H200,
                                                   cites=["E-ISSUE-BOUND-FEWER-WARPS"] if t is child else []))
    rec = _json([str(folder)])["trials"][0]
    assert rec["profiled"] is True
    c = rec["classification"]
    assert c["bottleneck"] == "compute-bound" and c["compute_pct"] == 50.0
    assert [e["key"] for e in c["evidence"]][:1] == ["sol_compute_pct"]
    assert "stall_*" in c["missing"]
    outcomes = {o["hypothesis"]["metric"]: o["status"] for o in rec["outcomes"]}
    assert outcomes == {"sol_compute_pct": "confirmed", "latency_us": "confirmed"}
    assert rec["cites"] == ["E-ISSUE-BOUND-FEWER-WARPS"]
    assert sum("ridge point" in n for n in rec["notes"]) == 1       # archived with the report, not repeated
    table = runner.invoke(app, ["profile", str(folder)])
    assert table.exit_code == 0
    assert "compute-bound" in table.stdout and "roofline" in table.stdout and "confirmed" in table.stdout


def test_trial_selection_and_errors(run, tmp_path):
    folder, (parent, child) = run
    assert [r["trial"] for r in _json([str(folder), "--trial", "0"])["trials"]] == [parent.id]
    assert [r["trial"] for r in _json([str(folder / "archive.sqlite"), "--trial", child.id[:10]])["trials"]] == \
        [child.id]
    rec = _json([str(folder), "--trial", "0"])["trials"][0]
    assert rec["hypotheses"] == [] and rec["outcomes"] == []           # the parent predicted nothing
    bad = runner.invoke(app, ["profile", str(folder), "--trial", "99"])
    assert bad.exit_code == common.BAD_INPUT and "99" in bad.output
    assert runner.invoke(app, ["profile", str(tmp_path / "nothing")]).exit_code == common.BAD_INPUT


# -- issue 4: --ncu (profile now) and --baseline -----------------------------------------------------------------

def test_ncu_without_nsight_compute_is_a_clear_error(run, monkeypatch):
    from kernelloop.tune.profile import ncu_report_adapter
    folder, _ = run
    monkeypatch.setattr(ncu_report_adapter, "find_ncu", lambda ncu=None: None)
    r = runner.invoke(app, ["profile", str(folder), "--ncu"])
    assert r.exit_code == common.STOPPED
    assert "--ncu cannot run here" in r.output and "ncu" in r.output and "KERNELLOOP_NCU" in r.output
    with Archive(folder / "archive.sqlite") as a:                      # nothing was written
        assert all(a.profile("r-1", t.id) is None for t in a.trials("r-1"))


def test_ncu_without_a_gpu_is_a_clear_error(run, monkeypatch, tmp_path):
    import torch

    from kernelloop.tune.profile import ncu_report_adapter
    folder, _ = run
    monkeypatch.setattr(ncu_report_adapter, "find_ncu", lambda ncu=None: tmp_path / "ncu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    r = runner.invoke(app, ["profile", str(folder), "--ncu", "--baseline", "eager", "--json"])
    assert r.exit_code == common.STOPPED and "no CUDA GPU" in r.output and r.stdout == ""


def test_unknown_baseline_is_bad_input(run):
    folder, _ = run
    r = runner.invoke(app, ["profile", str(folder), "--baseline", "nope"])
    assert r.exit_code == common.BAD_INPUT and "nope" in r.output and "eager" in r.output


def test_baseline_without_profile_shows_its_timing_roofline(run):
    folder, (parent, child) = run
    with Archive(folder / "archive.sqlite") as a:
        a.put_baseline("r-1", W.id, "eager", _measure("eager", 32.7))
    out = _json([str(folder), "--baseline", "eager", "--baseline", "copy"])
    eager, copy = out["baselines"]
    assert eager["baseline"] == "eager" and eager["kernel_us"] == 32.7 and eager["profiled"] is False
    assert "no Nsight Compute profile is archived for this baseline" in eager["notes"]
    assert eager["roofline"]["fraction"] == pytest.approx(20.40 / 32.7)
    assert copy["roofline"]["fraction"] == pytest.approx(1.0) and out["ncu"] == {"ran": False, "failed": []}


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    """A host that looks like a GPU host to `--ncu`: a stand-in ncu that writes the recorded H200 CSV as its report
    (7 launches: random-number kernels, three layer_norms, a GEMM) and torch reporting a CUDA device."""
    import torch

    from kernelloop.tune.profile import ncu_report_adapter
    from tests.profile.test_ncu_runner import FAKE_NCU
    exe = tmp_path / "tools" / "ncu"
    exe.parent.mkdir()
    exe.write_text(FAKE_NCU)
    exe.chmod(0o755)
    monkeypatch.setenv("KERNELLOOP_NCU", str(exe))
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setattr(ncu_report_adapter, "load_ncu_report_module", lambda ncu=None: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    return tmp_path / "calls.jsonl"


def test_ncu_profiles_trial_and_baseline_archives_and_prints(run, fake_gpu, monkeypatch):
    folder, (parent, child) = run
    monkeypatch.chdir(ROOT)                                            # ops/layernorm: the default op folder
    with Archive(folder / "archive.sqlite") as a:
        a.put_baseline("r-1", W.id, "eager", _measure("eager", 32.7))
    r = runner.invoke(app, ["profile", str(folder), "--ncu", "--baseline", "eager", "--timeout", "60", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    (rec,) = out["trials"]
    assert rec["trial"] == child.id and rec["profiled"] is True and out["ncu"] == {"ran": True, "failed": []}
    # Every launch of the report is summed; the class is the longest launch's (the GEMM of the recording).
    agg = rec["aggregate"]
    assert agg["launches"] == 7 and agg["kernels"][agg["dominant"]]["kernel"].startswith("nvjet_sm90")
    assert rec["classification"]["bottleneck"] == "compute-bound"
    assert rec["artifact"] == f"profiles/{child.id}.ncu-rep" and (folder / rec["artifact"]).is_file()
    agree = rec["agreement"]
    assert agree["timing_us"] == 21.79 and agree["timing_fraction"] == pytest.approx(20.40 / 21.79)
    # The recording has no DRAM bytes: the fractions still compare (formula bytes), the byte check cannot.
    assert agree["profile_bytes"] is None and "no profiled DRAM bytes" in agree["note"]
    assert agree["agrees"] is (agree["difference"] <= 0.05)
    (base,) = out["baselines"]
    assert base["baseline"] == "eager" and base["profiled"] is True and base["aggregate"]["launches"] == 7
    assert base["artifact"] == f"profiles/baseline-eager-{W.id}.ncu-rep" and (folder / base["artifact"]).is_file()
    assert base["agreement"]["timing_us"] == 32.7
    # The jobs the harness got: the archived candidate source and config; the eager baseline on the same inputs.
    calls = [json.loads(line) for line in fake_gpu.read_text().splitlines()]
    assert len(calls) == 2 and all("--launch-count" not in c and "--kernel-name" not in c for c in calls)
    jobs = [json.loads(Path(c[-1]).read_text()) for c in calls]
    assert jobs[0]["mode"] == "candidate" and jobs[0]["config"]["num_warps"] == 4
    assert Path(jobs[0]["source_file"]).read_text() == (ops_dir() / "layernorm" / "kernel.py").read_text()
    assert jobs[1]["mode"] == "baseline" and jobs[1]["baseline"] == "eager" and jobs[1]["seed"] == jobs[0]["seed"]
    # Archived: a later plain `profile` reads both back.
    again = _json([str(folder), "--baseline", "eager"])
    assert again["trials"][0]["aggregate"] == agg and again["baselines"][0]["profiled"] is True
    table = runner.invoke(app, ["profile", str(folder), "--baseline", "eager"])
    assert table.exit_code == 0 and "7 in the profiled call" in table.stdout and "baseline eager" in table.stdout


def test_ncu_failure_of_a_subject_exits_1(run, fake_gpu, monkeypatch):
    folder, _ = run
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("FAKE_NCU_NOKERNEL", "1")
    r = runner.invoke(app, ["profile", str(folder), "--ncu"])
    assert r.exit_code == common.FAILED and "not profiled" in r.output


def test_ncu_needs_the_runs_op_folder(run, fake_gpu, tmp_path):
    folder, _ = run
    r = runner.invoke(app, ["profile", str(folder), "--ncu", "--op", str(tmp_path / "nowhere")])
    assert r.exit_code == common.BAD_INPUT and "--op" in r.output
    r = runner.invoke(app, ["profile", str(folder), "--ncu", "--op", str(ops_dir() / "rmsnorm")])
    assert r.exit_code == common.BAD_INPUT


def test_ncu_accepts_the_copy_kernel_baseline(run, fake_gpu, monkeypatch):
    """copy-kernel is built in (the copy roof Nsight Compute can see): it needs no recorded measurement."""
    folder, _ = run
    monkeypatch.chdir(ROOT)
    r = runner.invoke(app, ["profile", str(folder), "--ncu", "--baseline", "copy-kernel", "--timeout", "60", "--json"])
    assert r.exit_code == 0, r.output
    (base,) = json.loads(r.stdout)["baselines"]
    assert base["baseline"] == "copy-kernel" and base["profiled"] is True
    jobs = [json.loads(Path(json.loads(line)[-1]).read_text()) for line in fake_gpu.read_text().splitlines()]
    assert jobs[-1]["mode"] == "baseline" and jobs[-1]["baseline"] == "copy-kernel"
