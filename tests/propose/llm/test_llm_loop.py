"""The whole loop with the LLM proposer through real HTTP (scripted OpenAI-compatible server, the real `openai`
SDK), in interpreter mode; then the same run replayed offline from the recording, identically.

The script: plan -> malformed JSON -> good kernel (PASSED); plan -> patch that does not compile (COMPILE_ERROR)
-> debugger patch that fixes it (PASSED); plan -> wrong kernel (WRONG_VALUES) -> debugger times out, retries,
and answers with a kernel that calls torch's layer_norm (REJECTED by the static source rules).
"""

import json

import pytest

from llm_script import BREAK_PATCH, CHEAT, FIX_PATCH, GOOD, WRONG, ScriptedLLMServer, plan, proposal
from kernelloop.base.builtin import ops_dir
from kernelloop.core.archive import Archive
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.tune.loop import Budget, RunOptions
from kernelloop.tune.loop.llm import run_llm
from kernelloop.tune.propose.llm import LLMBudget, LLMConfig, Price, ReplayMiss
from kernelloop.tune.propose.proposal import apply_unified_diff
from kernelloop.base.records import Candidate, Workload
from kernelloop.deliver.report.summary import run_summary

W = Workload(op="layernorm", axes={"M": 4, "N": 64}, dtype="fp16")
USAGE = {"input": 1000, "output": 200, "cached": 400}
PRICE = Price(input=1.0, output=2.0, cached_input=0.5)   # USD per million tokens
CALL_USD = (600 * 1.0 + 400 * 0.5 + 200 * 2.0) / 1e6


def cid(source, config):
    return Candidate(op="layernorm", template="custom", source=source, config=config).id


C1 = cid(GOOD, {"BLOCK": 64, "num_warps": 1})
BROKEN = apply_unified_diff(GOOD, BREAK_PATCH)
C2 = cid(BROKEN, {"BLOCK": 64, "num_warps": 2})
C3 = cid(GOOD, {"BLOCK": 64, "num_warps": 2})
C4 = cid(WRONG, {"BLOCK": 64, "num_warps": 4})
C5 = cid(CHEAT, {"BLOCK": 64, "num_warps": 4})

SCRIPT = [
    {"content": plan("one program per row, the row in registers")},
    {"content": 'Sure! Here is the kernel: {"source": "import triton\\n'},              # malformed JSON
    {"content": proposal(source=GOOD, config={"BLOCK": 64, "num_warps": 1})},
    {"content": plan("two warps per row", parents=[C1])},
    {"content": proposal(patch=BREAK_PATCH, parents=[C1], config={"BLOCK": 64, "num_warps": 2})},
    {"content": proposal(patch=FIX_PATCH, parents=[C2], config={"BLOCK": 64, "num_warps": 2})},
    {"content": plan("four warps", parents=[C1])},
    {"content": proposal(source=WRONG, parents=[C1], config={"BLOCK": 64, "num_warps": 4})},
    {"content": "too late", "delay": 2.5},                                                 # the client times out
    {"content": proposal(source=CHEAT, parents=[C4], config={"BLOCK": 64, "num_warps": 4})},
]
EXPECTED = [(C1, "PASSED"), (C2, "COMPILE_ERROR"), (C3, "PASSED"), (C4, "WRONG_VALUES"), (C5, "REJECTED")]


def options():
    return RunOptions(device="interpret", budget=Budget(evals=None), checks=1, confirm=False,
                      timeouts=Timeouts(check=60.0, bench=60.0))


def config(base_url):
    return LLMConfig(provider="openai", model="scripted-coder", base_url=base_url, timeout_s=1.0, retries=1,
                     prices={"scripted-coder": PRICE})


def statuses(run_dir):
    with Archive(run_dir / "archive.sqlite") as a:
        run = a.runs()[0]
        return [(t.candidate_id, t.verdict.status.value) for t in a.trials(run["id"])], run_summary(a).model_dump(mode="json")


