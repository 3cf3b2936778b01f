"""The ncu runner, the CSV fallback and the ncu_report adapter, against stand-ins for Nsight Compute.

The real tool runs in the gpu tier (tests/profile/test_profile_gpu.py). Here a fake `ncu` executable checks the
command line kernelloop builds, writes the recorded H200 CSV as its "report", and misbehaves on request
(rejected metric, hang, no kernel); a stand-in `ncu_report` module checks the adapter's conversion.
"""

import json
import stat
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelloop.tune.profile.ncu_csv import read_csv_text

from kernelloop.base.builtin import ops_dir
from kernelloop.tune.profile import ncu_report_adapter as adapter
from kernelloop.tune.profile.metrics import SECTIONS
from kernelloop.tune.profile.ncu import (NVTX_RANGE, NcuOptions, harness_job, load_profiles, ncu_command,
                                    profile_candidate, run_ncu)

NCU_CSV = Path(__file__).resolve().parents[1] / "fixtures" / "ncu" / "h200-torch-layernorm-sol-occupancy-launch.csv.xz"
ROOT_OPS = ops_dir()

FAKE_NCU = f"""#!{sys.executable}
import json, os, subprocess, sys, time
args = sys.argv[1:]
if "--import" in args:
    sys.stdout.write(open(args[args.index("--import") + 1]).read())
    sys.exit(0)
log = os.environ.get("FAKE_NCU_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps(args) + "\\n")
if os.environ.get("FAKE_NCU_SLEEP"):
    child = subprocess.Popen(["sleep", "60"])
    open(os.environ["FAKE_NCU_PIDS"], "w").write(json.dumps([os.getpid(), child.pid]))
    time.sleep(float(os.environ["FAKE_NCU_SLEEP"]))
metrics = args[args.index("--metrics") + 1].split(",") if "--metrics" in args else []
if "bogus__metric.sum" in metrics:
    print("==ERROR== Failed to find metric bogus__metric.sum")
    sys.exit(1)
if os.environ.get("FAKE_NCU_NOKERNEL"):
    print("==WARNING== No kernels were profiled.")
    sys.exit(0)
stem = args[args.index("--export") + 1]
open(stem + ".ncu-rep", "w").write(__import__("lzma").open({str(NCU_CSV)!r}, "rt").read())
print("==PROF== Report: " + stem + ".ncu-rep")
"""


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    exe = tmp_path / "tools" / "ncu"
    exe.parent.mkdir()
    exe.write_text(FAKE_NCU)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.delenv("KERNELLOOP_NCU", raising=False)
    return exe


def _calls(tmp_path):
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def test_command_line():
    cmd = ncu_command("/x/ncu", ["python", "-m", "h", "job.json"], "/r/profile",
                      NcuOptions(kernel_regex="_layernorm_fwd", metrics=("dram__bytes.sum",)))
    assert cmd[0] == "/x/ncu"
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--export") + 1] == "/r/profile"
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--section"] == list(SECTIONS)
    assert {"SpeedOfLight", "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis", "Occupancy", "LaunchStats",
            "WarpStateStats", "SchedulerStats"} == set(SECTIONS)
    assert cmd[cmd.index("--nvtx-include") + 1] == f"{NVTX_RANGE}/" and "--nvtx" in cmd
    assert cmd[cmd.index("--kernel-name") + 1] == "regex:_layernorm_fwd"
    assert cmd[cmd.index("--launch-count") + 1] == "1" and "--launch-skip" not in cmd
    assert cmd[cmd.index("--config-file") + 1] == "off"
    assert cmd[cmd.index("--metrics") + 1] == "dram__bytes.sum"
    assert cmd[cmd.index("--") + 1:] == ["python", "-m", "h", "job.json"]


def test_run_and_read_back_through_the_csv_export(tmp_path, fake_ncu):
    run = run_ncu(["true"], tmp_path / "out" / "p", NcuOptions(timeout_s=60), ncu=fake_ncu)
    assert run.status == "ok" and run.report == tmp_path / "out" / "p.ncu-rep" and run.returncode == 0
    assert run.command[0] == str(fake_ncu) and run.dropped_metrics == []
    profiles, notes = load_profiles(run.report, ncu=fake_ncu, use_module=False)
    assert len(profiles) == 7 and profiles[2].metrics["duration_ns"] == 29568.0 and notes == []
    (call,) = _calls(tmp_path)
    assert call[call.index("--clock-control") + 1] == "none"


