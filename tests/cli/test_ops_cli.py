"""`kernelloop ops`: the built-in ops (or a folder's), as a table and as JSON; a broken spec is named."""

import json
import shutil

from typer.testing import CliRunner

from kernelloop.base.builtin import builtin_ops, ops_dir
from kernelloop.cli.app import app

runner = CliRunner()


def test_lists_the_builtin_ops_as_json(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["ops", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["folder"] == str(ops_dir())
    assert [o["name"] for o in data["ops"]] == builtin_ops()
    ln = next(o for o in data["ops"] if o["name"] == "layernorm")
    assert ln["folder"] == str(ops_dir() / "layernorm") and ln["error"] is None
    assert {"fp16", "bf16", "fp32"} == set(ln["dtypes"]) and "rowwise" in ln["templates"]
    assert {"workloads.toml", "workloads-interpret.toml"} <= set(ln["workloads"])


def test_table_names_every_op(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["ops"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    for name in builtin_ops():
        assert name in r.output
    assert "kernelloop optimize NAME" in r.output


def test_a_folder_of_user_ops_with_a_broken_one(tmp_path):
    shutil.copytree(ops_dir() / "softmax", tmp_path / "softmax", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "spec.toml").write_text('name = "broken"\n')
    (tmp_path / "notes").mkdir()                       # no spec.toml: not an op
    r = runner.invoke(app, ["ops", str(tmp_path), "--json"])
    assert r.exit_code == 2
    data = json.loads(r.stdout)
    assert [o["name"] for o in data["ops"]] == ["broken", "softmax"]
    assert data["ops"][0]["error"] and data["ops"][1]["error"] is None
    r = runner.invoke(app, ["ops", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "no such folder" in r.output


def test_optimize_takes_a_builtin_name_from_any_folder(monkeypatch, tmp_path):
    """Resolution only (argument parsing through loading): an unknown name is a bad input naming it."""
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["optimize", "no_such_op", "--device", "interpret", "--budget", "1"])
    assert r.exit_code == 2 and "no_such_op" in r.output
