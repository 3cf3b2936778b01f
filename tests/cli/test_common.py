"""cli/common: user and exception text prints verbatim (no rich markup, no emoji codes) in `bad_argument` and the
commands' messages."""

from typer.testing import CliRunner

from kernelloop.cli import common
from kernelloop.cli.app import app

runner = CliRunner()


def test_bad_argument_prints_markup_and_emoji_codes_verbatim(capsys):
    import pytest
    with pytest.raises(common.typer.Exit) as stop:
        common.bad_argument(common.console(stderr=True), "m[a].py:factory: raised KeyError: '[b]' at x[/c]")
    assert stop.value.exit_code == common.BAD_INPUT
    assert "bad argument: m[a].py:factory: raised KeyError: '[b]' at x[/c]" in capsys.readouterr().err


def test_a_factory_error_prints_verbatim(tmp_path):
    (tmp_path / "m.py").write_text("def boom():\n    raise ValueError('bad [a] shape :boom:')\n")
    res = runner.invoke(app, ["fuse", "discover", f"{tmp_path / 'm.py'}:boom"])
    assert res.exit_code == common.BAD_INPUT, res.output
    assert "m.py:boom: the factory raised ValueError: bad [a] shape :boom:" in res.output
    res = runner.invoke(app, ["fuse", "discover", "nosuchmod.sub:factory"])
    assert res.exit_code == common.BAD_INPUT, res.output
    assert "nosuchmod.sub:factory: cannot import 'nosuchmod.sub'" in res.output


def test_an_op_name_not_found_points_at_the_list_of_ops():
    res = runner.invoke(app, ["optimize", "nosuchop"], env={"COLUMNS": "300"})
    assert res.exit_code == common.BAD_INPUT
    assert "unknown op: 'nosuchop' is no folder ./ops/nosuchop and no built-in op" in res.output
    assert "(`kernelloop ops` lists the built-in ops)" in res.output and "file not found" not in res.output
    res = runner.invoke(app, ["optimize", "no/such/folder"], env={"COLUMNS": "300"})   # a path: its loader says
    assert res.exit_code == common.BAD_INPUT
    assert "spec error: no/such/folder: file not found (`kernelloop ops` lists the built-in ops)" in res.output


def test_an_unknown_op_says_so_and_lists_close_names():
    res = runner.invoke(app, ["optimize", "rmsnrom", "--device", "interpret"], env={"COLUMNS": "300"})
    assert res.exit_code == common.BAD_INPUT, res.output
    assert "unknown op: 'rmsnrom'" in res.output and "close names: rmsnorm" in res.output


def test_a_fuse_shape_line_has_no_empty_parts():
    from types import SimpleNamespace as NS

    from kernelloop.cli.fuse import e2e_line
    e = NS(shape="2x8", outputs_ok=True, checks=[NS(cosine=0.9999991)], times=[], speed_note="")
    assert e2e_line(e) == "2x8: outputs within tolerance (min cosine 0.999999)"
    e = NS(shape="2x8", outputs_ok=False, checks=[], times=[], speed_note="not timed in the interpreter")
    assert e2e_line(e) == "2x8: outputs OUTSIDE tolerance; not timed in the interpreter"


def test_optimize_refuses_a_space_with_nothing_to_try_and_says_why(tmp_path):
    """Gluon's template has no interpreter: asked for alone there, the run is refused before it starts (exit 2),
    with the template's pruning reason; nothing is written."""
    res = runner.invoke(app, ["optimize", "attention", "--device", "interpret", "--template", "gluon_fa",
                              "--out", str(tmp_path / "run")])
    assert res.exit_code == common.BAD_INPUT, res.output
    out = " ".join(res.output.split())
    assert "nothing to try on interpret" in out and "gluon_fa:" in out and "no interpreter" in out
    assert not (tmp_path / "run").exists()


