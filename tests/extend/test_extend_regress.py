"""kernelloop.deliver.extend: the task sets, the comparison that refuses a regressing extension and records its effect, and
the CI subset run for real (interpreter verdicts through the loop, sm_90 builds through the gate) against the
verdicts committed in extensions/ci-verdicts.json: any regression there fails CI."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelloop.base.builtin import builtin_ops
from kernelloop.cli.app import app
from kernelloop.deliver.extend import (Extension, TaskVerdict, check_extension, ledger_entries, record, run_tasks,
                               task_set)

ROOT = Path(__file__).resolve().parents[2]
EXT = Extension(name="x", kind="lowering", description="a change")


def v(key, status, mode="interpret"):
    return TaskVerdict(key=key, op="o", template="t", mode=mode, status=status)


def test_task_sets_cover_every_op():
    full = task_set("full", per_template=1)
    assert {t.op for t in full} == set(builtin_ops())
    assert {t.mode for t in full if t.op == "gemm"} == {"interpret", "sm_90"}
    assert {t.template for t in full if t.mode == "sm_90"} >= {"schedule_ws", "gluon_pingpong"}
    ci = task_set("ci")
    assert {(t.op, t.mode) for t in ci} == {("rmsnorm", "interpret"), ("gemm", "sm_90")}
    assert len({t.key for t in ci}) == len(ci) == 4


def test_regressions_refuse_and_every_check_is_recorded(tmp_path):
    before = [v("a", "PASSED"), v("b", "WRONG_VALUES"), v("c", "passed", "sm_90"), v("d", "PASSED")]
    same = check_extension(EXT, before, before)
    assert same.accepted and same.unchanged == 4
    better = check_extension(EXT, before, [v("a", "PASSED"), v("b", "PASSED"), v("c", "passed", "sm_90"),
                                           v("d", "PASSED"), v("e", "PASSED")])
    assert better.accepted and [c.key for c in better.improvements] == ["b"] and better.added == ["e"]
    worse = check_extension(EXT, before, [v("a", "PASSED"), v("b", "WRONG_VALUES"),
                                          v("c", "rejected: protocol", "sm_90")])
    assert not worse.accepted
    assert [(c.key, c.after) for c in worse.regressions] == [("c", "rejected: protocol"), ("d", "(task gone)")]
    ledger = tmp_path / "ledger.jsonl"
    record(ledger, better)
    record(ledger, worse)
    assert [r.accepted for r in ledger_entries(ledger)] == [True, False]
    out = CliRunner().invoke(app, ["extend", "ledger", "--ledger", str(ledger)])
    assert out.exit_code == 0 and "refused  lowering: x" in out.output


@pytest.mark.timeout(300)
def test_ci_subset_does_not_regress(tmp_path):
    """The regression check CI runs: the CI subset now, against the committed verdicts."""
    from kernelloop.tune.ptx.tools import toolchain_missing
    if toolchain_missing():
        pytest.skip(toolchain_missing())
    committed = [TaskVerdict.model_validate(x)
                 for x in json.loads((ROOT / "extensions" / "ci-verdicts.json").read_text())]
    now = run_tasks(task_set("ci"), tmp_path)
    result = check_extension(Extension(name="this tree", kind="lowering", description="CI"), committed, now)
    assert result.accepted, result.regressions
    assert all(x.good for x in now) and result.tasks == len(committed) == 4


def test_extend_commands(tmp_path, monkeypatch):
    import kernelloop.cli.extend as cli
    answers = [[v("a", "PASSED"), v("b", "PASSED")], [v("a", "PASSED"), v("b", "WRONG_VALUES")]]
    monkeypatch.setattr(cli, "_verdicts", lambda subset, ops, jobs: answers.pop(0))
    base, ledger = tmp_path / "base.json", tmp_path / "ledger.jsonl"
    assert CliRunner().invoke(app, ["extend", "baseline", "--out", str(base)]).exit_code == 0
    out = CliRunner().invoke(app, ["extend", "check", "--name", "rule-x", "--kind", "verifier rule", "--description",
                                   "rejects b", "--baseline", str(base), "--ledger", str(ledger)])
    assert out.exit_code == 1 and "refused" in out.output and "b: PASSED -> WRONG_VALUES" in out.output
    (entry,) = ledger_entries(ledger)
    assert entry.extension.name == "rule-x" and not entry.accepted
    bad = CliRunner().invoke(app, ["extend", "check", "--name", "n", "--kind", "nonsense", "--description", "d",
                                   "--baseline", str(base)])
    assert bad.exit_code == 2


def test_ledger_defaults_to_the_repository_and_refuses_a_corrupt_one(tmp_path, monkeypatch):
    import kernelloop.deliver.extend as extend
    monkeypatch.chdir(tmp_path)                                  # outside the clone: the default is still its ledger
    out = CliRunner().invoke(app, ["extend", "ledger", "--json"])
    assert out.exit_code == 0, out.output
    shown = [e["extension"]["name"] for e in json.loads(out.stdout)]
    assert shown and shown == [e.extension.name for e in ledger_entries(ROOT / "extensions" / "ledger.jsonl")]
    assert not (tmp_path / "extensions").exists()
    (tmp_path / "corrupt.json").write_text('{"tasks": 1}\nnot json\n')
    bad = CliRunner().invoke(app, ["extend", "ledger", "--ledger", str(tmp_path / "corrupt.json")])
    assert bad.exit_code == 2 and "line 1 is not a ledger entry" in bad.output, bad.output
    monkeypatch.setattr(extend, "repository_ledger", lambda: None)   # a package installed outside any clone
    lost = CliRunner().invoke(app, ["extend", "ledger"])
    assert lost.exit_code == 2 and "--ledger" in lost.output


def test_extend_messages_are_printed_verbatim(tmp_path):
    (tmp_path / "base.json").write_text("[]")
    out = CliRunner().invoke(app, ["extend", "check", "--name", "n", "--kind", "[a] :factory:", "--description", "d",
                                   "--baseline", str(tmp_path / "base.json"), "--ledger", str(tmp_path / "l.jsonl")],
                             terminal_width=300)
    assert out.exit_code == 2 and "'[a] :factory:'" in out.output, out.output