def test_rejected_metric_is_dropped_and_the_run_repeated(tmp_path, fake_ncu):
    opts = NcuOptions(metrics=("dram__bytes.sum", "bogus__metric.sum"), timeout_s=60)
    run = run_ncu(["true"], tmp_path / "p", opts, ncu=fake_ncu)
    assert run.status == "ok" and run.dropped_metrics == ["bogus__metric.sum"]
    first, second = _calls(tmp_path)
    assert "bogus__metric.sum" in first[first.index("--metrics") + 1]
    assert second[second.index("--metrics") + 1] == "dram__bytes.sum"


def test_no_kernel_and_not_found(tmp_path, fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_NOKERNEL", "1")
    assert run_ncu(["true"], tmp_path / "p", ncu=fake_ncu).status == "no-kernel"
    run = run_ncu(["true"], tmp_path / "p", ncu=tmp_path / "missing" / "ncu")   # an explicit path is not replaced
    assert run.status == "not-found" and "KERNELLOOP_NCU" in run.log
    monkeypatch.setattr(adapter.shutil, "which", lambda name: None)
    monkeypatch.setattr(adapter, "NCU_GLOBS", ())
    assert adapter.find_ncu() is None
    monkeypatch.setenv("KERNELLOOP_NCU", str(fake_ncu))
    assert adapter.find_ncu() == fake_ncu


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in state or "\nState:\tX" in state


def test_timeout_kills_the_whole_process_group(tmp_path, fake_ncu, monkeypatch):
    pids_file = tmp_path / "pids.json"
    monkeypatch.setenv("FAKE_NCU_SLEEP", "60")
    monkeypatch.setenv("FAKE_NCU_PIDS", str(pids_file))
    t0 = time.monotonic()
    run = run_ncu(["true"], tmp_path / "p", NcuOptions(timeout_s=1.5), ncu=fake_ncu)
    assert run.status == "timeout" and run.returncode is None and time.monotonic() - t0 < 20
    pids = json.loads(pids_file.read_text())
    deadline = time.monotonic() + 5
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(p) for p in pids), "ncu and the profiled process must not outlive the deadline"


def test_profile_candidate_keeps_the_matching_kernel(tmp_path, fake_ncu, monkeypatch):
    monkeypatch.setattr(adapter, "load_ncu_report_module", lambda ncu=None: None)
    job = harness_job(str(ops_dir() / "layernorm"), "kernel.py", {"BLOCK_N": 4096}, "{}", seed=7)
    res = profile_candidate(job, tmp_path / "work", NcuOptions(kernel_regex="layer_norm", timeout_s=60),
                            ncu=fake_ncu)
    assert res.run.status == "ok" and res.kernel is not None and res.kernel.launch_id == 2
    assert json.loads((tmp_path / "work" / "profile-job.json").read_text())["seed"] == 7
    assert any("CSV export" in n for n in res.notes) and any("7 launches" in n for n in res.notes)
    (call,) = _calls(tmp_path)
    assert call[call.index("--") + 1:][1:3] == ["-m", "kernelloop.tune.profile.harness"]


# -- the ncu_report adapter ----------------------------------------------------------------------------------

class FakeMetric:
    def __init__(self, value, unit=None, broken_value=False):
        self._v, self._u, self._broken = value, unit, broken_value
        if unit is None:
            self.unit = None  # this module version has no IMetric.unit()

    def value(self):
        if self._broken:
            raise RuntimeError("instanced")
        return self._v

    def as_double(self):
        return float(self._v)

    def unit(self):  # noqa: F811 - replaced per instance when the version lacks it
        return self._u


class FakeAction:
    def __init__(self, name, metrics, rules=None):
        self._name, self._metrics, self._rules = name, metrics, rules

    def name(self):
        return self._name

    def metric_names(self):
        return list(self._metrics)

    def metric_by_name(self, n):
        return self._metrics[n]

    def rule_results_as_dicts(self):
        return self._rules or []


def _context(actions):
    rng = SimpleNamespace(num_actions=lambda: len(actions), action_by_idx=lambda i: actions[i])
    return SimpleNamespace(num_ranges=lambda: 1, range_by_idx=lambda i: rng)


