"""The third gallery, the worker protocol (tests/fixtures/cheats3/proto): candidates that write onto the worker's
connection -- a framed pickle meant to run in the controller, a forged `Benched` reply that swallows the real one, a
forged reply followed by the real one -- and one through the agent interface (`agent init` + `submit`).

They run with the source rules off where the rules would see them (as code the rules cannot see would): what is
tested is the boundary behind the rules -- replies are JSON validated before use, one reply per request, timing
replies held against the controller's own evidence (core/execute/evidence.py).
"""

import ast
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
from kernelloop.cli.app import app
from kernelloop.core.execute.evaluate import Evaluator, Timeouts
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Status, Workload

CHEATS = Path(__file__).resolve().parents[2] / "fixtures" / "cheats3" / "proto"
W = Workload(op="layernorm", axes={"M": 8, "N": 256}, dtype="fp32")

# file -> the words the REJECTED verdict's message starts with
EXPECTED = {
    "pickle_onto_connection.py": "protocol-violation: not a worker reply",
    "forged_bench_reply.py": "timing-snapshots: ",
    "second_reply.py": "protocol-violation: a second reply (Benched)",
    "forged_timing_agent.py": "protocol-violation: a second reply (Benched)",
}


def source(name: str) -> str:
    return (CHEATS / name).read_text()


def test_every_cheat_is_listed_and_names_its_attack():
    assert {p.name for p in CHEATS.glob("*.py")} == set(EXPECTED)
    for name in EXPECTED:
        doc = ast.get_docstring(ast.parse(source(name)))
        assert doc and doc.startswith("Attack: "), name


@pytest.fixture()
def evaluator(layernorm, tmp_path):
    worker = Worker("interpret", tmp_path / "worker")
    ev = Evaluator(layernorm, "interpret", worker, INTERPRETER_WALLCLOCK.model_copy(update={"samples": 3}),
                   secret="gallery-3", checks=1, timeouts=Timeouts(check=120.0, bench=120.0), static_rules=False)
    yield ev
    worker.close()


def _evaluate(ev: Evaluator, name: str, job: Path):
    return ev.evaluate(Candidate(op="layernorm", template="custom", source=source(name), config={}), W, job)


def test_a_pickle_written_onto_the_connection_runs_nothing_in_the_controller(evaluator, tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    monkeypatch.setenv("KL_GALLERY3_PWNED", str(marker))
    got = _evaluate(evaluator, "pickle_onto_connection.py", tmp_path / "job")
    assert not marker.exists(), "the controller ran code a candidate sent"
    assert got.verdict.status is Status.REJECTED, got.verdict
    assert got.verdict.message.startswith(EXPECTED["pickle_onto_connection.py"]), got.verdict.message
    assert got.measurement is None


@pytest.mark.parametrize("name", ["forged_bench_reply.py", "second_reply.py"])
def test_a_forged_timing_reply_is_rejected(evaluator, tmp_path, name):
    got = _evaluate(evaluator, name, tmp_path / "job")
    assert got.verdict.status is Status.REJECTED, got.verdict
    assert got.verdict.message.startswith(EXPECTED[name]), got.verdict.message
    assert got.measurement is None


def test_forged_timing_through_the_agent_interface_is_not_faster(tmp_path):
    runner = CliRunner()
    (tmp_path / "wl.toml").write_text('op = "layernorm"\n[[workload]]\naxes = { M = 8, N = 256 }\ndtype = "fp32"\n')
    ws = tmp_path / "ws"
    r = runner.invoke(app, ["agent", "init", "layernorm", "--out", str(ws), "--workloads", str(tmp_path / "wl.toml"),
                            "--device", "interpret", "--checks", "1", "--json"])
    assert r.exit_code == 0, r.output
    kernel = tmp_path / "forged.py"
    kernel.write_text(source("forged_timing_agent.py"))
    r = runner.invoke(app, ["submit", str(kernel), "--workspace", str(ws)])
    ans = json.loads(r.stdout[r.stdout.index("{"):])
    assert ans["verdict"] not in ("PASSED", "FASTER"), ans
    results = ans["results"]
    assert results and all(x["status"] == "REJECTED" for x in results), results
    # the first layer refuses it: the allow-list names the frame walk and the reflection builtins; the protocol's
    # checks behind the rules are the ones test_a_forged_timing_reply_is_rejected runs with the rules off
    assert all("not-allowed" in json.dumps(x) for x in results), results
    # the judging process never imported the candidate's module
    assert not [m for m in list(sys.modules.values())
                if str(getattr(m, "__file__", "") or "").startswith((str(ws), str(tmp_path)))]
