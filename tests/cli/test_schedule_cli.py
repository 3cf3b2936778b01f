"""`kernelloop schedule show|lower|check|write|compare`: exit codes and what they print."""

import json

from typer.testing import CliRunner

from kernelloop.cli.app import app

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
    import kernelloop.tune.schedule.compare as cmp
    from kernelloop.tune.schedule.compare import SassMatch
    seen = {}

    def fake(spec, files, w, pairs, jobs=2):
        seen["pairs"] = pairs
        return [SassMatch(original=o, generated=g, config=c, built=True, identical=o != "gluon_pingpong",
                          instructions=700, first_difference="instruction 3: A | B") for o, g, _, c in pairs]
    monkeypatch.setattr(cmp, "compare", fake)
    out = run(app, ["schedule", "compare"])
    assert out.exit_code == 1 and out.output.count("identical SASS") == 2 and "instruction 3" in out.output
    assert {p[1] for p in seen["pairs"]} == {"schedule_ws", "schedule_subtiled", "schedule_pingpong"}


def test_bad_dtype_and_config_are_bad_input():
    out = run(app, ["schedule", "check", "gluon_ws", "--dtype", "int7"])
    assert out.exit_code == 2 and "fp16" in out.output and "bf16" in out.output
    out = run(app, ["schedule", "check", "gluon_ws", "--config", "FOO=3"])
    assert out.exit_code == 2 and "FOO" in out.output and "BLOCK_M" in out.output and "EPILOGUE" in out.output
    out = run(app, ["schedule", "check", "gluon_ws", "--config", "BLOCK_M"])
    assert out.exit_code == 2 and "NAME=VALUE" in out.output
    out = run(app, ["schedule", "check", "gluon_ws", "--config", "BLOCK_M=big"])
    assert out.exit_code == 2 and "integer" in out.output
    out = run(app, ["schedule", "show", "gluon_ws", "--config", "EPILOGUE=bias_gelu,num_stages=2"])
    assert out.exit_code == 0 and json.loads(out.stdout)["epilogue"]["fused"] == ["bias", "gelu"]
    out = run(app, ["schedule", "show", "gluon_ws", "--config", "EPILOGUE=[a]"], terminal_width=200)
    assert out.exit_code == 2 and "'[a]'" in out.output          # the markup-like value is printed, not eaten
