"""One way into the loop: every caller (the API, `kernelloop optimize`, `kernelloop agent llm`, agent submissions,
fusion's realisations, the extension regressions, the LLM runner) reaches `kernelloop.tune.loop.run` with a RunOptions
record that passes its own checks against the op and workloads; nothing else constructs the controller."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kernelloop
from kernelloop.deliver import api
from kernelloop.tune import loop
from kernelloop.base.builtin import ops_dir
from kernelloop.tune.loop import Budget, RunOptions
from kernelloop.core.spec import load_op

SRC = Path(kernelloop.__file__).parent
WL = 'op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp16"\n'


class Reached(Exception):
    """Raised by the stand-in entry point: the caller got there."""


@pytest.fixture
def reached(monkeypatch):
    """`kernelloop.tune.loop.run` replaced: each call's options are checked against its op and workloads (as the real
    entry does) and recorded; then the caller is stopped."""
    calls = []

    def fake(bundle, workloads, options, run_dir, **kw):
        assert isinstance(options, RunOptions)
        calls.append((options.checked(bundle, list(workloads)), kw))
        raise Reached
    monkeypatch.setattr(loop, "run", fake)
    return calls


def test_only_the_entry_point_constructs_the_controller():
    found = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if re.search(r"\bController\(", p.read_text()))
    assert found == ["tune/loop/entry.py"]


def test_the_api(reached, tmp_path):
    with pytest.raises(Reached):
        kernelloop.optimize("layernorm", budget="3,gpu:5m", device="interpret", out=tmp_path / "r", confirm=False)
    ((options, kw),) = reached
    assert options.budget == Budget(evals=3, gpu_seconds=300.0) and not options.confirm
    assert not (tmp_path / "r").exists()


def test_the_cli_optimize(reached, tmp_path):
    from kernelloop.cli.app import app
    r = CliRunner().invoke(app, ["optimize", "layernorm", "--device", "interpret", "--budget", "2", "--screen", "4",
                                 "--template", "rowwise", "--out", str(tmp_path / "r"), "--no-confirm"])
    assert isinstance(r.exception, Reached), r.output
    ((options, kw),) = reached
    assert options.budget.evals == 2 and options.screen_samples == 4 and options.templates == ["rowwise"]
    assert kw["names"]["templates"] == "--template"


def test_the_cli_agent_llm_and_the_llm_runner(reached, tmp_path):
    from kernelloop.cli.app import app
    (tmp_path / "wl.toml").write_text(WL)
    (tmp_path / "llm.toml").write_text('[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n')
    (tmp_path / "cassette").mkdir()
    (tmp_path / "cassette" / "exchanges.jsonl").write_text("")   # an empty recording: nothing is asked before
    r = CliRunner().invoke(app, ["agent", "llm", "layernorm", "--config", str(tmp_path / "llm.toml"),
                                 "--replay", str(tmp_path / "cassette"), "--workloads", str(tmp_path / "wl.toml"),
                                 "--device", "interpret", "--no-confirm", "--out", str(tmp_path / "r")])
    assert isinstance(r.exception, Reached), r.output
    ((options, kw),) = reached
    assert options.budget == Budget.unlimited() and kw["proposer"].name.startswith("llm")


def test_agent_submit(reached, tmp_path):
    from kernelloop.deliver.agent import Submission, init_workspace, submit
    (tmp_path / "wl.toml").write_text(WL)
    ws = init_workspace(ops_dir() / "layernorm", tmp_path / "ws", workloads_file=tmp_path / "wl.toml", checks=1,
                        device="interpret")
    source = (ops_dir() / "layernorm" / "kernel.py").read_text()
    with pytest.raises(Reached):
        submit(ws.root, Submission(source=source, config={"BLOCK_N": 64, "ROWS": 1, "num_warps": 1}))
    ((options, kw),) = reached
    assert options.budget == Budget.unlimited() and options.checks == 1 and kw["proposer"].name == "agent:agent"


def test_fusion_realisations(reached, tmp_path):
    from kernelloop.deliver.fuse.realise import RealiseOptions, TableProposer, _loop
    from kernelloop.base.records import Candidate, Workload
    bundle = load_op(ops_dir() / "layernorm")
    w = Workload(op="layernorm", axes={"M": 4, "N": 64}, dtype="fp16")
    cand = Candidate(op="layernorm", template="rowwise", source=bundle.template_sources["rowwise"],
                     config={"BLOCK_N": 64, "ROWS": 1, "num_warps": 1})
    with pytest.raises(Reached):   # the table's candidate, re-verified
        _loop(bundle, [w], RealiseOptions(), tmp_path / "a", proposer=TableProposer(cand))
    with pytest.raises(Reached):   # the template's search, through kernelloop.optimize
        _loop(bundle, [w], RealiseOptions(budget=3), tmp_path / "b")
    (table, _), (search, _) = reached
    assert table.budget == Budget(evals=1) and search.budget == Budget(evals=3)


def test_extension_regressions(reached, tmp_path):
    from kernelloop.deliver.extend.regress import _interpret, task_set
    tasks = [t for t in task_set("ci", ops=["rmsnorm"]) if t.mode == "interpret"]
    assert tasks
    with pytest.raises(Reached):
        _interpret("rmsnorm", tasks, tmp_path)
    ((options, kw),) = reached
    assert options.budget.evals >= 1 and not options.confirm and kw["proposer"] is not None


def test_the_entry_point_refuses_options_that_do_not_fit_before_anything_is_created(tmp_path):
    bundle = load_op(ops_dir() / "layernorm")
    from kernelloop.base.records import Workload
    w = Workload(op="layernorm", axes={"M": 4, "N": 64}, dtype="fp16")
    for options, match in [(RunOptions(device="interpret", templates=["nope"]), r"template 'nope': layernorm has"),
                           (RunOptions(device="interpret", baselines=["magic"]), r"baseline 'magic': choose from"),
                           (RunOptions(device="interpret", fixed={"BLOCK_N": "3"}), r"no template of layernorm")]:
        with pytest.raises(api.UsageError, match=match):
            loop.run(bundle, [w], options, tmp_path / "never")
    assert not (tmp_path / "never").exists()
