"""The controller end to end: a run whose space contains crashing, hanging and wrong configurations
finishes, archives a verdict for every one, and still selects and confirms the honest winner."""

import shutil
from pathlib import Path

import pytest

from kernelloop.archive import Archive
from kernelloop.execute.evaluate import Timeouts
from kernelloop.loop import Controller, RunOptions
from kernelloop.records import Status, Workload
from kernelloop.spec import load_op

OPS = Path(__file__).resolve().parents[1] / "ops"


TEMPLATE = '''
"""A template whose MODE parameter selects a misbehaviour (test fixture)."""
import ctypes
import torch
import triton
import triton.language as tl


@triton.jit
def _ln(X, W, B, Y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    x = tl.load(X + row * N + cols, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(m, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
    w = tl.load(W + cols, mask=m, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(Y + row * N + cols, (xc * rstd * w + b).to(Y.dtype.element_ty), mask=m)


def launch(x, weight, bias, y, *, eps, MODE, num_warps):
    if MODE == "raise":
        raise RuntimeError("planned failure")
    if MODE == "hang":
        while True:
            pass
    if MODE == "segv":
        ctypes.string_at(0)
    M, N = x.shape
    _ln[(M,)](x, weight, bias, y, N, eps * (1e4 if MODE == "wrong" else 1.0), BLOCK=triton.next_power_of_2(N),
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
    opts = RunOptions(device="interpret", budget_evals=None, strategy="exhaustive", checks=1,
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


def test_disk_full_on_archive_write_stops_cleanly_and_keeps_the_archive_consistent(layernorm, tmp_path, monkeypatch):
    from kernelloop.archive import ArchiveError

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
    opts = RunOptions(device="interpret", budget_evals=5, strategy="exhaustive", checks=1, confirm=False)
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
    from kernelloop.loop import op_baseline_names
    from kernelloop.spec import load_op
    assert op_baseline_names(load_op(OPS / "layernorm")) == ["liger"]
    assert "cublas" in op_baseline_names(load_op(OPS / "gemm"))
    assert "sdpa-cudnn" in op_baseline_names(load_op(OPS / "attention"))
