"""`kernelloop audit-pruning`: builds the unpruned space ahead of time for sm_90 (no GPU), writes the report and
the configurations to time, checks a recorded space with --timed, and refuses bad input."""

import json

import pytest
from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.cli import common
from kernelloop.cli.app import app
from kernelloop.tune.profile.sass import find_tool
from kernelloop.tune.replay.space_file import write_space_file

runner = CliRunner()


def test_audit_pruning_end_to_end(tmp_path):
    if find_tool("cuobjdump") is None:
        pytest.skip("no cuobjdump (Triton's wheel ships one)")
    wl = tmp_path / "w.toml"
    wl.write_text('op = "rmsnorm"\n[[workload]]\naxes = { M = 8, N = 4096 }\ndtype = "fp16"\n')
    out, cfgs = tmp_path / "audit.json", tmp_path / "runners.json"
    # rowwise's first configurations: BLOCK_N 256 loops over the 4096-wide row, which pruning removes
    r = runner.invoke(app, ["audit-pruning", str(ops_dir() / "rmsnorm"), "--workloads", str(wl), "--template",
                            "rowwise", "--limit", "3", "--jobs", "2", "--out", str(out), "--configs-out", str(cfgs)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    (rep,) = doc["workloads"]
    import triton
    assert doc["arch"] == 90 and doc["triton"] == triton.__version__ and doc["templates"] == ["rowwise"]
    assert rep["configurations"] == 3
    assert rep["pruned"] == 3 and rep["fails"] == 0 and rep["recall"] is None
    assert len(rep["rows"]) == 3 and all(row["class"] == "runs" and row["registers"] > 0 for row in rep["rows"])
    assert len(rep["pruned_runners"]) == 3 and "1024" in rep["pruned_runners"][0]["pruned"]
    listed = json.loads(cfgs.read_text())
    assert listed["op"] == "rmsnorm" and len(listed["configs"][rep["workload_id"]]) == 3
    assert "3/3 built" in r.output and "wrote" in r.output
    # --timed: a recording where the pruned configurations are slower than the kept ones
    records = [{"config": c, "results": {rep["workload_id"]: {"value": 50.0 + i, "status": "PASSED"}}}
               for i, c in enumerate(listed["configs"][rep["workload_id"]])]
    records += [{"config": {"template": "rowwise", "BLOCK_N": 4096, "ROWS": 1, "num_warps": w, "EVICT_FIRST": 0,
                            "STREAM_STORE": 0}, "results": {rep["workload_id"]: {"value": 10.0 + w, "status": "PASSED"}}}
                for w in (1, 2, 4, 8, 16)]
    space = tmp_path / "timed.json"
    write_space_file(space, {"format": "kernelloop-space/1", "name": "t", "op": "rmsnorm", "objective": "kernel_us",
                             "params": ["template"], "workloads": [{"id": rep["workload_id"]}], "records": records,
                             "complete": True})
    r = runner.invoke(app, ["audit-pruning", "rmsnorm", "--workloads", str(wl), "--template", "rowwise", "--limit", "3",
                            "--out", str(out), "--timed", str(space)])
    assert r.exit_code == 0, r.output
    top = json.loads(out.read_text())["workloads"][0]["top_share"]
    assert top["measured"] == 8 and top["measured_pruned"] == 3 and top["pruned_in_top"] == []
    assert top["best_pruned_rank"] == 6
    # --screen: the screen's summary beside the recording (here every pruned configuration was measured too)
    summary = tmp_path / "screen.json"
    summary.write_text(json.dumps({"op": "rmsnorm", "workloads": {rep["workload_id"]: {
        "pruned_screened": 3, "pruned_unscreened": 0, "threshold_us": 12.0, "margin": 0.1, "to_confirm": []}}}))
    r = runner.invoke(app, ["audit-pruning", "rmsnorm", "--workloads", str(wl), "--template", "rowwise", "--limit", "3",
                            "--out", str(tmp_path / "s.json"), "--builds", str(out), "--timed", str(space),
                            "--screen", str(summary)])
    assert r.exit_code == 0, r.output
    top = json.loads((tmp_path / "s.json").read_text())["workloads"][0]["top_share"]
    assert top["verdict"].startswith("no pruned configuration in the top share: 3 measured here, 0 screened")
    # the same audit from the report's builds, without building
    again = tmp_path / "again.json"
    r = runner.invoke(app, ["audit-pruning", "rmsnorm", "--workloads", str(wl), "--template", "rowwise", "--limit", "3",
                            "--out", str(again), "--builds", str(out)])
    assert r.exit_code == 0 and "auditing the builds of 3" in r.output and "built (" not in r.output, r.output
    rows = json.loads(again.read_text())["workloads"][0]["rows"]
    assert [x["kernels"] for x in rows] == [x["kernels"] for x in rep["rows"]]
    r = runner.invoke(app, ["audit-pruning", "rmsnorm", "--workloads", str(wl), "--template", "rowwise", "--limit", "3",
                            "--out", str(again), "--builds", str(out), "--json"])
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["workloads"]
    assert row["configurations"] == 3 and row["pruned"] == 3 and row["pruned_runners"] == 3 and row["recall"] is None
    r = runner.invoke(app, ["audit-pruning", "rmsnorm", "--workloads", str(wl), "--template", "rowwise", "--limit", "4",
                            "--out", str(again), "--builds", str(out)])
    assert r.exit_code == common.BAD_INPUT and "not in it" in " ".join(r.output.split())
    swl = tmp_path / "s.toml"
    swl.write_text('op = "softmax"\n[[workload]]\naxes = { M = 8, N = 4096 }\ndtype = "fp16"\n')
    r = runner.invoke(app, ["audit-pruning", "softmax", "--workloads", str(swl), "--out", str(again), "--builds", str(out)])
    assert r.exit_code == common.BAD_INPUT and "audits 'rmsnorm', not 'softmax'" in " ".join(r.output.split())


def test_audit_pruning_bad_input(tmp_path):
    r = runner.invoke(app, ["audit-pruning", "rmsnorm", "--template", "nonesuch", "--out", str(tmp_path / "a.json")])
    assert r.exit_code == common.BAD_INPUT and "nonesuch" in r.output
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = runner.invoke(app, ["audit-pruning", "rmsnorm", "--timed", str(bad), "--out", str(tmp_path / "a.json")])
    assert r.exit_code == common.BAD_INPUT and "not a space file" in " ".join(r.output.split())
    screen = tmp_path / "screen.json"
    screen.write_text(json.dumps({"op": "softmax", "workloads": {}}))
    r = runner.invoke(app, ["audit-pruning", "rmsnorm", "--screen", str(screen), "--out", str(tmp_path / "a.json")])
    assert r.exit_code == common.BAD_INPUT and "it needs --timed" in " ".join(r.output.split())
    good_space = tmp_path / "space.json"
    write_space_file(good_space, {"format": "kernelloop-space/1", "name": "t", "op": "rmsnorm", "objective": "kernel_us",
                                  "params": [], "workloads": [{"id": "w"}], "records": [], "complete": True})
    r = runner.invoke(app, ["audit-pruning", "rmsnorm", "--timed", str(good_space), "--screen", str(screen),
                            "--out", str(tmp_path / "a.json")])
    assert r.exit_code == common.BAD_INPUT and "screens 'softmax', not 'rmsnorm'" in " ".join(r.output.split())
    other_op = tmp_path / "softmax-space.json"   # another op's recording (it was read, and matched nothing)
    write_space_file(other_op, {"format": "kernelloop-space/1", "name": "t", "op": "softmax", "objective": "kernel_us",
                                "params": [], "workloads": [{"id": "w"}], "records": [], "complete": True})
    r = runner.invoke(app, ["audit-pruning", "rmsnorm", "--timed", str(other_op), "--template", "persistent",
                            "--limit", "1", "--out", str(tmp_path / "a.json")])
    assert r.exit_code == common.BAD_INPUT and "records 'softmax', not 'rmsnorm'" in " ".join(r.output.split())
    screen.write_text("not json")
    r = runner.invoke(app, ["audit-pruning", "rmsnorm", "--timed", str(good_space), "--screen", str(screen),
                            "--out", str(tmp_path / "a.json")])
    assert r.exit_code == common.BAD_INPUT and "--screen" in r.output
    r = runner.invoke(app, ["audit-pruning", str(tmp_path / "nothing"), "--out", str(tmp_path / "a.json")])
    assert r.exit_code == common.BAD_INPUT and "spec error" in r.output
    r = runner.invoke(app, ["audit-pruning", "rmsnorm", "--arch", "80", "--out", str(tmp_path / "a.json")])
    assert r.exit_code == common.BAD_INPUT and "--arch 80" in " ".join(r.output.split())
    assert not (tmp_path / "a.json").exists()
