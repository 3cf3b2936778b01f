"""The CLI end to end in interpreter mode: optimize, show, bad input, and resume after kill -9."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.cli.app import app
from kernelloop.cli import common

runner = CliRunner()


def small_workloads(tmp_path: Path, op: str, shapes=(("M = 3, N = 300", "fp32"),)) -> Path:
    """A workload file of `op` with a few small shapes (N off the block sizes), for the runs below whose assertions
    hold per workload: the op's four interpreter workloads would only add interpreter time."""
    path = tmp_path / f"{op}-small.toml"
    path.write_text(f'op = "{op}"\n' + "".join(f"[[workload]]\naxes = {{ {axes} }}\ndtype = \"{dt}\"\n"
                                                for axes, dt in shapes))
    return path


def test_optimize_then_show_json(tmp_path):
    """Two small workloads of two dtypes (one of a single row): what is checked holds for each workload."""
    out = tmp_path / "run"
    wl = small_workloads(tmp_path, "rmsnorm", (("M = 3, N = 300", "fp32"), ("M = 1, N = 512", "bf16")))
    r = runner.invoke(app, ["optimize", str(ops_dir() / "rmsnorm"), "--budget", "2", "--device", "interpret",
                            "--workloads", str(wl), "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert summary["status"] == "complete" and summary["interpreter"] is True
    assert summary["counts"] == {"PASSED": 2 * len(summary["workloads"])}
    for w in summary["workloads"]:
        conf = w["confirmed"]
        assert conf["samples"] >= 3 and conf["kernel_us"] > 0
        assert set(conf["baselines"]) == {"eager", "copy"}
        assert {"eager", "copy"} <= set(conf["speedups"])
        lo, hi = conf["speedups"]["eager"]["ci"]
        assert lo <= conf["speedups"]["eager"]["speedup"] <= hi
        assert w["front"], "the Pareto front is archived"
    assert any(p["kept"] < p["total"] for p in summary["pruning"])
    shown = runner.invoke(app, ["show", str(out), "--json"])
    assert shown.exit_code == 0
    assert json.loads(shown.stdout)["workloads"] == summary["workloads"]
    table = runner.invoke(app, ["show", str(out)])
    assert table.exit_code == 0 and "PASSED" in table.stdout and "interpreter" in table.stdout
    # the archive as results keep it, gzipped: the same summary
    import gzip
    import shutil
    packed = tmp_path / "kept.sqlite.gz"
    with open(out / "archive.sqlite", "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    shown_gz = runner.invoke(app, ["show", str(packed), "--json"])
    assert shown_gz.exit_code == 0, shown_gz.output
    assert json.loads(shown_gz.stdout)["workloads"] == summary["workloads"]


def test_optimize_baseline_chooses_what_the_winners_are_confirmed_against(tmp_path):
    out = tmp_path / "run"
    wl = tmp_path / "w.toml"
    wl.write_text('op = "rmsnorm"\n[[workload]]\naxes = { M = 3, N = 300 }\ndtype = "fp32"\n')
    args = ["optimize", str(ops_dir() / "rmsnorm"), "--budget", "1", "--device", "interpret", "--workloads", str(wl),
            "--out", str(out), "--json", "--baseline", "copy", "--no-confirm"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    (w,) = json.loads(r.stdout[r.stdout.index("{"):])["workloads"]
    assert not w.get("confirmed")
    # resumed without --baseline, the run confirms against the archived choice only
    again = runner.invoke(app, ["optimize", str(ops_dir() / "rmsnorm"), "--budget", "1", "--device", "interpret",
                                "--workloads", str(wl), "--out", str(out), "--json", "--resume"])
    assert again.exit_code == 0, again.output
    (w2,) = json.loads(again.stdout[again.stdout.index("{"):])["workloads"]
    assert set(w2["confirmed"]["baselines"]) == {"copy"} and set(w2["confirmed"]["speedups"]) == {"copy"}
    bad = runner.invoke(app, ["optimize", "rmsnorm", "--device", "interpret", "--baseline", "cudnn"])
    assert bad.exit_code == common.BAD_INPUT and "--baseline 'cudnn'" in bad.output and "liger" in bad.output


def test_bad_spec_exits_2_naming_the_field(tmp_path):
    import shutil
    op = tmp_path / "softmax"
    shutil.copytree(ops_dir() / "softmax", op)
    (op / "spec.toml").write_text((op / "spec.toml").read_text().replace('"fp32"]', '"fp64"]'))
    r = runner.invoke(app, ["optimize", str(op), "--device", "interpret", "--out", str(tmp_path / "r")])
    assert r.exit_code == common.BAD_INPUT
    assert "spec.toml" in r.output and "dtypes.2" in r.output


def test_bad_budget_and_missing_run(tmp_path):
    r = runner.invoke(app, ["optimize", "softmax", "--budget", "ten", "--device", "interpret"])
    assert r.exit_code == common.BAD_INPUT
    assert runner.invoke(app, ["show", str(tmp_path / "nothing")]).exit_code == common.BAD_INPUT
    assert "budget 'ten'" in r.output   # kernelloop.deliver.api.parse_budget's message (tests/test_api.py: the grammar)
    twice = runner.invoke(app, ["optimize", "softmax", "--budget", "4,gpu:30s", "--gpu-budget", "30",
                                "--device", "interpret"])
    assert twice.exit_code == common.BAD_INPUT and "given twice" in twice.output
    assert "(--gpu-budget and a 'gpu:' part of --budget)" in twice.output   # the flags' names, one setting inside
    few = runner.invoke(app, ["optimize", "softmax", "--screen", "2", "--device", "interpret"])
    assert few.exit_code != 0 and "--screen" in few.output     # a screen needs at least 3 samples


def test_existing_run_needs_resume(tmp_path):
    out = tmp_path / "run"
    args = ["optimize", "softmax", "--budget", "1", "--device", "interpret", "--out", str(out), "--no-confirm",
            "--workloads", str(small_workloads(tmp_path, "softmax"))]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, args)
    assert again.exit_code == common.STOPPED and "--resume" in again.output


def _trial_rows(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT candidate_id, workload_id, idx FROM trials").fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_kill_9_then_resume_loses_and_duplicates_nothing(tmp_path):
    out = tmp_path / "run"
    # four workloads as the op's interpreter suite has them (odd M, N off the block sizes, every dtype), at a few rows
    # each: 4 x 4 trials whose interpretation is short, the kill and the resume unchanged
    wl = tmp_path / "w.toml"
    wl.write_text('op = "layernorm"\n' + "".join(
        f'[[workload]]\naxes = {{ M = {m}, N = {n} }}\ndtype = "{dt}"\n'
        for m, n, dt in ((4, 96, "fp16"), (3, 200, "fp16"), (1, 64, "bf16"), (2, 300, "fp32"))))
    cmd = [sys.executable, "-m", "kernelloop.cli.app", "optimize", str(ops_dir() / "layernorm"), "--budget", "4",
           "--device", "interpret", "--out", str(out), "--strategy", "exhaustive", "--no-confirm",
           "--workloads", str(wl)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    db = out / "archive.sqlite"
    deadline = time.time() + 240
    while time.time() < deadline:
        if db.exists():
            try:
                if len(_trial_rows(db)) >= 3:
                    break
            except sqlite3.Error:
                pass
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the controller and its worker, mid-run
    proc.wait()
    before = _trial_rows(db)
    assert 3 <= len(before) < 16
    r = subprocess.run(cmd + ["--resume", "--json"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    after = _trial_rows(db)
    pairs = [(c, w) for c, w, _ in after]
    assert len(after) == 16 and len(set(pairs)) == 16
    assert sorted(i for *_, i in after) == list(range(16))
    assert set(before) <= set(after)  # finished trials were kept, not re-run
    summary = json.loads(r.stdout)
    assert summary["status"] == "complete"


def test_optimize_template_restricts_the_space_and_resume_keeps_it(tmp_path):
    """On one small workload: the restriction is per candidate and per pruning event, whatever the workloads."""
    out = tmp_path / "run"
    wl = small_workloads(tmp_path, "softmax")
    args = ["optimize", "softmax", "--budget", "2", "--device", "interpret", "--out", str(out), "--no-confirm",
            "--template", "persistent", "--json", "--workloads", str(wl)]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    con = sqlite3.connect(out / "archive.sqlite")
    try:
        templates = {json.loads(j)["template"] for (j,) in con.execute("SELECT json FROM candidates")}
        pruned = {json.loads(j)["template"] for (j,) in con.execute("SELECT json FROM events WHERE kind = 'prune'")}
        opts = json.loads(con.execute("SELECT options_json FROM runs").fetchone()[0])
    finally:
        con.close()
    assert templates == {"persistent"} and pruned == {"persistent"}
    assert opts["templates"] == ["persistent"]
    # resumed without --template: the archived restriction holds (a larger budget asks for more persistent trials)
    r = runner.invoke(app, ["optimize", "softmax", "--budget", "3", "--device", "interpret", "--out", str(out),
                            "--no-confirm", "--resume", "--workloads", str(wl)])
    assert r.exit_code == 0, r.output
    con = sqlite3.connect(out / "archive.sqlite")
    try:
        templates = [json.loads(j)["template"] for (j,) in con.execute("SELECT json FROM candidates")]
    finally:
        con.close()
    assert set(templates) == {"persistent"} and len(templates) > 2
    bad = runner.invoke(app, ["optimize", "softmax", "--device", "interpret", "--out", str(tmp_path / "b"),
                              "--template", "nonesuch"])
    assert bad.exit_code == common.BAD_INPUT and "nonesuch" in bad.output and "persistent" in bad.output


def test_optimize_fix_pins_parameters(tmp_path):
    """On one small workload: every candidate is checked for the pinned values, whatever the workloads."""
    out = tmp_path / "run"
    r = runner.invoke(app, ["optimize", "softmax", "--budget", "3", "--device", "interpret", "--out", str(out),
                            "--no-confirm", "--fix", "ROWS=1,num_warps=1", "--strategy", "exhaustive",
                            "--workloads", str(small_workloads(tmp_path, "softmax"))])
    assert r.exit_code == 0, r.output
    con = sqlite3.connect(out / "archive.sqlite")
    try:
        configs = [json.loads(j) for (j,) in con.execute("SELECT json FROM candidates")]
        opts = json.loads(con.execute("SELECT options_json FROM runs").fetchone()[0])
    finally:
        con.close()
    assert len(configs) >= 3 and opts["fixed"] == {"ROWS": "1", "num_warps": "1"}
    assert all(c["config"]["ROWS"] == 1 and c["config"]["num_warps"] == 1 for c in configs)
    assert {c["template"] for c in configs} <= {"rowwise", "chunked"}   # persistent has no ROWS
    for bad in ("ROWS=3", "NOPE=1", "ROWS"):
        r = runner.invoke(app, ["optimize", "softmax", "--device", "interpret", "--out", str(tmp_path / bad),
                                "--fix", bad])
        assert r.exit_code == common.BAD_INPUT and "--fix" in r.output, r.output
