"""The LLM proposer's decisions, driven directly (no controller): stop, provider down, repair limits, duplicate
proposals, transfer of a passing kernel to another workload, the debugger's budget, and its events."""

import json

from llm_script import stored, GOOD, WRONG, ScriptedLLMServer, plan, proposal
from kernelloop.tune.propose.llm import Cassette, LLMBudget, LLMClient, LLMConfig, LLMProposer, OpenAIProvider, load_prompts
from kernelloop.base.records import Status, Trial, Verdict, Workload

W1 = Workload(op="layernorm", axes={"M": 4, "N": 64}, dtype="fp16")
W2 = Workload(op="layernorm", axes={"M": 8, "N": 64}, dtype="fp16")


def make(layernorm, server_url, tmp_path, budget=LLMBudget(), workloads=(W1,)):
    cfg = LLMConfig(provider="openai", model="m", base_url=server_url, timeout_s=2.0, retries=1)
    client = LLMClient(cfg, Cassette(tmp_path / "llm", "record"), OpenAIProvider(cfg))
    events = []
    p = LLMProposer(layernorm, list(workloads), client, load_prompts(), device="interpret", kb=None, budget=budget,
                    sink=lambda run_id, evs: events.extend(stored(evs)))
    return p, events


def trial(cand, w, status, message="planned failure", index=0):
    return Trial(run_id="r-test", index=index, candidate_id=cand.id, workload_id=w.id, manifest_hash="m-x",
                 verdict=Verdict(status=status, message=message if status is not Status.PASSED else ""),
                 started=0.0, finished=0.0)


def test_planner_stop_and_events(layernorm, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-stored-1234")
    with ScriptedLLMServer([{"content": plan("nothing left", stop=True)}]) as server:
        p, events = make(layernorm, server.base_url, tmp_path)
        assert p.ask(W1) is None and p.ask(W1) is None, "a stopped workload asks nothing more"
        assert len(server.requests) == 1
    p.finish("r-test")
    kinds = [k for k, _ in events]
    assert kinds == ["llm-proposer", "llm-call", "llm-step", "llm-stop"]
    assert events[0][1]["prompt_hash"] == load_prompts().hash
    stored = json.dumps(events) + "".join(f.read_text() for f in (tmp_path / "llm").rglob("*") if f.is_file())
    assert "sk-never-stored" not in stored, "the key reaches neither the archive nor the recording"
    assert "planner: stop" in events[3][1]["reason"]


def test_provider_down_stops_after_retries(layernorm, tmp_path):
    p, events = make(layernorm, "http://127.0.0.1:9/v1", tmp_path)
    assert p.ask(W1) is None
    p.finish("r-test")
    calls = [e for k, e in events if k == "llm-call"]
    assert len(calls) == 2 and all(c["error"].startswith("connection") for c in calls)
    assert "provider failed 2 times" in p.done[W1.id]


def test_invalid_answers_are_repaired_then_a_new_plan_is_made(layernorm, tmp_path):
    script = [{"content": plan("a")}, {"content": "no json"}, {"content": "{}"}, {"content": "[1]"},
              {"content": plan("b")}, {"content": proposal(source=GOOD, config={"BLOCK": 64})}]
    with ScriptedLLMServer(script) as server:
        p, events = make(layernorm, server.base_url, tmp_path)
        cand = p.ask(W1)
        bodies = [r["body"] for r in server.requests]
    assert cand is not None and cand.source == GOOD and cand.config == {"BLOCK": 64}
    assert len(bodies) == 6
    assert "Role: planner" in bodies[4]["messages"][-1]["content"], "after 3 invalid answers the step ends"
    assert len(bodies[3]["messages"]) == 6, "each repair continues the same conversation"
    assert "source" in bodies[3]["messages"][-1]["content"] or "schema" in bodies[3]["messages"][-1]["content"]
    assert [k for k, _ in events] == [], "events wait for the run id"
    p.finish("r-test")
    steps = [e for k, e in events if k == "llm-step"]
    assert steps[0]["error"].startswith("3 invalid answers") and steps[1]["candidates"] == [cand.id]


def test_duplicates_rejected_transfer_and_debug_budget(layernorm, tmp_path):
    script = [
        {"content": plan("first")}, {"content": proposal(source=GOOD, config={"BLOCK": 64})},           # W1: c1
        {"content": plan("again")}, {"content": proposal(source=GOOD, config={"BLOCK": 64})},           # duplicate
        {"content": proposal(source=WRONG, config={"BLOCK": 64})},                                       # W1: c2
        {"content": proposal(source=WRONG, config={"BLOCK": 64, "num_warps": 2})},                       # debug: c3
        {"content": plan("third")}, {"content": proposal(source=GOOD, config={"BLOCK": 64, "num_warps": 8})},
    ]
    with ScriptedLLMServer(script) as server:
        p, events = make(layernorm, server.base_url, tmp_path, budget=LLMBudget(debug_attempts=1),
                         workloads=(W1, W2))
        c1 = p.ask(W1)
        p.tell(c1, W1, trial(c1, W1, Status.PASSED))
        # W2 gets the kernel that passed on W1, without a call
        n = len(server.requests)
        assert p.ask(W2) == c1 and len(server.requests) == n
        c2 = p.ask(W1)
        assert "already evaluated" in server.requests[4]["body"]["messages"][-1]["content"]
        p.tell(c2, W1, trial(c2, W1, Status.COMPILE_ERROR, "InterpreterError: planned", index=1))
        c3 = p.ask(W1)
        debug = server.requests[5]["body"]["messages"][-1]["content"]
        assert "Role: debugger" in debug and "InterpreterError: planned" in debug and "attempt 1 of 1" in debug
        p.tell(c3, W1, trial(c3, W1, Status.COMPILE_ERROR, index=2))
        c4 = p.ask(W1)   # the lineage's debug budget is spent: back to the planner
        assert "Role: planner" in server.requests[6]["body"]["messages"][-1]["content"]
        assert c4.config == {"BLOCK": 64, "num_warps": 8} and server.script == []
    assert p.debug_root[c3.id] == c2.id
