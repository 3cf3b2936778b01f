"""Every event kind kernelloop writes is a member of the `Event` union (base/records/events.py): the static gate's
decisions, capability gaps and the LLM proposer's `llm-*` events are written and read back as their records, a
payload with a wrong field type is refused when written, and an older payload of these kinds still loads."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from pydantic import ValidationError

from kernelloop.base.records.events import (CapabilityGapEvent, GateEvent, LLMCallEvent, LLMProposerEvent,
                                            LLMStepEvent, LLMStopEvent, OtherEvent, event_of, payload_dict)
from kernelloop.base.records.gate import GateDecision, GateFinding
from kernelloop.base.records.gaps import CapabilityGap
from kernelloop.core.archive import Archive

from test_store import MANIFEST, MHASH, RUN, make_env, make_spec

GATE = GateDecision(candidate_id="c-1", workload_id="w-1", template="ws", passed=False,
                    findings=[GateFinding(check="registers", field="regs", message="255 > 168")], enforced=False)
GAP = CapabilityGap(op="gemm", kind="refused_edit", need="a third stage", field="stages", source="gate")
CALL = {"step": "s-1", "role": "planner", "workload": "w-1", "candidates": ["c-1"], "provider": "openai", "model": "m",
        "answered_by": "m", "prompt_hash": "p" * 8, "prompt_version": "v1", "key": "k-1", "occurrence": 0,
        "request": "a" * 8, "response": "b" * 8, "input_tokens": 1000, "output_tokens": 200, "cached_tokens": 400,
        "cache_write_tokens": 0, "latency_s": 1.5, "usd": 0.01, "error": None, "rejected": "", "replayed": False,
        "exact": True}
STEP = {"step": "s-1", "workload": "w-1", "roles": ["planner", "coder"], "candidates": ["c-1"], "error": "",
        "invalid": [], "plan": {"direction": "wider blocks", "rationale": "memory-bound", "parent_ids": []},
        "rationale": "why", "cites": ["F1"],
        "hypothesis": {"metrics": [{"metric": "latency_us", "direction": "down"}], "latency_change_pct": -10.0}}
PROPOSER = {"name": "llm:m", "prompt_version": "v1", "prompt_hash": "p" * 8, "mode": "record",
            "config": {"provider": "openai", "model": "m", "base_url": None, "api_key_env": None, "timeout_s": 2.0,
                       "retries": 1, "max_tokens": 8192, "max_tokens_field": "max_tokens", "temperature": 0.0,
                       "seed": None, "json_mode": False},
            "budget": {"candidates": 8, "calls": 40, "debug_attempts": 2}}
WRITTEN = [("gate", GATE.model_dump(mode="json"), GateEvent), ("capability-gap", GAP.model_dump(mode="json"),
           CapabilityGapEvent), ("llm-call", CALL, LLMCallEvent), ("llm-step", STEP, LLMStepEvent),
           ("llm-stop", {"workload": "w-1", "reason": "call budget of 4 spent"}, LLMStopEvent),
           ("llm-proposer", PROPOSER, LLMProposerEvent)]


@pytest.fixture
def arch(tmp_path: Path):
    with Archive(tmp_path / "a.sqlite") as a:
        a.create_run(RUN, make_spec(), MANIFEST, MHASH, make_env(), {})
        yield a


def test_every_kind_kernelloop_writes_reads_back_as_its_record(arch):
    for kind, payload, event in WRITTEN:
        arch.log_event(RUN, kind, payload)
    got = arch.event_records(RUN)
    assert [type(e.event) for e in got] == [e for _, _, e in WRITTEN]
    assert got[0].payload == GATE and got[1].payload == GAP
    assert got[3].payload.plan.direction == "wider blocks" and got[3].payload.hypothesis.latency_change_pct == -10
    assert [e["payload"] for e in arch.events(RUN)][:2] == [GATE.model_dump(mode="json"),
                                                              GAP.model_dump(mode="json")]


@pytest.mark.parametrize("kind,change", [
    ("gate", {"passed": "maybe"}), ("gate", {"findings": [{"check": "vibes", "message": "x"}]}),
    ("capability-gap", {"kind": "wish"}), ("capability-gap", {"expected_change_pct": "much"}),
    ("llm-call", {"input_tokens": "many"}), ("llm-call", {"candidates": "c-1"}),
    ("llm-step", {"roles": "planner"}), ("llm-step", {"hypothesis": {"metrics": [], "latency_change_pct": 1}}),
    ("llm-stop", {"reason": 3}), ("llm-proposer", {"mode": "live"}),
    ("llm-proposer", {"config": {**PROPOSER["config"], "api_key": "sk-1"}})])
def test_a_wrong_field_type_is_refused_when_written(arch, kind, change):
    payload = next(p for k, p, _ in WRITTEN if k == kind)
    with pytest.raises(ValidationError):
        arch.log_event(RUN, kind, {**payload, **change})
    assert arch.events(RUN) == []


def test_older_payloads_of_these_kinds_still_load(arch, tmp_path):
    old = {"gate": {"candidate": "c-1", "rejected": False}, "llm-call": {"role": "planner", "tokens": 12}}
    with sqlite3.connect(tmp_path / "a.sqlite") as conn:
        for kind, payload in old.items():
            conn.execute("INSERT INTO events(run_id, t, kind, json) VALUES (?, ?, ?, ?)",
                         (RUN, 1.0, kind, json.dumps(payload)))
    got = arch.event_records(RUN)
    assert [type(e.event) for e in got] == [OtherEvent, OtherEvent]
    assert [payload_dict(e.event) for e in got] == list(old.values())
    assert type(event_of("my-extension", {"x": 1})) is OtherEvent
