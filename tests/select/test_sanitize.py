"""compute-sanitizer before a winner is confirmed (tune/select/sanitize.py, loop.Controller._confirm): the small shape,
a finding rejects the winner and the next fastest is confirmed, not_run is recorded and confirmation goes on.

The tool is a stand-in script ($KERNELLOOP_COMPUTE_SANITIZER) that prints a recorded report
(tests/fixtures/sanitizer/) and exits as compute-sanitizer does; `sanitize` itself runs, with `cuda_available=True`
and `warm=False` (the candidate cannot launch on a CUDA device here), so command lines, parsing and the verdict are
the real ones."""

import functools
import stat
from pathlib import Path

from rich.console import Console

from kernelloop.deliver import api
from kernelloop.core.archive import Archive
from kernelloop.base.builtin import ops_dir
from kernelloop.base.records import Candidate, Workload
from kernelloop.deliver.report.terminal import render
from kernelloop.tune.select.sanitize import (INTERPRETER_REASON, SANITIZE_EVENT, default_sanitizer, rejected,
                                        sanitize_candidate)
from kernelloop.core.spec import load_op
from kernelloop.core.spec.loader import in_domain
from kernelloop.core.verify.sanitizer import ERROR_EXIT, sanitize, small_workload

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sanitizer"
ON_A_DEVICE = functools.partial(sanitize, cuda_available=True, warm=False)


