"""`kernelloop show` lists a run's failures grouped by reason, each with the case it failed on; `show --json`
includes them in full (the user's record: held-out shapes and seeds included)."""

import json
from pathlib import Path

from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.deliver.agent.submit import SubmissionProposer
from kernelloop.cli.app import app
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.tune.loop import Budget, Controller, RunOptions
from kernelloop.base.records import Candidate, Workload
from kernelloop.core.spec import load_op

ROOT = Path(__file__).resolve().parents[2]
HARDCODED = (ROOT / "tests" / "fixtures" / "cheats" / "hardcoded_shape.py").read_text()
RAISES = "def launch(x, weight, bias, y, *, eps, **config):\n    raise RuntimeError('planned failure')\n"


def test_show_groups_failures_by_reason_with_their_cases(tmp_path):
    bundle = load_op(ops_dir() / "layernorm")
    w = Workload(op="layernorm", axes={"M": 8, "N": 64}, dtype="fp16")
    cands = [Candidate(op="layernorm", template="custom", source=HARDCODED + f"\n# {i}\n") for i in range(2)]
    cands.append(Candidate(op="layernorm", template="custom", source=RAISES))
    out = tmp_path / "run"
    opts = RunOptions(device="interpret", budget=Budget(evals=None), checks=1, confirm=False,
                      timeouts=Timeouts(check=60.0, bench=60.0))
    Controller(bundle, [w], opts, out, proposer=SubmissionProposer(cands)).run()
    runner = CliRunner()
    shown = runner.invoke(app, ["show", str(out), "--json"])
    assert shown.exit_code == 0, shown.output
    groups = {g["reason"]: g for g in json.loads(shown.stdout)["failures"]}
    assert list(groups) == ["elements never written", "raised RuntimeError"]   # most frequent first
    never = groups["elements never written"]
    assert never["count"] == 2 and never["status"] == "WRONG_INCOMPLETE"
    for t in never["trials"]:
        case = t["case"]
        assert case["kind"] == "held-out" and case["axes"]["M"] < 8 and case["seed"] > 0 and t["stage"] == "verify"
        assert case["heldout"]["class"] == "a held-out smaller M (rows (tokens))"
        assert f"[{case['axes']['M']}x64]" in t["case_label"] and "never written" in t["message"]
    raised = groups["raised RuntimeError"]["trials"][0]
    assert raised["case"]["index"] == 0 and "planned failure" in raised["message"]
    table = runner.invoke(app, ["show", str(out)], env={"COLUMNS": "300"})
    assert table.exit_code == 0
    assert "failures by reason" in table.stdout and "elements never written" in table.stdout
    assert "raised RuntimeError" in table.stdout and "planned failure" in table.stdout
