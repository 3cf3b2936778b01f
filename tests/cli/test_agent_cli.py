"""`kernelloop agent init`, `kernelloop submit`, `kernelloop agent status`, `kernelloop agent llm`: exit codes and
JSON answers (the judging itself is tested in tests/agent; the LLM loop in tests/propose/llm)."""

import json

from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.cli import common
from kernelloop.cli.app import app

OP = ops_dir() / "layernorm"
WRONG = (OP / "kernel.py").read_text().replace("y = xc * rstd * w + b", "y = xc * rstd * w")
runner = CliRunner()


def _json(text: str) -> dict:
    return json.loads(text[text.index("{"):])


def test_init_submit_status(tmp_path):
    (tmp_path / "wl.toml").write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp16"\n')
    ws = tmp_path / "ws"
    r = runner.invoke(app, ["agent", "init", str(OP), "--out", str(ws), "--workloads", str(tmp_path / "wl.toml"),
                            "--device", "interpret", "--checks", "1", "--json"])
    assert r.exit_code == 0, r.output
    assert _json(r.stdout)["op"] == "layernorm" and (ws / "interface.json").is_file()

    kernel = tmp_path / "wrong.py"
    kernel.write_text(WRONG)
    r = runner.invoke(app, ["submit", str(kernel), "--workspace", str(ws), "--config",
                            '{"BLOCK_N": 64, "ROWS": 1, "num_warps": 1}', "--hypothesis", "latency_us down -1%"])
    assert r.exit_code == common.FAILED, r.output
    ans = _json(r.stdout)
    assert ans["verdict"] == "WRONG_VALUES" and ans["results"][0]["error_metrics"]

    r = runner.invoke(app, ["agent", "status", "--workspace", str(ws)])
    assert r.exit_code == 0
    st = _json(r.stdout)
    assert st["counts"] == {"WRONG_VALUES": 1} and st["recent"][0]["candidate"] == ans["candidates"][0]["id"]

    # bad input: a --config that is not an object, an unknown parent, an invalid proposal, no workspace
    assert runner.invoke(app, ["submit", str(kernel), "--workspace", str(ws), "--config", "[1]"]).exit_code \
        == common.BAD_INPUT
    r = runner.invoke(app, ["submit", str(kernel), "--workspace", str(ws), "--parent", "c-feedfeedfeedfeed"])
    assert r.exit_code == common.BAD_INPUT and _json(r.stdout)["verdict"] == "INVALID"
    proposal = tmp_path / "p.json"
    proposal.write_text(json.dumps({"source": WRONG, "rationale": "r"}))
    r = runner.invoke(app, ["submit", str(proposal), "--workspace", str(ws)])
    assert r.exit_code == common.BAD_INPUT and "hypothesis" in _json(r.stdout)["error"]
    r = runner.invoke(app, ["submit", str(kernel), "--workspace", str(tmp_path)])
    assert r.exit_code == common.BAD_INPUT and "not a kernelloop workspace" in _json(r.stdout)["error"]
    assert runner.invoke(app, ["agent", "status", "--workspace", str(tmp_path)]).exit_code == common.BAD_INPUT


def test_llm_command_needs_a_config(tmp_path, monkeypatch):
    for var in ("KERNELLOOP_LLM_CONFIG", "KERNELLOOP_LLM_PROVIDER", "KERNELLOOP_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    r = runner.invoke(app, ["agent", "llm", str(OP), "--device", "interpret", "--out", str(tmp_path / "r")])
    assert r.exit_code == common.BAD_INPUT and "no LLM model is configured" in r.output
    (tmp_path / "bad.toml").write_text('[llm]\nprovider = "nope"\nmodel = "m"\n')
    r = runner.invoke(app, ["agent", "llm", str(OP), "--config", str(tmp_path / "bad.toml"), "--device", "interpret"])
    assert r.exit_code == common.BAD_INPUT and "bad.toml" in r.output


def test_submit_space_and_no_profile(tmp_path):
    (tmp_path / "wl.toml").write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp16"\n')
    ws = tmp_path / "ws"
    assert runner.invoke(app, ["agent", "init", str(OP), "--out", str(ws), "--workloads", str(tmp_path / "wl.toml"),
                               "--device", "interpret", "--checks", "1"]).exit_code == 0
    assert "--space" in (ws / "README.md").read_text()
    kernel = tmp_path / "k.py"
    kernel.write_text((OP / "kernel.py").read_text())
    for bad in ("[1]", "{nope", '{"BLOCK_N": []}'):
        r = runner.invoke(app, ["submit", str(kernel), "--workspace", str(ws), "--space", bad])
        assert r.exit_code == common.BAD_INPUT, (bad, r.output)
    r = runner.invoke(app, ["submit", str(kernel), "--workspace", str(ws), "--config", '{"ROWS": 1, "num_warps": 1}',
                            "--space", '{"BLOCK_N": [32, 64]}', "--no-profile"])
    assert r.exit_code == 0, r.output
    ans = _json(r.stdout)
    assert [c["config"]["BLOCK_N"] for c in ans["candidates"]] == [32, 64] and ans["verdict"] == "PASSED"


def test_submit_timeout_kills_a_hanging_kernel(tmp_path):
    (tmp_path / "wl.toml").write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp16"\n')
    ws = tmp_path / "ws"
    assert runner.invoke(app, ["agent", "init", str(OP), "--out", str(ws), "--workloads", str(tmp_path / "wl.toml"),
                               "--device", "interpret", "--checks", "1"]).exit_code == 0
    kernel = tmp_path / "hang.py"
    kernel.write_text((OP / "kernel.py").read_text().replace("    M, N = x.shape\n", "    while True:\n"
                                                              "        pass\n    M, N = x.shape\n", 1))
    r = runner.invoke(app, ["submit", str(kernel), "--workspace", str(ws), "--timeout", "0.5"])
    assert r.exit_code == common.BAD_INPUT and "--timeout" in r.output
    r = runner.invoke(app, ["submit", str(kernel), "--workspace", str(ws), "--config",
                            '{"BLOCK_N": 64, "ROWS": 1, "num_warps": 1}', "--timeout", "5"])
    assert r.exit_code == common.FAILED, r.output
    (res,) = _json(r.stdout)["results"]
    assert res["status"] == "TIMEOUT" and res["costs"]["wall_s"] < 60, res


def test_a_changed_manifest_says_how_to_continue(tmp_path, monkeypatch):
    import importlib

    agent_submit = importlib.import_module("kernelloop.deliver.agent.submit")   # the module; the package exports a function

    (tmp_path / "wl.toml").write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp16"\n')
    ws = tmp_path / "ws"
    assert runner.invoke(app, ["agent", "init", str(OP), "--out", str(ws), "--workloads", str(tmp_path / "wl.toml"),
                               "--device", "interpret"]).exit_code == 0
    kernel = tmp_path / "k.py"
    kernel.write_text(WRONG)

    def refuse(*a, **k):   # what the controller raises when a kernelloop update changed the verifier's hash
        raise RuntimeError("cannot resume: the manifest changed (verifier_sha256); results are only comparable "
                           "within one manifest")

    monkeypatch.setattr(agent_submit, "submit", refuse)
    r = runner.invoke(app, ["submit", str(kernel), "--workspace", str(ws)])
    assert r.exit_code == common.STOPPED
    ans = _json(r.stdout)
    assert ans["verdict"] == "NOT_EVALUATED" and "agent init" in ans["hint"]