def test_adapter_converts_raw_metrics():
    action = FakeAction("_layernorm_fwd", {
        "gpu__time_duration.sum": FakeMetric(21.5, "usecond"),
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": FakeMetric(41.0, "%"),
        "dram__bytes.sum": FakeMetric(67_200_000, None),            # no unit(): base unit (byte) assumed
        "lts__t_sector_hit_rate.pct": FakeMetric(12.5, "%", broken_value=True),  # value() fails: as_double()
        "launch__block_dim_x": FakeMetric(128), "launch__block_dim_y": FakeMetric(1),
        "launch__block_dim_z": FakeMetric(1), "launch__grid_dim_x": FakeMetric(4096),
        "launch__grid_dim_y": FakeMetric(1), "launch__grid_dim_z": FakeMetric(1),
        "device__attribute_display_name": FakeMetric("NVIDIA H200"),
        "device__attribute_compute_capability_major": FakeMetric(9),
        "device__attribute_compute_capability_minor": FakeMetric(0),
        "smsp__something_unmapped.sum": FakeMetric(5.0),
        "sm__no_value.sum": FakeMetric(None, "%"),                # value() None: no value, not 0
    }, rules=[{"rule_identifier": "SOLBottleneck", "name": "Bottleneck", "section_identifier": "SpeedOfLight",
               # ncu_report's documented shape (MsgType 2 = OPTIMIZATION, SpeedupType 2 = GLOBAL)
               "rule_message": {"title": "Memory", "message": "Memory is more heavily utilized", "type": 2},
               "speedup_estimation": {"type": 2, "speedup": 12.5}}])
    module = SimpleNamespace(load_report=lambda path: _context([action]))
    (p,) = adapter.read_report("x.ncu-rep", module)
    assert p.source == "ncu_report" and p.kernel == "_layernorm_fwd"
    assert p.metrics["duration_ns"] == pytest.approx(21500.0) and p.metrics["sol_compute_pct"] == 41.0
    assert p.metrics["dram_bytes"] == 67_200_000 and p.metrics["l2_hit_pct"] == 12.5
    assert p.block == [128, 1, 1] and p.grid == [4096, 1, 1] and p.device == "NVIDIA H200" and p.cc == "9.0"
    assert "smsp__something_unmapped.sum" not in p.extra and "launch__block_dim_x" not in p.metrics
    assert p.rules[0].name == "SOLBottleneck" and p.rules[0].speedup_pct == 12.5
    assert (p.rules[0].type, p.rules[0].speedup_type) == ("OPT", "global")
    assert p.rules[0].message == "Memory: Memory is more heavily utilized"
    (kept_all,) = adapter.read_report("x", module, keep=lambda n: n == "sm__no_value.sum")
    assert "sm__no_value.sum" not in kept_all.extra  # None stays None (as_double would have said 0)
    (kept,) = adapter.read_report("x", module, keep=lambda n: n.startswith("smsp__"))
    assert kept.extra == {"smsp__something_unmapped.sum": 5.0}


@pytest.fixture
def fake_install(tmp_path):
    """A directory tree shaped like a CUDA install: <cuda>/bin/ncu (wrapper) + <cuda>/nsight-compute-X/extras/python."""
    if "ncu_report" in sys.modules:
        pytest.skip("a real ncu_report module is already imported")
    root = tmp_path / "cuda"
    inst = root / "nsight-compute-2099.1"
    (inst / "extras" / "python").mkdir(parents=True)
    (root / "bin").mkdir()
    (inst / "ncu").write_text(FAKE_NCU)
    (root / "bin" / "ncu").write_text(FAKE_NCU)
    for exe in (inst / "ncu", root / "bin" / "ncu"):
        exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    (inst / "extras" / "python" / "ncu_report.py").write_text(
        "FAKE_INSTALL = True\n"
        "def load_report(path):\n"
        "    if 'broken' in str(path):\n"
        "        raise RuntimeError('report version not supported')\n"
        "    raise NotImplementedError('stand-in')\n")
    saved = list(sys.path)
    yield root
    sys.modules.pop("ncu_report", None)
    sys.path[:] = saved