@pytest.fixture(scope="module")
def recorded(layernorm, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("llm") / "run"
    with ScriptedLLMServer([{**s, "usage": USAGE} if "delay" not in s else s for s in SCRIPT]) as server:
        run_llm(layernorm, [W], options(), run_dir, config(server.base_url), budget=LLMBudget(candidates=5))
        requests = list(server.requests)
        left = list(server.script)
    return run_dir, requests, left


def test_every_scripted_reply_gets_the_right_treatment(recorded):
    run_dir, requests, left = recorded
    assert left == [], "the proposer consumed exactly the planned replies"
    trials, summary = statuses(run_dir)
    assert trials == EXPECTED

    bodies = [r["body"] for r in requests]
    assert all(r["path"].endswith("/chat/completions") for r in requests)
    # malformed JSON went back with the parse error, in the same conversation
    repair = bodies[2]["messages"]
    assert repair[-2]["role"] == "assistant" and "Sure! Here is the kernel" in repair[-2]["content"]
    assert "not valid JSON" in repair[-1]["content"]
    # the debugger saw the compile error of the broken patch, and the failed candidate's code
    debug = bodies[5]["messages"][-1]["content"]
    assert "Role: debugger" in debug and "COMPILE_ERROR" in debug and "arange" in debug and C2 in debug
    # the WRONG_VALUES debugger got the verifier's report (failing case, error metrics) without the case's seed
    # (proposers never see seeds: kernelloop.core.verify.explain), and was re-sent after the timeout unchanged
    wrong = bodies[8]["messages"][-1]["content"]
    assert "WRONG_VALUES" in wrong and "max_abs" in wrong and "layernorm[4x64]:fp16 check 0" in wrong
    assert "seed=" not in wrong
    assert bodies[9] == bodies[8]
    # prompts carry the interface, never the verifier's inputs
    assert "launch(x, weight, bias, y, *, eps, **config)" in bodies[0]["messages"][-1]["content"]


def test_lineage_hypothesis_and_prompt_hash_are_archived(recorded):
    run_dir, _, _ = recorded
    with Archive(run_dir / "archive.sqlite") as a:
        c3 = a.get_candidate(C3)
        c2 = a.get_candidate(C2)
        events = a.events(a.runs()[0]["id"])
        cheat = a.find_trial(a.runs()[0]["id"], C5, W.id)
        cheat_parents = a.get_candidate(C5).parent_ids
    assert "library-op" in cheat.verdict.log and cheat_parents == [C4]
    assert c2.parent_ids == [C1] and c3.parent_ids == [C2]
    assert c3.source == GOOD, "the debugger's patch was applied to the broken candidate's source"
    assert c2.hypothesis == "registers same; latency_us down -10%"
    from kernelloop.tune.propose.llm import load_prompts
    tag = load_prompts().tag
    assert c2.proposer == f"llm:scripted-coder:{tag}"
    calls = [e["payload"] for e in events if e["kind"] == "llm-call"]
    assert len(calls) == len(SCRIPT)
    assert {c["prompt_hash"] for c in calls} == {load_prompts().hash}
    assert [c["role"] for c in calls] == ["planner", "coder", "coder", "planner", "coder", "debugger",
                                          "planner", "coder", "debugger", "debugger"]
    assert calls[1]["rejected"].startswith("the reply is not valid JSON") and calls[2]["rejected"] == ""
    assert calls[8]["error"].startswith("timeout") and calls[8]["input_tokens"] == 0


def test_costs_per_call_trial_and_run(recorded):
    run_dir, _, _ = recorded
    _, summary = statuses(run_dir)
    llm = summary["llm"]
    assert llm["total"]["calls"] == 10 and llm["total"]["errors"] == 1
    assert llm["total"]["input_tokens"] == 9 * 1000 and llm["total"]["cached_tokens"] == 9 * 400
    assert llm["total"]["output_tokens"] == 9 * 200
    assert llm["total"]["usd"] == pytest.approx(9 * CALL_USD)
    assert llm["by_role"]["debugger"]["calls"] == 3 and llm["by_role"]["planner"]["calls"] == 3
    with Archive(run_dir / "archive.sqlite") as a:
        trial_ids = {t.candidate_id: t.id for t in a.trials(a.runs()[0]["id"])}
    per = llm["per_trial"]
    assert per[trial_ids[C1]]["calls"] == 3 and per[trial_ids[C1]]["usd"] == pytest.approx(3 * CALL_USD)
    assert per[trial_ids[C3]]["calls"] == 1 and per[trial_ids[C5]]["errors"] == 1
    assert sum(p["usd"] for p in per.values()) == pytest.approx(llm["total"]["usd"])
    assert json.loads(json.dumps(summary))["llm"] == llm, "the section is plain JSON"


def test_replay_offline_gives_the_same_trials_and_verdicts(recorded, tmp_path):
    """`kernelloop agent llm --replay`: no provider, a base_url nothing listens on, the same trials and verdicts."""
    from typer.testing import CliRunner
    from kernelloop.cli.app import app
    run_dir, requests, _ = recorded
    trials, _ = statuses(run_dir)
    (tmp_path / "wl.toml").write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp16"\n')
    (tmp_path / "llm.toml").write_text('[llm]\nprovider = "openai"\nmodel = "scripted-coder"\n'
                                       'base_url = "http://127.0.0.1:9/v1"\n'
                                       '[prices."scripted-coder"]\ninput = 1.0\noutput = 2.0\ncached_input = 0.5\n')
    replay_dir = tmp_path / "replay"
    r = CliRunner().invoke(app, ["agent", "llm", str(layernorm_dir()), "--config", str(tmp_path / "llm.toml"),
                                 "--replay", str(run_dir / "llm"), "--workloads", str(tmp_path / "wl.toml"),
                                 "--budget", "5", "--checks", "1", "--device", "interpret", "--no-confirm",
                                 "--out", str(replay_dir), "--json"])
    assert r.exit_code == 0, r.output
    replayed, summary = statuses(replay_dir)
    assert replayed == trials
    assert json.loads(r.stdout[r.stdout.index("{"):])["llm"] == summary["llm"]
    assert summary["llm"]["replayed_calls"] == 10
    assert summary["llm"]["total"]["usd"] == pytest.approx(9 * CALL_USD)


def layernorm_dir():
    from pathlib import Path
    return ops_dir() / "layernorm"


def test_replay_that_diverges_stops_with_replay_miss(recorded, layernorm, tmp_path):
    run_dir, _, _ = recorded
    other = Workload(op="layernorm", axes={"M": 4, "N": 64}, dtype="fp32")   # another state: nothing recorded
    with pytest.raises(ReplayMiss):
        run_llm(layernorm, [other], options(), tmp_path / "diverged", config("http://127.0.0.1:9/v1"),
                mode="replay", cassette_dir=run_dir / "llm", budget=LLMBudget(candidates=1))


def test_show_prints_the_costs(recorded):
    """`kernelloop show RUN` renders the LLM section: calls per role, tokens, cached tokens and the price."""
    from typer.testing import CliRunner

    from kernelloop.cli.app import app
    run_dir, _, _ = recorded
    r = CliRunner().invoke(app, ["show", str(run_dir)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "LLM calls (tokens, latency, price)" in r.output
    total = next(line for line in r.output.splitlines() if "total" in line and "9,000" in line)
    assert "3,600" in total and "1,800" in total and f"{9 * CALL_USD:.4f}" in total
