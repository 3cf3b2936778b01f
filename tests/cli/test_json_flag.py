"""`--json` on every command that prints results; the ones this file runs for real: record (interpreter, one
configuration), report (a kept H200 archive), agent status and submit (their bad-input path). audit-pruning --json
runs in tests/cli/test_audit_cli.py; optimize, show, export, e2e, capture, profile, replay, agent init/llm, trace
and ops have their --json checked in their own tests."""

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.cli import common
from kernelloop.cli.app import app

runner = CliRunner()
NO_RESULTS = {"mcp",            # a stdio server: it prints no results of its own
              "schedule show",  # its output is the schedule as JSON already
              "schedule lower"}  # its output is Gluon source
ARCHIVE = Path(__file__).resolve().parents[1] / "fixtures" / "archives" / "h200-attention-exhaustive.sqlite.xz"


def _commands(group, prefix: str = ""):
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):   # a group (agent, trace)
            yield from _commands(cmd, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", cmd


def test_every_command_that_prints_results_takes_json():
    cmds = dict(_commands(typer.main.get_command(app)))
    assert {"optimize", "show", "ops", "record", "audit-pruning", "report", "submit", "agent status",
            "trace export", "export", "e2e"} <= set(cmds)
    missing = [name for name, cmd in cmds.items() if name not in NO_RESULTS
               and not any("--json" in p.opts for p in cmd.params)]
    assert missing == []


def test_record_json(tmp_path):
    wl = tmp_path / "w.toml"
    wl.write_text('op = "rmsnorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp32"\n')
    out = tmp_path / "space.json"
    r = runner.invoke(app, ["record", str(ops_dir() / "rmsnorm"), "--out", str(out), "--device", "interpret",
                            "--workloads", str(wl), "--limit", "1", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["out"] == str(out) and doc["configurations"] == 1 and out.is_file()
    (w,) = doc["workloads"]
    assert sum(w["statuses"].values()) == 1
    if w["statuses"].get("PASSED"):
        assert w["best"]["kernel_us"] > 0 and w["best"]["config"]["template"]


def test_report_json(tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("jinja2")
    r = runner.invoke(app, ["report", str(ARCHIVE), "--out", str(tmp_path / "r.html"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"report": str(tmp_path / "r.html")} and (tmp_path / "r.html").is_file()


def test_agent_status_and_submit_accept_json(tmp_path):
    r = runner.invoke(app, ["agent", "status", "--workspace", str(tmp_path), "--json"])
    assert r.exit_code == common.BAD_INPUT and "not a kernelloop workspace" in r.output
    k = tmp_path / "k.py"
    k.write_text("def launch():\n    pass\n")
    r = runner.invoke(app, ["submit", str(k), "--workspace", str(tmp_path), "--json"])
    assert r.exit_code == common.BAD_INPUT and "not a kernelloop workspace" in json.loads(r.stdout)["error"]


def test_schedule_write_check_and_extend_ledger_answer_in_json():
    """`schedule write --check --json`: the generated templates are up to date (the committed files); `extend ledger
    --json`: the committed ledger's entries as records."""
    r = runner.invoke(app, ["schedule", "write", "--check", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"stale": [], "up_to_date": True}
    r = runner.invoke(app, ["extend", "ledger", "--json"])
    assert r.exit_code == 0, r.output
    entries = json.loads(r.stdout)
    assert entries and all({"extension", "accepted"} <= set(e) for e in entries)