def test_module_is_found_next_to_the_ncu_install(fake_install, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.delenv("KERNELLOOP_NCU_PYTHON", raising=False)
    wrapper = fake_install / "bin" / "ncu"
    assert fake_install / "nsight-compute-2099.1" / "extras" / "python" in adapter.ncu_python_dirs(wrapper)
    mod = adapter.load_ncu_report_module(wrapper)
    assert mod is not None and mod.FAKE_INSTALL is True
    # A module that cannot read the report: the CSV export is used instead, and the notes say why.
    broken = tmp_path / "broken.ncu-rep"
    broken.write_text(read_csv_text(NCU_CSV))
    profiles, notes = load_profiles(broken, ncu=wrapper)
    assert len(profiles) == 7 and "report version not supported" in notes[0]


def test_profile_trial_archives_report_and_ncu_rep(tmp_path, fake_ncu, monkeypatch, layernorm):
    """The controller's hook: profile one trial, keep the .ncu-rep in the run folder, archive the report."""
    from kernelloop.core.archive import Archive
    from kernelloop.tune.profile.report import profile_trial
    from kernelloop.base.records import (BuildResources, Candidate, DType, Environment, Hypothesis, Status, Trial,
                                    Verdict, Workload)
    monkeypatch.setenv("KERNELLOOP_NCU", str(fake_ncu))
    monkeypatch.setattr(adapter, "load_ncu_report_module", lambda ncu=None: None)
    w = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype=DType.fp16)
    cand = Candidate(op="layernorm", template="rowwise", source=layernorm.template_sources["rowwise"],
                     config={"BLOCK_N": 4096, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0})
    trial = Trial(run_id="r", index=0, candidate_id=cand.id, workload_id=w.id, manifest_hash="m",
                  verdict=Verdict(status=Status.PASSED), started=0.0, finished=1.0)
    run_dir = tmp_path / "run"
    env = Environment(device="cuda", gpu="NVIDIA H200", torch="t", triton="t", python="p", host="h")
    with Archive(run_dir / "archive.sqlite") as a:
        a.create_run("r", layernorm.spec, {}, "m", env, {})
        a.record_trial(trial, cand, w)
        rep = profile_trial(a, run_dir, trial, op_dir=ROOT_OPS / "layernorm", source_file="kernel.py",
                            config=cand.config, workload=w, spec=layernorm.spec, seed=3, kernel_regex="layer_norm",
                            build=BuildResources(registers=32, global_loads={128: 2}), copy_us=20.4,
                            hypotheses=[Hypothesis(metric="sol_dram_pct", direction="up")], cites=["E-X"])
        assert a.profile("r", trial.id) == rep
    assert rep.artifact == f"profiles/{trial.id}.ncu-rep" and (run_dir / rep.artifact).is_file()
    assert rep.kernel.launch_id == 2 and rep.classification.bottleneck.value == "compute-bound"
    # No measurement: ncu's duration. The stand-in report holds the three layer_norm launches of the recorded
    # script; every matching launch of the profiled call is summed (a real NVTX range holds one call).
    assert rep.roofline.fraction == pytest.approx(20.4 / (29.568 + 29.216 + 29.472))
    assert rep.command[rep.command.index("--kernel-name") + 1] == "regex:layer_norm" and "--launch-count" not in rep.command
    assert rep.command[rep.command.index("--clock-control") + 1] == "none" and rep.cites == ["E-X"]
    assert rep.build.ldg128_fraction == 1.0 and rep.hypotheses[0].metric == "sol_dram_pct"


def test_rejected_metric_names_are_found_in_ncu_messages():
    from kernelloop.tune.profile.ncu import _rejected
    requested = ("sm__pipe_fp16_cycles_active.avg.pct_of_peak_sustained_active", "dram__bytes.sum",
                 "bogus__metric.sum")
    log = ("==ERROR== Failed to find metric regex:^sm__pipe_fp16_cycles_active\\.avg\\.pct_of_peak_sustained_active$\n"
           "==ERROR== Failed to find metric bogus__metric\n")
    assert _rejected(log, requested) == ["bogus__metric.sum",
                                         "sm__pipe_fp16_cycles_active.avg.pct_of_peak_sustained_active"]
    assert _rejected("==PROF== Disconnected", requested) == []


def test_missing_counter_permission_is_said_plainly(tmp_path):
    exe = tmp_path / "ncu"
    exe.write_text("#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission'\n"
                   "echo '==WARNING== No kernels were profiled.'\nexit 1\n")
    exe.chmod(0o755)
    run = run_ncu(["true"], tmp_path / "p", NcuOptions(timeout_s=30), ncu=exe)
    assert run.status == "failed" and run.log.startswith("no permission to read the GPU's performance counters")
