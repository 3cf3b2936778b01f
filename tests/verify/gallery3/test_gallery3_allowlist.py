"""Third gallery, the allow-list part (tests/fixtures/cheats3/allowlist): candidates that reach what they need
through Triton's and torch's re-exports, literal getattr, frames and aliases -- each refused by the allow-list
(`not-allowed`, core/verify/rules/allow.py) naming the construct and its line, where the deny-list rules saw nothing --
and one that, with the rules off, walks the frames to the worker's sandbox to switch it off and read the run-key
folder: the hook's state is out of its reach, so the read is still denied."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
from kernelloop.base.builtin import ops_dir
from kernelloop.core.execute.evaluate import Evaluator, Timeouts
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Status, Workload
from kernelloop.core.spec import load_op
from kernelloop.core.verify.rules import check_source

CHEATS = Path(__file__).resolve().parents[2] / "fixtures" / "cheats3" / "allowlist"
OP = ops_dir() / "layernorm"
W = Workload(op="layernorm", axes={"M": 8, "N": 256}, dtype="fp32")

# file -> (line of the first allow-list hit, words its detail holds)
STATIC = {
    "runtime_os.py": (22, "triton.runtime.cache.os: triton.runtime is not on the op's allow-list"),
    "build_importlib.py": (2, "from triton.runtime import build"),
    "library_layer_norm.py": (18, "torch.nn.modules.normalization.F: torch.nn is not on the op's allow-list"),
    "frame_walk.py": (22, "getattr(..., 'gi_frame')"),
    "alias_tricks.py": (20, "triton.runtime: triton.runtime is not on the op's allow-list"),
}


def source(name: str) -> str:
    return (CHEATS / name).read_text()


@pytest.fixture(scope="module")
def spec():
    return load_op(OP).spec


def test_every_case_is_listed_and_names_its_attack():
    assert {p.name for p in CHEATS.glob("*.py")} == set(STATIC) | {"flips_sandbox.py"}
    for p in CHEATS.glob("*.py"):
        assert (ast.get_docstring(ast.parse(p.read_text())) or "").startswith("Attack: "), p.name


@pytest.mark.parametrize("name", sorted(STATIC))
def test_the_allow_list_names_the_construct_and_line(spec, name):
    hits = [h for h in check_source(source(name), spec) if h.rule == "not-allowed"]
    line, words = STATIC[name]
    assert hits and hits[0].line == line and words in hits[0].detail, [(h.line, h.detail) for h in hits]
    assert f"not-allowed at line {line}" in hits[0].message or str(line) in hits[0].message


@pytest.mark.parametrize("name", sorted(STATIC))
def test_the_deny_list_alone_would_have_let_it_through(spec, name):
    # what the other rules say of the same source: nothing, or nothing that names the reach-through (the library
    # call of library_layer_norm.py is reached by a re-exported getattr with an assembled name)
    others = {h.rule for h in check_source(source(name), spec)} - {"not-allowed"}
    assert others == set(), others


@pytest.fixture()
def key_folder():
    from kernelloop.core.sandbox.keys import key_dir
    keys = key_dir()   # the folder the run keys live in (the tests' conftest points it at a temporary folder)
    keys.mkdir(parents=True, exist_ok=True)
    planted = keys / "gallery3-allowlist-canary"
    planted.write_text("CANARY-KEY-0123456789abcdef0123456789abcdef")
    yield keys
    planted.unlink(missing_ok=True)


def test_with_the_rules_off_the_sandbox_cannot_be_switched_off_from_frames(tmp_path, key_folder):
    bundle = load_op(OP)
    worker = Worker("interpret", tmp_path / "worker")
    try:
        ev = Evaluator(bundle, "interpret", worker, INTERPRETER_WALLCLOCK.model_copy(update={"samples": 3}),
                       secret="gallery-3-allow", checks=2, timeouts=Timeouts(check=60.0, bench=60.0),
                       static_rules=False)
        result = ev.evaluate(Candidate(op="layernorm", template="custom", source=source("flips_sandbox.py"),
                                       config={}), W, worker.work_dir / "job")
        log = worker.log_path.read_text(errors="replace")
    finally:
        worker.close()
    assert result.verdict.status is Status.REJECTED, result.verdict
    assert result.verdict.message.startswith(f"sandbox: os.listdir('{key_folder}"), result.verdict.message
    assert "CANARY-KEY" not in log and "KEY " not in log


def test_through_the_agent_cli_a_reexport_is_rejected_naming_it(tmp_path):
    from typer.testing import CliRunner

    from kernelloop.cli.app import app
    (tmp_path / "wl.toml").write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp16"\n')
    ws = tmp_path / "ws"
    r = CliRunner().invoke(app, ["agent", "init", "layernorm", "--out", str(ws), "--workloads",
                                 str(tmp_path / "wl.toml"), "--device", "interpret"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["submit", str(CHEATS / "runtime_os.py"), "--workspace", str(ws), "--agent", "cheater",
                                 "--no-profile"])
    ans = json.loads(r.stdout)
    assert ans["verdict"] == "REJECTED", ans
    hits = ans["candidates"][0]["static_rules"]
    assert {"rule": "not-allowed", "line": 22} .items() <= hits[0].items() or \
        any(h["rule"] == "not-allowed" and h["line"] == 22 and "triton.runtime.cache.os" in h["detail"] for h in hits)
