"""The LLM proposer on schedules, with a scripted server: a schedule edit the static gate refuses goes back to the
coder with the gate's message (field named) and is archived as a capability gap; the repaired edit becomes a
candidate lowered from the edited schedule; a planner that states what it cannot express leaves a gap event."""

import json

from llm_script import stored, ScriptedLLMServer, plan
from kernelloop.base.builtin import ops_dir
from kernelloop.tune.gaps import GAP_EVENT, CapabilityGap
from kernelloop.tune.propose.llm import Cassette, LLMClient, LLMConfig, LLMProposer, OpenAIProvider, load_prompts
from kernelloop.base.records import Workload
from kernelloop.tune.schedule.lower import schedule_of
from kernelloop.core.spec import load_op

W = Workload(op="gemm", axes={"M": 2048, "N": 4096, "K": 4096}, dtype="fp16")


def edit(patch, latency=-3.0) -> str:
    return json.dumps({"schedule": {"base": "schedule_ws", "patch": patch}, "rationale": "scripted",
                       "hypothesis": {"metrics": [{"metric": "latency_us", "direction": "down"}],
                                      "latency_change_pct": latency}})


def make(server_url, tmp_path):
    cfg = LLMConfig(provider="openai", model="m", base_url=server_url, timeout_s=5.0, retries=0)
    client = LLMClient(cfg, Cassette(tmp_path / "llm", "record"), OpenAIProvider(cfg))
    events = []
    p = LLMProposer(load_op(ops_dir() / "gemm"), [W], client, load_prompts(), device="interpret", kb=None,
                    sink=lambda run_id, evs: events.extend(stored(evs)))
    return p, events


def test_refused_edit_is_repaired_and_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    too_deep = edit([{"op": "replace", "path": "/ring/stages", "value": 4}])
    subtiled = edit([{"op": "replace", "path": "/issue/accumulators", "value": 2},
                     {"op": "replace", "path": "/ring/stages", "value": 4}], latency=-5.0)
    with ScriptedLLMServer([{"content": plan("one more stage")}, {"content": too_deep},
                            {"content": subtiled}]) as server:
        p, events = make(server.base_url, tmp_path)
        cand = p.ask(W)
        repair = server.requests[2]["body"]["messages"][-1]["content"]
    assert "ring.stages" in repair and "shared memory" in repair and "static gate" in repair
    sched = schedule_of(cand.source)
    assert sched.issue.accumulators == 2 and cand.config["num_stages"] == 4 and "latency_us down" in cand.hypothesis
    p.finish("r")
    gaps = [CapabilityGap.model_validate(e) for k, e in events if k == GAP_EVENT]
    assert [(g.kind, g.field, g.expected_change_pct) for g in gaps] == [("refused_edit", "ring.stages", -3.0)]


def test_planner_states_a_gap(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    step = json.loads(plan("fuse the bias into the epilogue", stop=True))
    step["gap"] = {"need": "a fused bias epilogue in the schedule lowering", "field": "epilogue.fused",
                   "expected_change_pct": -8}
    with ScriptedLLMServer([{"content": json.dumps(step)}]) as server:
        p, events = make(server.base_url, tmp_path)
        assert p.ask(W) is None
        assert len(server.requests) == 1
    p.finish("r")
    (g,) = [CapabilityGap.model_validate(e) for k, e in events if k == GAP_EVENT]
    assert (g.kind, g.field, g.expected_change_pct, g.workload_id) == ("inexpressible", "epilogue.fused", -8.0, W.id)
