"""`kernelloop reproduce RUN [TRIAL]` re-measures an archived winner cold in a fresh worker process and says whether it
reproduces within the stated interval; it refuses a missing run or trial, a trial that did not pass, and another
device. `kernelloop show` prints the confirmation across processes (table and --json)."""

import json
import sqlite3

import pytest
from typer.testing import CliRunner

import kernelloop.tune.select.reproduce as reproduce_mod
from kernelloop.deliver.agent.submit import SubmissionProposer
from kernelloop.core.archive import Archive
from kernelloop.core.bench.stats import summarize
from kernelloop.base.builtin import ops_dir
from kernelloop.cli.app import app
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.tune.loop import Budget, Controller, RunOptions
from kernelloop.base.records import Candidate, Measurement, Workload
from kernelloop.core.spec import load_op

W = Workload(op="layernorm", axes={"M": 4, "N": 64}, dtype="fp16")
RAISES = "def launch(x, weight, bias, y, *, eps, **config):\n    raise RuntimeError('planned failure')\n"
runner = CliRunner()


@pytest.fixture(scope="module")
def confirmed(tmp_path_factory):
    """A run whose winner was confirmed in two fresh processes, plus a second passed trial that was not."""
    bundle = load_op(ops_dir() / "layernorm")
    out = tmp_path_factory.mktemp("reproduce") / "run"
    opts = RunOptions(device="interpret", budget=Budget(evals=2), strategy="random", checks=1,
                      timeouts=Timeouts(check=120.0, bench=120.0))
    Controller(bundle, [W], opts, out).run()
    return out


@pytest.fixture(scope="module")
def failed(tmp_path_factory):
    bundle = load_op(ops_dir() / "layernorm")
    out = tmp_path_factory.mktemp("reproduce-failed") / "run"
    opts = RunOptions(device="interpret", budget=Budget(evals=None), checks=1, confirm=False,
                      timeouts=Timeouts(check=60.0, bench=60.0))
    Controller(bundle, [W], opts, out, proposer=SubmissionProposer(
        [Candidate(op="layernorm", template="custom", source=RAISES)])).run()
    return out


def _run_state(run_dir):
    with Archive(run_dir / "archive.sqlite", readonly=True) as a:
        rid = a.runs()[0]["id"]
        return a.trials(rid), a.finals(rid), a.confirmations(rid)


def test_a_confirmed_winner_is_re_measured_in_a_fresh_process(confirmed):
    trials, finals, confs = _run_state(confirmed)
    res = runner.invoke(app, ["reproduce", str(confirmed), "--json"])
    assert res.exit_code in (0, 1), res.output
    (rec,) = json.loads(res.stdout)
    conf = confs[W.id]
    winner = next(t for t in trials if t.candidate_id == finals[W.id][0])
    assert rec["trial"] == winner.id and rec["source"] == "confirmation" and rec["device"] == "interpret"
    assert rec["recorded_us"] == conf.kernel_us and tuple(rec["interval_us"]) == tuple(conf.interval_us)
    lo, hi = rec["interval_us"]
    assert rec["measured_us"] > 0 and rec["reproduced"] == (lo <= rec["measured_us"] <= hi)
    assert res.exit_code == (0 if rec["reproduced"] else 1)
    table = runner.invoke(app, ["reproduce", str(confirmed)], env={"COLUMNS": "300"})
    assert ("NOT REPRODUCED" in table.stdout) or ("REPRODUCED" in table.stdout)
    assert "measured" in table.stdout and "stated interval" in table.stdout and winner.id in table.stdout


def _fake(median: float):
    def measure(bundle, device, target, work):
        samples = [median] * 5
        k = summarize(samples, bootstrap=100, confidence=0.95, seed=0)
        return Measurement(subject=target.candidate.id, workload_id=target.workload.id,
                           policy=target.measurement.policy, kernel_samples_us=samples, call_samples_us=samples,
                           kernel=k, call=k, bytes_moved=1.0, gbps=1.0)
    return measure


