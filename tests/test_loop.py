"""The controller end to end: a run whose space contains crashing, hanging and wrong configurations
finishes, archives a verdict for every one, and still selects and confirms the honest winner."""

import shutil

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.core.archive import Archive
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.tune.loop import Budget, Controller, RunOptions
from kernelloop.base.records import Status, Workload
from kernelloop.deliver.report.summary import run_summary
from kernelloop.deliver.report.terminal import render
from kernelloop.tune.select.confirm import CONFIRM_PROCESSES
from kernelloop.core.spec import load_op

OPS = ops_dir()


TEMPLATE = '''
"""A template whose MODE parameter selects a misbehaviour (test fixture)."""
import os
import signal
import torch
import triton
import triton.language as tl


@triton.jit
def _ln(X, W, B, Y, N, eps, OFF, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    x = tl.load(X + row * N + cols, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(m, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
    w = tl.load(W + cols, mask=m, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(Y + row * N + cols, (xc * rstd * w + b + OFF).to(Y.dtype.element_ty), mask=m)


def launch(x, weight, bias, y, *, eps, MODE, num_warps):
    if MODE == "raise":
        raise RuntimeError("planned failure")
    if MODE == "hang":
        while True:
            pass
    if MODE == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    M, N = x.shape
    # "wrong" is off by one everywhere, so the first case catches it whatever distribution the candidate drew
    _ln[(M,)](x, weight, bias, y, N, eps, 1.0 if MODE == "wrong" else 0.0, BLOCK=triton.next_power_of_2(N),
              num_warps=num_warps)
'''


@pytest.fixture
def faulty_op(tmp_path):
    op = tmp_path / "layernorm"
    shutil.copytree(OPS / "layernorm", op)
    (op / "kernel.py").write_text(TEMPLATE)
    spec = (op / "spec.toml").read_text()
    head = spec[:spec.index("[[templates]]")]
    (op / "spec.toml").write_text(head + '''
[[templates]]
name = "faulty"
file = "kernel.py"
[[templates.params]]
name = "MODE"
values = ["raise", "hang", "segv", "wrong", "ok"]
[[templates.params]]
name = "num_warps"
values = [4]
''')
    return load_op(op)


def test_run_survives_every_fault_and_confirms_the_honest_winner(faulty_op, tmp_path):
    w = Workload(op="layernorm", axes={"M": 6, "N": 300}, dtype="fp16")
    opts = RunOptions(device="interpret", budget=Budget(evals=None), strategy="exhaustive", checks=1,
                      timeouts=Timeouts(check=8.0, bench=60.0), static_rules=False)  # dynamic faults on purpose
    run_dir = tmp_path / "run"
    Controller(faulty_op, [w], opts, run_dir).run()
    with Archive(run_dir / "archive.sqlite") as a:
        run = a.runs()[0]
        assert run["status"] == "complete"
        by_mode = {a.get_candidate(t.candidate_id).config["MODE"]: t for t in a.trials(run["id"])}
        assert by_mode["raise"].verdict.status is Status.RUNTIME_ERROR
        assert "planned failure" in by_mode["raise"].verdict.message
        assert by_mode["hang"].verdict.status is Status.TIMEOUT
        assert by_mode["segv"].verdict.status is Status.RUNTIME_ERROR and "SIGSEGV" in by_mode["segv"].verdict.message
        assert by_mode["wrong"].verdict.status is Status.WRONG_VALUES
        assert by_mode["ok"].verdict.status is Status.PASSED
        assert [t.measurement is not None for t in by_mode.values()].count(True) == 1
        finals = a.finals(run["id"])
        assert finals[w.id][0] == by_mode["ok"].candidate_id
        assert {r.baseline for r in finals[w.id][1].ratios} == {"eager", "copy"}
        assert all(t.manifest_hash == run["manifest_hash"] for t in by_mode.values())
        # every failure says where: the case it failed on (with its check index) and, for crashes, stage and signal
        for mode in ("raise", "hang", "segv", "wrong"):
            assert by_mode[mode].verdict.case.startswith(w.label + " check 0"), by_mode[mode].verdict
        assert "during build (first call, case 0)" in by_mode["segv"].verdict.message
        summary = run_summary(a)
    groups = {g.reason: g.model_dump(mode="json") for g in summary.failures}
    assert set(groups) == {"raised RuntimeError", "timeout", "killed by SIGSEGV", "values outside tolerance"}
    assert all(g["count"] == 1 for g in groups.values())
    (segv,) = groups["killed by SIGSEGV"]["trials"]
    assert segv["signal"] == "SIGSEGV" and segv["stage"] == "verify" and segv["at"] == "build (first call, case 0)"
    assert segv["case"]["index"] == 0 and segv["case"]["kind"] == "visible" and segv["case"]["dtype"] == "fp16"
    assert groups["timeout"]["trials"][0]["at"].startswith("build (first call")
    wrong = groups["values outside tolerance"]["trials"][0]
    assert wrong["case"]["axes"] == w.axes and wrong["case"]["seed"] > 0 and wrong["stage"] == "verify"
    from rich.console import Console
    console = Console(record=True, width=200)
    render(summary, console)
    text = console.export_text()
    assert "failures by reason" in text and "killed by SIGSEGV" in text and "planned failure" in text


