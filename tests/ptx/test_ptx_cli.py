"""`kernelloop ptx`: recover (a .ptx, a cubin of SASS alone, a candidate built for sm_90 here), propose (a candidate,
a recorded run), prove and time (no GPU: exit 3; the CPU stand-in), show."""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":   # the stand-in executor interprets the template (before triton)
    os.environ["TRITON_INTERPRET"] = "1"

import base64  # noqa: E402
import json  # noqa: E402

from typer.testing import CliRunner  # noqa: E402

from kernelloop.builtin import ops_dir  # noqa: E402
from kernelloop.cli.app import app  # noqa: E402
from kernelloop.records import Candidate  # noqa: E402

runner = CliRunner()


def test_recover_a_ptx_and_a_cubin(kernels, tmp_path):
    k = kernels["rmsnorm/rowwise"]
    (tmp_path / "k.ptx").write_text(k.ptx)
    res = runner.invoke(app, ["ptx", "recover", str(tmp_path / "k.ptx"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["recoverable"] and data["round_trip_ok"] and "ptx" not in data["kernels"][0]["kernel"]
    (tmp_path / "k.cubin").write_bytes(base64.b64decode(k.cubin_b64))
    res = runner.invoke(app, ["ptx", "recover", str(tmp_path / "k.cubin")])
    assert res.exit_code == 1 and "not recoverable" in res.stdout and "embeds no PTX" in res.stdout


def test_recover_a_candidate(kernels, tmp_path):
    source = (ops_dir() / "rmsnorm" / "kernel.py").read_text()
    cand = Candidate(op="rmsnorm", template="rowwise", source=source,
                     config={"BLOCK_N": 1024, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0})
    path = tmp_path / "cand.json"
    path.write_text(cand.to_json())
    res = runner.invoke(app, ["ptx", "recover", str(path), "--workload", "M=64,N=1024"])
    assert res.exit_code == 0, res.output
    assert "_rmsnorm_fwd" in res.stdout and "round trip: ok" in res.stdout and "byte-identical" in res.stdout
    assert "threads 128" in res.stdout


def _candidate(tmp_path, surveyed):
    row = next(r for r in surveyed if r.op == "rmsnorm" and r.template == "rowwise")
    cand = Candidate(op="rmsnorm", template="rowwise", source=(ops_dir() / "rmsnorm" / "kernel.py").read_text(),
                     config=row.config)
    path = tmp_path / "cand.json"
    path.write_text(cand.to_json())
    return path, cand


def test_propose_writes_checked_edits(surveyed, tmp_path):
    path, cand = _candidate(tmp_path, surveyed)
    res = runner.invoke(app, ["ptx", "propose", str(path), "--workload", "M=3,N=4096", "--rules", "cache_hint,unroll",
                              "--out", str(tmp_path / "edits"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    (t,) = data["targets"]
    (k,) = t["kernels"]
    assert t["parent_candidate_id"] == cand.id and k["round_trip"]["ok"] and k["windows"][0]["loop"]
    rules = {e["candidate"]["rule"].split(":")[0] for e in k["edits"]}
    assert rules == {"cache_hint", "unroll"} and all(e["violations"] == [] for e in k["edits"])
    assert data["passed"] == len(k["edits"]) and all(e["diff"].startswith("--- a/") for e in k["edits"])
    assert len(list((tmp_path / "edits").glob("p-*.json"))) == len(k["edits"])
    res = runner.invoke(app, ["ptx", "propose", str(path), "--rules", "nonesuch"])
    assert res.exit_code == 2 and "unknown rule" in res.output
    (tmp_path / "k.ptx").write_text("x")
    res = runner.invoke(app, ["ptx", "propose", str(tmp_path / "k.ptx")])
    assert res.exit_code == 2 and "no source-level kernel" in res.output


def test_prove_and_time_need_a_gpu_or_run_the_stand_in(surveyed, tmp_path, monkeypatch):
    import torch
    path, _ = _candidate(tmp_path, surveyed)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    res = runner.invoke(app, ["ptx", "prove", str(path), "--workload", "M=3,N=4096"])
    assert res.exit_code == 3 and "CUDA GPU" in res.output
    res = runner.invoke(app, ["ptx", "prove", str(path), "--workload", "M=3,N=4096", "--rules", "unroll",
                              "--executor", "stand-in", "--checks", "1", "--max", "1"])
    assert res.exit_code == 0, res.output
    assert "proved at verifier" in res.stdout and "stand-in" in res.stdout
    res = runner.invoke(app, ["ptx", "time", str(path), "--workload", "M=3,N=4096", "--rules", "unroll",
                              "--executor", "stand-in", "--checks", "1", "--max", "1", "--json"])
    assert res.exit_code == 0, res.output
    (p,) = json.loads(res.stdout)["targets"][0]["proofs"]
    assert p["stage"] == "done" and p["timing"]["samples"] == 5 and "not kernel time" in p["timing"]["policy"]


def test_propose_and_show_on_a_recorded_run(tmp_path):
    """A recorded H200 run (schema 4) is migrated; its winner's edits are archived; `show` lists them with their
    parent and diff."""
    import gzip
    import shutil
    from pathlib import Path
    run = tmp_path / "run"
    run.mkdir()
    src = Path(__file__).parents[1] / "fixtures" / "archives" / "h200-layernorm-planner.sqlite.gz"
    with gzip.open(src) as f, open(run / "archive.sqlite", "wb") as g:
        shutil.copyfileobj(f, g)
    res = runner.invoke(app, ["ptx", "show", str(run)])
    assert res.exit_code == 0 and "no PTX-level edits" in res.stdout
    res = runner.invoke(app, ["ptx", "propose", str(run), "--rules", "cache_hint", "--json"])
    assert res.exit_code == 0, res.output
    (t,) = json.loads(res.stdout)["targets"]
    assert t["op"] == "layernorm" and t["run_id"] and t["kernels"][0]["edits"]
    res = runner.invoke(app, ["ptx", "show", str(run), "--json"])
    shown = json.loads(res.stdout)
    assert {c["parent_candidate_id"] for c in shown["candidates"]} == {t["parent_candidate_id"]}
    assert all(c["diff"].startswith("--- a/") for c in shown["candidates"]) and shown["proofs"] == []
    res = runner.invoke(app, ["ptx", "show", str(tmp_path)])
    assert res.exit_code == 2