def test_the_verdict_is_the_interval_and_a_passed_trial_reproduces_against_its_own(confirmed, monkeypatch):
    trials, finals, confs = _run_state(confirmed)
    lo, hi = confs[W.id].interval_us
    monkeypatch.setattr(reproduce_mod, "_measure", _fake((lo + hi) / 2))
    res = runner.invoke(app, ["reproduce", str(confirmed)], env={"COLUMNS": "300"})
    assert res.exit_code == 0 and "REPRODUCED" in res.stdout and "NOT REPRODUCED" not in res.stdout
    assert "[green]" not in res.stdout   # the verdict's colour is markup, not text
    monkeypatch.setattr(reproduce_mod, "_measure", _fake(hi * 1.5))
    res = runner.invoke(app, ["reproduce", str(confirmed)], env={"COLUMNS": "300"})
    assert res.exit_code == 1 and "NOT REPRODUCED" in res.stdout and f"{hi * 1.5:.2f}" in res.stdout
    passed = [t for t in trials if t.measurement is not None]
    other = next((t for t in passed if t.candidate_id != finals[W.id][0]), None)
    if other is not None:   # a trial not confirmed: its own bootstrap interval is the one stated
        m = other.measurement.kernel
        monkeypatch.setattr(reproduce_mod, "_measure", _fake(m.median_us))
        res = runner.invoke(app, ["reproduce", str(confirmed), other.id[:12], "--json"])
        (rec,) = json.loads(res.stdout)
        assert rec["source"] == "trial" and tuple(rec["interval_us"]) == (m.ci_low_us, m.ci_high_us)
        assert rec["reproduced"] and res.exit_code == 0


def test_refusals_name_what_is_wrong(confirmed, failed, tmp_path):
    res = runner.invoke(app, ["reproduce", str(confirmed), "t-nosuchtrial"])
    assert res.exit_code == 2 and "has no trial 't-nosuchtrial'" in res.output
    res = runner.invoke(app, ["reproduce", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "no archive" in res.output
    (t,), _, _ = _run_state(failed)
    res = runner.invoke(app, ["reproduce", str(failed), t.id])
    assert res.exit_code == 2 and "did not pass (RUNTIME_ERROR)" in res.output
    res = runner.invoke(app, ["reproduce", str(failed)])
    assert res.exit_code == 2 and "no confirmed winner" in res.output
    # the same run recorded on another device: refused before anything runs
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "archive.sqlite").write_bytes((confirmed / "archive.sqlite").read_bytes())
    con = sqlite3.connect(other / "archive.sqlite")
    (env,) = con.execute("SELECT environment_json FROM runs").fetchone()
    env = {**json.loads(env), "device": "cuda", "gpu": "NVIDIA Imaginary 9000"}
    con.execute("UPDATE runs SET environment_json = ?", (json.dumps(env),))
    con.commit()
    con.close()
    res = runner.invoke(app, ["reproduce", str(other)], env={"COLUMNS": "300"})
    assert res.exit_code == 2 and "was measured on" in res.output and "NVIDIA Imaginary 9000" in res.output
    # a run of an op that is neither built in nor under ./ops: the refusal points at --ops
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "archive.sqlite").write_bytes((confirmed / "archive.sqlite").read_bytes())
    con = sqlite3.connect(mine / "archive.sqlite")
    con.execute("UPDATE runs SET op = 'my_layernorm'")
    con.commit()
    con.close()
    res = runner.invoke(app, ["reproduce", str(mine)], env={"COLUMNS": "300"})
    assert res.exit_code == 2 and "my_layernorm: file not found" in res.output and "with --ops" in res.output


def test_show_prints_the_confirmation_across_processes(confirmed):
    res = runner.invoke(app, ["show", str(confirmed), "--json"])
    assert res.exit_code == 0, res.output
    (w,) = json.loads(res.stdout)["workloads"]
    x = w["confirmed"]["across_processes"]
    assert len(x["processes"]) == 2 and x["interval_us"][0] <= x["kernel_us"] <= x["interval_us"][1]
    assert set(x["speedups"]) == {"eager", "copy"}
    table = runner.invoke(app, ["show", str(confirmed)], env={"COLUMNS": "300"})
    assert "confirmed across fresh processes" in table.stdout and "stated" in table.stdout


def test_a_run_recorded_on_the_h200_is_refused_without_that_gpu():
    import torch
    from pathlib import Path
    archive = Path(__file__).resolve().parents[1] / "fixtures" / "archives" / "h200-attention-exhaustive.sqlite.xz"
    if torch.cuda.is_available() and "H200" in torch.cuda.get_device_name(0):
        pytest.skip("an H200 is present: the run would be re-measured")
    res = runner.invoke(app, ["reproduce", str(archive)], env={"COLUMNS": "300"})
    assert res.exit_code == 2 and "was measured on" in res.output and "H200" in res.output, res.output