def fake_sanitizer(folder: Path, first: str, code: int, then: str = "clean.txt") -> str:
    """A stand-in compute-sanitizer: its first call prints the recorded report `first` and exits `code`; every
    later call prints `then` and exits 0."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "compute-sanitizer"
    seen = folder / "called"
    exe.write_text(f"#!/bin/sh\nif [ -e {seen} ]; then cat {FIX / then}; exit 0; fi\n"
                   f"touch {seen}\ncat {FIX / first}\nexit {code}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def test_the_small_shape_scales_the_workload_down_inside_the_domain():
    spec = load_op(ops_dir() / "rmsnorm").spec
    w = Workload(op="rmsnorm", axes={"M": 4096, "N": 4096}, dtype="fp16")
    small = small_workload(spec, w)
    assert small.axes["M"] == 5 and small.axes["N"] <= 4096
    assert 2 * small.axes["M"] * small.axes["N"] + small.axes["N"] <= 1 << 16
    # a configuration that needs N > 2048 (BLOCK_N <= next_pow2(N) with BLOCK_N = 4096) keeps N
    keep = small_workload(spec, w, lambda axes: in_domain(spec, axes, w.dtype) and axes["N"] > 2048)
    assert keep.axes == {"M": 5, "N": 4096}
    # divisibility: a value is taken only where accept holds, the axis keeps its value otherwise
    odd = small_workload(spec, w, lambda axes: axes["M"] % 64 == 0 and axes["N"] % 256 == 0)
    assert odd.axes["M"] % 64 == 0 and odd.axes["N"] % 256 == 0 and odd.axes["M"] < 4096
    assert small_workload(spec, w, fixed=("N",)).axes["N"] == 4096


def test_interpreter_and_no_tool_are_not_run_with_the_reason(monkeypatch, tmp_path):
    bundle = load_op(ops_dir() / "rmsnorm")
    cand = Candidate(op="rmsnorm", template="rowwise", source=bundle.template_sources["rowwise"],
                     config={"BLOCK_N": 256, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0})
    w = Workload(op="rmsnorm", axes={"M": 64, "N": 256}, dtype="fp16")
    out = sanitize_candidate(default_sanitizer("interpret"), bundle, cand, w)
    assert out.status == "not_run" and out.reason == INTERPRETER_REASON and out.candidate_id == cand.id
    assert out.workload == {"M": 5, "N": 256} and len(out.tools) == 4 and not out.verdict
    monkeypatch.setenv("KERNELLOOP_COMPUTE_SANITIZER", str(tmp_path / "absent"))
    out = sanitize_candidate(ON_A_DEVICE, bundle, cand, w)
    assert out.status == "not_run" and out.reason.startswith("no compute-sanitizer")


def test_a_finding_rejects_the_winner_and_the_next_fastest_is_confirmed(tmp_path, monkeypatch, layernorm_run):
    exe = fake_sanitizer(tmp_path / "tool", "memcheck_oob_read.txt", ERROR_EXIT)
    monkeypatch.setenv("KERNELLOOP_COMPUTE_SANITIZER", exe)
    run_dir, w = layernorm_run(tmp_path / "run", 2, ON_A_DEVICE)
    with Archive(run_dir / "archive.sqlite", readonly=True) as a:
        rid = a.runs()[0]["id"]
        fastest, second = sorted(a.trials(rid, status="PASSED"), key=lambda t: t.measurement.kernel.median_us)
        events = [e["payload"] for e in a.events(rid, SANITIZE_EVENT)]
        cid, _ = a.finals(rid)[w.id]
        rec = a.confirmations(rid)[w.id]
        assert rejected(a, rid) == {(fastest.candidate_id, w.id)}
        summary = api.summarize(a)
    bad, good = events
    assert (bad["candidate_id"], bad["status"], bad["trial"]) == (fastest.candidate_id, "findings", fastest.id)
    assert bad["verdict"].startswith("compute-sanitizer memcheck: Invalid __global__ read of size 2 bytes")
    assert "Address 0x7f3a5e000a00 is out of bounds" in bad["report"]
    assert bad["workload"]["N"] == 64 and bad["workload"]["M"] in (3, 4)   # 3 where the configuration's ROWS allow
    assert [t["status"] for t in bad["tools"]] == ["findings", "clean", "clean", "clean"]
    assert good["candidate_id"] == second.candidate_id and good["status"] == "clean"
    # the winner with findings is not confirmed: the next fastest is, and its record says it was sanitized
    assert cid == second.candidate_id and rec.candidate_id == cid
    assert rec.sanitizer.status == "clean" and rec.sanitizer_rejected == [fastest.candidate_id]
    ws = summary.workload()
    assert ws.best.candidate == cid and ws.confirmed.candidate == cid
    assert [c.status for c in ws.sanitizer] == ["findings", "clean"]
    console = Console(record=True, width=240)
    render(summary, console)
    text = console.export_text()
    assert "compute-sanitizer before confirmation" in text and "REJECTED" in text
    assert "compute-sanitizer memcheck: Invalid __global__ read" in text


def test_without_the_tool_the_confirmation_records_not_run_and_goes_on(confirmed_run):
    run_dir, w = confirmed_run   # $KERNELLOOP_COMPUTE_SANITIZER named a missing tool (conftest.py)
    with Archive(run_dir / "archive.sqlite", readonly=True) as a:
        rid = a.runs()[0]["id"]
        rec = a.confirmations(rid)[w.id]
        (event,) = [e["payload"] for e in a.events(rid, SANITIZE_EVENT)]
        assert a.finals(rid)[w.id][0] == rec.candidate_id and a.runs()[0]["options"]["sanitize"] is True
    assert rec.sanitizer.status == "not_run" and rec.sanitizer.reason.startswith("no compute-sanitizer")
    assert event["status"] == "not_run" and not rec.sanitizer_rejected


def test_no_sanitize_reaches_the_controller(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from kernelloop.cli.app import app
    seen = {}

    class Stop(RuntimeError):
        """Stops the command once the controller is reached."""

    def capture(bundle, wls, opts, run_dir, **kw):   # the one way into the loop (tune/loop/entry.py)
        seen["opts"] = opts
        raise Stop("captured")

    import kernelloop.tune.loop as entry
    monkeypatch.setattr(entry, "run", capture)
    for flag, want in (("--no-sanitize", False), ("--sanitize", True)):
        r = CliRunner().invoke(app, ["optimize", "layernorm", "--device", "interpret", "--budget", "1",
                                     "--out", str(tmp_path / flag), flag])
        assert "captured" in r.output, r.output
        assert seen["opts"].sanitize is want and seen["opts"].as_dict()["sanitize"] is want


def test_a_tool_that_cannot_start_is_an_error_not_a_pass():
    bundle = load_op(ops_dir() / "rmsnorm")
    cand = Candidate(op="rmsnorm", template="rowwise", source=bundle.template_sources["rowwise"], config={})
    w = Workload(op="rmsnorm", axes={"M": 8, "N": 256}, dtype="fp16")

    def broken(*a, **k):
        raise OSError("exec format error")
    out = sanitize_candidate(broken, bundle, cand, w)
    assert out.status == "error" and "exec format error" in out.reason and not out.verdict