def test_disk_full_on_archive_write_stops_cleanly_and_keeps_the_archive_consistent(layernorm, tmp_path, monkeypatch):
    from kernelloop.core.archive import ArchiveError

    real = Archive.record_trial
    calls = {"n": 0}

    def flaky(self, trial, candidate, workload):
        calls["n"] += 1
        if calls["n"] == 3:
            raise ArchiveError("record_trial failed: database or disk is full")
        return real(self, trial, candidate, workload)

    monkeypatch.setattr(Archive, "record_trial", flaky)
    w = Workload(op="layernorm", axes={"M": 4, "N": 300}, dtype="fp32")
    run_dir = tmp_path / "run"
    opts = RunOptions(device="interpret", budget=Budget(evals=5), strategy="exhaustive", checks=1, confirm=False)
    with pytest.raises(ArchiveError, match="disk is full"):
        Controller(layernorm, [w], opts, run_dir).run()
    monkeypatch.setattr(Archive, "record_trial", real)
    with Archive(run_dir / "archive.sqlite") as a:
        assert a.integrity_check() == "ok"
        run = a.runs()[0]
        assert len(a.trials(run["id"])) == 2 and run["status"] != "complete"
    # The same run resumes and finishes once the disk has room again.
    Controller(layernorm, [w], opts, run_dir).run(resume=True)
    with Archive(run_dir / "archive.sqlite") as a:
        run = a.runs()[0]
        assert len(a.trials(run["id"])) == 5 and run["status"] == "complete"


def test_confirmation_baselines_come_from_the_op_folder():
    from kernelloop.tune.loop import op_baseline_names
    from kernelloop.core.spec import load_op
    assert op_baseline_names(load_op(OPS / "layernorm")) == ["liger"]
    assert "cublas" in op_baseline_names(load_op(OPS / "gemm"))
    assert "sdpa-cudnn" in op_baseline_names(load_op(OPS / "attention"))


LAZY_BASELINES = '''
"""A library baseline whose runtime starts a pool thread lazily, on its fourth call (the harness makes two untimed ones first) (test fixture)."""
import threading
import time

import torch


def _lazy():
    calls = {"n": 0}

    def fn(x, weight, bias, eps):
        calls["n"] += 1
        if calls["n"] == 4:
            threading.Thread(target=time.sleep, args=(120,), name="lazy-pool", daemon=True).start()
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)

    return fn


BASELINES = {"lazy": _lazy}
'''


@pytest.fixture
def lazy_op(faulty_op, tmp_path):
    folder = faulty_op.folder
    (folder / "baselines.py").write_text(LAZY_BASELINES)
    spec = (folder / "spec.toml").read_text().replace('values = ["raise", "hang", "segv", "wrong", "ok"]',
                                                       'values = ["ok"]')
    (folder / "spec.toml").write_text(spec)
    return load_op(folder)


def _events(run_dir, kind):
    import json
    import sqlite3
    con = sqlite3.connect(run_dir / "archive.sqlite")
    try:
        return [json.loads(j) for (j,) in con.execute("SELECT json FROM events WHERE kind = ?", (kind,))]
    finally:
        con.close()


def _run_with_lazy_baseline(op, tmp_path):
    """Exhaustive search of the one honest configuration, confirmed beside eager, the lazy library baseline, copy."""
    w = Workload(op="layernorm", axes={"M": 4, "N": 300}, dtype="fp32")
    opts = RunOptions(device="interpret", budget=Budget(evals=None), strategy="exhaustive", checks=1,
                      baselines=["eager", "lazy", "copy"], static_rules=False)
    Controller(op, [w], opts, tmp_path / "run").run()
    return w, tmp_path / "run"


def test_a_library_baselines_late_thread_is_attributed_by_a_census_of_the_winner_alone(lazy_op, tmp_path):
    w, run_dir = _run_with_lazy_baseline(lazy_op, tmp_path)
    census = _events(run_dir, "confirm-thread-census")
    assert len(census) == CONFIRM_PROCESSES, census   # once in each fresh process of the confirmation
    for c in census:
        assert "thread-left-behind" in c["confirm_verdict"] and "'lazy-pool'" in c["confirm_verdict"]
        assert c["alone"] == "PASSED" and c["attributed_to"] == "baselines"
        assert "lazy-pool" in c["threads"]
    with Archive(run_dir / "archive.sqlite") as a:
        finals = a.finals(a.runs()[0]["id"])
        assert {r.baseline for r in finals[w.id][1].ratios} == {"eager", "lazy", "copy"}
    assert _events(run_dir, "confirm-failed") == []


def test_the_confirmation_fails_when_the_winner_alone_still_leaves_a_thread(lazy_op, tmp_path, monkeypatch):
    from kernelloop.core.execute.evaluate import Evaluator
    from kernelloop.base.records import Verdict
    real_check, real_bench = Evaluator.check_timed, Evaluator.bench
    left = Verdict(status=Status.REJECTED, message="thread-left-behind: 1 thread(s) still running after the timed "
                   "calls ('spy'); work outside the call escapes the timer", log="[]")
    benches = []

    def bench(self, candidate, workload, subjects, policy, job_dir=None, settle_threads=False):
        benches.append(str(job_dir))
        return real_bench(self, candidate, workload, subjects, policy, job_dir, settle_threads)

    def check_timed(self, workload, reply, refresh):
        # the confirmation (with the library baseline) and the census after it both see a thread
        if "lazy" in reply.record.samples or benches[-1].endswith("census"):
            return left
        return real_check(self, workload, reply, refresh)

    monkeypatch.setattr(Evaluator, "check_timed", check_timed)
    monkeypatch.setattr(Evaluator, "bench", bench)
    w, run_dir = _run_with_lazy_baseline(lazy_op, tmp_path)
    census = _events(run_dir, "confirm-thread-census")   # the first process fails: no second one
    assert len(census) == 1 and census[0]["attributed_to"] == "candidate"
    assert census[0]["alone"].startswith("REJECTED: thread-left-behind")
    failed = _events(run_dir, "confirm-failed")
    assert len(failed) == 1 and "thread-left-behind" in failed[0]["error"]
    with Archive(run_dir / "archive.sqlite") as a:
        assert a.finals(a.runs()[0]["id"]) == {}