def test_a_validation_error_is_one_line_naming_the_model_and_field(tmp_path):
    """`schedule` and `gate check` printed pydantic's multi-line report (with its errors.pydantic.dev links) for a
    file that is not a schedule or a candidate; now one line: model, first field, reason, how many more."""
    import pytest
    from pydantic import ValidationError

    from kernelloop.base.records.device import Device
    with pytest.raises(ValidationError) as e:
        Device.of("abc")
    assert common.error_text(e.value) == ("Device: unknown device 'abc': expected cuda, cuda:N, cuda:MIG-..., "
                                          "interpret or interpret:N")
    assert common.error_text(ValueError("plain")) == "plain"
    (tmp_path / "s.json").write_text('{"name": "x"}')
    r = CliRunner().invoke(app, ["schedule", "check", str(tmp_path / "s.json")])
    assert r.exit_code == 2 and r.output.strip() == "bad schedule: Schedule: tile: Field required (and 2 more)"
    r = CliRunner().invoke(app, ["gate", "check", str(tmp_path / "s.json"), "--workload", "M=1,N=1,K=1"])
    assert r.exit_code == 2 and "errors.pydantic.dev" not in r.output and len(r.output.strip().splitlines()) == 1


def test_an_agent_workspace_names_its_runs_archive(tmp_path):
    """`show ws`, `report ws`, ... looked for ws/archive.sqlite; a workspace's run is ws/.kernelloop/run-<device>."""
    import pytest
    import typer
    from rich.console import Console
    ws = tmp_path / "ws"
    r = runner.invoke(app, ["agent", "init", "rmsnorm", "--out", str(ws), "--device", "interpret"])
    assert r.exit_code == 0, r.output
    console = Console(width=200)
    with pytest.raises(typer.Exit):   # no submission yet: no run
        common.archive_path(ws, console)
    archive = ws / ".kernelloop" / "run-interpret" / "archive.sqlite"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"")
    assert common.archive_path(ws, console) == archive.resolve()


def _typer_apps(t, seen=None):
    """Every Typer app under `t` (its sub-apps), `t` first."""
    seen = [] if seen is None else seen
    seen.append(t)
    for g in t.registered_groups:
        _typer_apps(g.typer_instance, seen)
    return seen


def test_help_text_prints_verbatim_in_every_command():
    assert all(t.rich_markup_mode is None for t in _typer_apps(app))   # no markup or emoji codes in help text
    for cmd in (["capture", "--help"], ["e2e", "--help"], ["fuse", "run", "--help"]):
        res = runner.invoke(app, cmd, env={"COLUMNS": "400"})
        assert res.exit_code == 0, res.output
        assert "file.py:factory" in res.output and "\U0001f3ed" not in res.output, cmd


def test_the_report_install_hint_names_the_extra(tmp_path, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "kernelloop.deliver.report.html", None)   # as if matplotlib were missing
    (tmp_path / "archive.sqlite").write_bytes(b"")
    res = runner.invoke(app, ["report", str(tmp_path)], env={"COLUMNS": "300"})
    assert res.exit_code == common.BAD_INPUT, res.output
    assert "pip install 'kernelloop[report]'" in res.output


def test_resume_of_a_missing_run_folder_is_refused(tmp_path):
    missing = tmp_path / "no-such-run"
    res = runner.invoke(app, ["optimize", "rmsnorm", "--device", "interpret", "--budget", "1", "--resume",
                              "--out", str(missing)], env={"COLUMNS": "300"})
    assert res.exit_code == common.BAD_INPUT, res.output
    assert "--resume" in res.output and "does not exist: nothing to continue" in res.output
    assert not missing.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(app, ["optimize", "rmsnorm", "--device", "interpret", "--budget", "1", "--resume",
                              "--out", str(empty)], env={"COLUMNS": "300"})
    assert res.exit_code == common.BAD_INPUT and "holds no run" in res.output and not any(empty.iterdir())
