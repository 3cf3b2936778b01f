"""`kernelloop schedule show|lower|check|write|compare` and `kernelloop gate`: exit codes and what they print."""

import json

from typer.testing import CliRunner

from kernelloop.cli.app import app
from kernelloop.records import Candidate
from kernelloop.schedule.library import gluon_ws
from kernelloop.schedule.lower import lower
from kernelloop.schedule.patch import apply_patch

run = CliRunner().invoke


def test_show_lower_check(tmp_path):
    out = run(app, ["schedule", "show", "schedule_pingpong", "--config", "num_stages=3"])
    assert out.exit_code == 0 and json.loads(out.stdout)["ring"]["stages"] == 3
    out = run(app, ["schedule", "lower", "gluon_subtiled", "--out", str(tmp_path / "k.py")])
    assert out.exit_code == 0 and "SCHEDULE = " in (tmp_path / "k.py").read_text()
    assert run(app, ["schedule", "show", str(tmp_path / "k.py")]).exit_code == 0
    ok = run(app, ["schedule", "check", "gluon_ws", "--json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["findings"] == []
    bad = run(app, ["schedule", "check", "gluon_ws", "--config", "num_stages=4"])
    assert bad.exit_code == 1 and "ring.stages" in bad.output
    assert run(app, ["schedule", "show", "tiled"]).exit_code == 2
    assert run(app, ["schedule", "write", "--check"]).output.strip() == "up to date"


def test_compare_reports_each_pair(monkeypatch):
    import kernelloop.schedule.compare as cmp
    from kernelloop.schedule.compare import SassMatch
    seen = {}

    def fake(spec, files, w, pairs, jobs=2):
        seen["pairs"] = pairs
        return [SassMatch(original=o, generated=g, config=c, built=True, identical=o != "gluon_pingpong",
                          instructions=700, first_difference="instruction 3: A | B") for o, g, _, c in pairs]
    monkeypatch.setattr(cmp, "compare", fake)
    out = run(app, ["schedule", "compare"])
    assert out.exit_code == 1 and out.output.count("identical SASS") == 2 and "instruction 3" in out.output
    assert {p[1] for p in seen["pairs"]} == {"schedule_ws", "schedule_subtiled", "schedule_pingpong"}


def test_gate_rejects_a_broken_schedule_without_building(tmp_path, monkeypatch):
    import kernelloop.spec.aot as aot
    monkeypatch.setattr(aot, "build_configs", lambda *a, **k: (_ for _ in ()).throw(AssertionError("built")))
    broken = apply_patch(gluon_ws(), [{"op": "replace", "path": "/roles/1/k_step/0/parity", "value": "phase"}])
    cand = Candidate(op="gemm", template="schedule", source=lower(broken), config=gluon_ws().config())
    path = tmp_path / "c.json"
    path.write_text(cand.to_json())
    out = run(app, ["gate", str(path), "--workload", "M=2048,N=4096,K=4096", "--json"])
    assert out.exit_code == 1
    d = json.loads(out.stdout)
    assert d["passed"] is False and d["findings"][0]["field"] == "roles[1].k_step[0].parity"
    assert run(app, ["gate", str(tmp_path / "none.json"), "--workload", "M=1"]).exit_code == 2
