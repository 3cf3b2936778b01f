"""compute-sanitizer plumbing (issue 24, item 10): command lines, report parsing from recorded outputs, verdict
mapping, the deadline, 'not run' without the tool or CUDA, the runner in the interpreter; memcheck on a GPU."""

import os
import stat
import sys
from pathlib import Path

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.base.records import Status, Workload
from kernelloop.core.spec import load_op
from kernelloop.core.verify.sanitize_runner import FAILED_EXIT, LAUNCHED_MARK
from kernelloop.core.verify.sanitizer import (ERROR_EXIT, command_line, judge, run_command, runner_command, runner_env,
                                         sanitize, write_job)
from kernelloop.core.verify.sanitizer_report import SanitizerReport, ToolRun, parse_report

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "sanitizer"
W = Workload(op="rmsnorm", axes={"M": 5, "N": 256}, dtype="fp16")
HONEST_CONFIG = {"BLOCK_N": 256, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0}


@pytest.fixture(scope="module")
def rmsnorm():
    return load_op(ops_dir() / "rmsnorm")


def fixture(name: str) -> str:
    return (FIX / name).read_text()


# -- command lines ---------------------------------------------------------------------------------------------

def test_command_lines(tmp_path):
    job = tmp_path / "job.json"
    for tool in ("memcheck", "racecheck", "synccheck", "initcheck"):
        cmd = command_line(tool, job, "/opt/cuda/bin/compute-sanitizer", print_limit=7)
        assert cmd[:7] == ["/opt/cuda/bin/compute-sanitizer", "--tool", tool, "--error-exitcode", str(ERROR_EXIT),
                           "--print-limit", "7"]
        assert cmd[-4:] == [sys.executable, "-m", "kernelloop.core.verify.sanitize_runner", str(job)]
    assert "--racecheck-report" in command_line("racecheck", job)
    with pytest.raises(ValueError, match="unknown"):
        command_line("leakcheck", job)
    env = runner_env({"TRITON_INTERPRET": "1", "PATH": "/bin"})
    assert "TRITON_INTERPRET" not in env and env["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"


# -- parsing recorded reports ----------------------------------------------------------------------------------

def test_memcheck_out_of_bounds_read():
    count, fs = parse_report("memcheck", fixture("memcheck_oob_read.txt"))
    assert count == 2 and len(fs) == 2
    f = fs[0]
    assert (f.kind, f.memory, f.access, f.size) == ("out_of_bounds", "__global__", "read", 2)
    assert f.kernel == "_rmsnorm_oob" and f.location.endswith("candidate.py:21")
    assert f.thread == (0, 0, 0) and f.block == (4, 0, 0) and f.address == "0x7f3a5e000a00"
    assert "1 bytes after the nearest allocation" in f.excerpt and "Host Frame" in f.excerpt
    assert fs[1].thread == (1, 0, 0)


def test_racecheck_shared_memory_hazard():
    count, fs = parse_report("racecheck", fixture("racecheck_shared_hazard.txt"))
    assert count == 1   # RACECHECK SUMMARY: 1 error (the warning is kept, not counted)
    err, warn = fs
    assert (err.kind, err.severity, err.access, err.hazards) == ("race", "error", "write", 248)
    assert err.kernel == "_row_sum_racy" and err.location.endswith("candidate.py:17")
    assert err.other_access.startswith("Read access at _row_sum_racy") and err.memory == "__shared__"
    assert warn.severity == "warning" and warn.hazards == 4


def test_synccheck_barrier_error():
    count, fs = parse_report("synccheck", fixture("synccheck_barrier.txt"))
    assert count == 2 and [f.kind for f in fs] == ["barrier", "barrier"]
    assert fs[0].headline.startswith("Barrier error detected. Divergent thread(s) in block")
    assert fs[0].kernel == "_divergent_barrier" and fs[0].thread == (32, 0, 0) and fs[0].block == (0, 0, 0)


def test_initcheck_uninitialized_read():
    count, fs = parse_report("initcheck", fixture("initcheck_uninitialized.txt"))
    assert count == 1
    (f,) = fs
    assert (f.kind, f.memory, f.size, f.kernel, f.address) == ("uninitialized_read", "__global__", 4,
                                                               "_reads_scratch", "0x7f9b2c200000")


def test_clean_run_and_the_legacy_layout():
    assert parse_report("memcheck", fixture("clean.txt")) == (0, [])
    count, (f,) = parse_report("memcheck", fixture("legacy_cuda_memcheck.txt"))
    assert count == 1 and f.size == 8 and f.location == "/home/user/src/helper.cuh:75"
    assert f.kernel == "void vector_projection<double>(double*, int)" and f.thread == (9, 0, 0)


def test_application_output_and_truncation_are_not_findings():
    text = "========= COMPUTE-SANITIZER\nInvalid __global__ read of size 4 bytes\n" + LAUNCHED_MARK + "\n"
    assert parse_report("memcheck", text) == (None, [])   # not behind the prefix: the application's own output
    hw = "========= Warp Illegal Address\n=========     at k+0x10 in f.py:3\n========= ERROR SUMMARY: 1 error\n"
    count, (f,) = parse_report("memcheck", hw)
    assert f.kind == "hardware_exception" and f.kernel == "k"


# -- judging a run, the report, the verdict --------------------------------------------------------------------

def _judge(name, code, tool="memcheck"):
    return judge(tool, ["cs"], code, fixture(name), 1.0, 60)


def test_judge_and_verdict():
    bad = _judge("memcheck_oob_read.txt", ERROR_EXIT)
    assert bad.status == "findings" and bad.error_count == 2
    ok = _judge("clean.txt", 0, "racecheck")
    assert ok.status == "clean"
    report = SanitizerReport(candidate="c-1", case="rmsnorm[5x256]:fp16 seed 0", runs=[bad, ok])
    v = report.verdict()
    assert report.status == "findings" and not report.clean
    assert v.status is Status.REJECTED and v.case == report.case
    assert v.message.startswith("compute-sanitizer memcheck: Invalid __global__ read of size 2 bytes in "
                                "_rmsnorm_oob at ") and "thread (0, 0, 0) block (4, 0, 0)" in v.message
    assert "Address 0x7f3a5e000a00 is out of bounds" in v.log and "== racecheck: clean" in v.log
    clean = SanitizerReport(candidate="c-1", case="x", runs=[ok])
    assert clean.clean and clean.verdict() is None


def test_warnings_alone_do_not_reject_and_failures_are_not_passes():
    warn_only = ("========= Warning: Race reported between Write access at k+0x1 in f.py:2\n"
                 "=========     and Write access at k+0x1 in f.py:2 [2 hazards]\n=========\n" + LAUNCHED_MARK +
                 "\n========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)\n========= ERROR SUMMARY: 0 errors\n")
    r = judge("racecheck", [], 0, warn_only, 1.0, 60)
    assert r.status == "clean" and r.findings[0].severity == "warning"
    timeout = judge("memcheck", [], None, "========= COMPUTE-SANITIZER\n", 60.0, 60)
    crashed = judge("memcheck", [], FAILED_EXIT, "Traceback ...\n========= ERROR SUMMARY: 0 errors\n", 1.0, 60)
    silent = judge("memcheck", [], 0, "========= ERROR SUMMARY: 0 errors\n", 1.0, 60)   # never launched
    assert (timeout.status, crashed.status, silent.status) == ("error", "error", "error")
    assert "deadline" in timeout.reason and "failed under the tool" in crashed.reason
    for run in (timeout, crashed, silent):
        rep = SanitizerReport(candidate="c", case="x", runs=[run])
        assert rep.status == "error" and not rep.clean and rep.verdict() is None


def test_not_run_without_the_tool_or_cuda(rmsnorm, monkeypatch, tmp_path):
    src = rmsnorm.template_sources["rowwise"]
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("KERNELLOOP_COMPUTE_SANITIZER", raising=False)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    if not Path("/usr/local/cuda/bin/compute-sanitizer").exists():
        r = sanitize(src, HONEST_CONFIG, rmsnorm.spec, W)
        assert r.status == "not_run" and not r.clean and r.verdict() is None
        assert all("no compute-sanitizer" in run.reason for run in r.runs) and len(r.runs) == 4
    r = sanitize(src, HONEST_CONFIG, rmsnorm.spec, W, tools=("memcheck",), executable="/bin/true",
                 cuda_available=False)
    assert r.status == "not_run" and r.runs[0].reason == "no CUDA device in this process" and r.verdict() is None


def _fake_sanitizer(tmp_path: Path, report: str, code: int, sleep: float = 0) -> str:
    """A stand-in executable that prints a recorded report and exits as the tool would (plumbing only)."""
    rec = tmp_path / "report.txt"
    rec.write_text(report)
    exe = tmp_path / "compute-sanitizer"
    exe.write_text(f"#!/bin/sh\nsleep {sleep}\ncat {rec}\nexit {code}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def test_sanitize_end_to_end_with_a_recorded_tool(rmsnorm, tmp_path):
    exe = _fake_sanitizer(tmp_path, fixture("memcheck_oob_read.txt"), ERROR_EXIT)
    r = sanitize("def launch(*a, **k):\n    pass\n", {}, rmsnorm.spec, W, tools=("memcheck",), executable=exe,
                 warm=False, cuda_available=True, workdir=tmp_path / "job")
    assert r.runs[0].command[0] == exe and r.runs[0].exit_code == ERROR_EXIT
    assert r.verdict().status is Status.REJECTED and (tmp_path / "job" / "job.json").is_file()


def test_deadline_kills_the_process_group(tmp_path):
    exe = _fake_sanitizer(tmp_path, "", 0, sleep=30)
    code, out, secs = run_command([exe], dict(os.environ), deadline_s=1.0)
    assert code is None and secs < 10


def test_runner_launches_once_in_the_interpreter(rmsnorm, tmp_path):
    """The runner's import, seeded inputs, poisoned outputs and one launch, on the CPU (Triton's interpreter)."""
    job = write_job(tmp_path, rmsnorm.template_sources["rowwise"], HONEST_CONFIG, rmsnorm.spec, W, device="cpu")
    env = {**runner_env(), "TRITON_INTERPRET": "1"}
    code, out, _ = run_command(runner_command(job), env, deadline_s=300)
    assert code == 0 and LAUNCHED_MARK in out, out
    job = write_job(tmp_path / "bad", "def launch(*a, **k):\n    raise RuntimeError('boom')\n", {}, rmsnorm.spec, W,
                    device="cpu")
    code, out, _ = run_command(runner_command(job), env, deadline_s=300)
    assert code == FAILED_EXIT and "boom" in out and LAUNCHED_MARK not in out


# -- on a GPU with compute-sanitizer ---------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.xfail(strict=True, reason="on an H200 (torch 2.11, Triton 3.6, 2026-12-03) memcheck reported 0 errors for "
                   "the fixture's unmasked read past the rows' end: not yet explained")
def test_memcheck_on_gpu(rmsnorm):
    from kernelloop.core.verify.sanitizer import find_sanitizer
    if find_sanitizer() is None:
        pytest.skip("compute-sanitizer not installed")
    honest = sanitize(rmsnorm.template_sources["rowwise"], HONEST_CONFIG, rmsnorm.spec, W, tools=("memcheck",),
                      deadline_s=300)
    assert honest.clean, honest.text()
    assert honest.runs[0].error_count == 0
    oob = sanitize((FIX / "oob_read_rmsnorm.py").read_text(), {"BLOCK_N": 512}, rmsnorm.spec, W,
                   tools=("memcheck",), deadline_s=300)
    v = oob.verdict()
    assert v is not None and v.status is Status.REJECTED, oob.text()
    f = oob.first_finding()
    assert f.kind == "out_of_bounds" and f.access == "read" and "_rmsnorm_oob" in f.kernel
