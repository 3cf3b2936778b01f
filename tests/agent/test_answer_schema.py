"""The agent answer's and status's JSON schemas written into every workspace are the records', and the answer record
writes the JSON shape agents read: optional keys only when set, in the order they have always had."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from kernelloop.deliver.agent.answer import (AnswerCandidate, ParentResult, StaticRuleHit, SubmitAnswer, WorkloadAnswer,
                                     answer_schema)
from kernelloop.base.records import Costs



@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    from kernelloop.base.builtin import ops_dir
    from kernelloop.deliver.agent import init_workspace
    base = tmp_path_factory.mktemp("ws")
    wl = base / "wl.toml"
    wl.write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp16"\n')
    return init_workspace(ops_dir() / "layernorm", base / "ws", workloads_file=wl, checks=1, device="interpret").root


def test_the_workspace_carries_the_answer_schema_of_the_record(workspace):
    published = json.loads((workspace / "answer.schema.json").read_text())
    assert published == answer_schema() == SubmitAnswer.model_json_schema(mode="serialization")
    assert "ProfileReport" in published["$defs"]      # the CUDA profile an answer may carry is described too


def test_the_workspace_carries_the_status_schema_of_the_record(workspace):
    from kernelloop.deliver.agent.status_records import WorkspaceStatus, status_schema
    published = json.loads((workspace / "status.schema.json").read_text())
    assert published == status_schema() == WorkspaceStatus.model_json_schema(mode="serialization")
    assert set(published["properties"]) >= {"workspace", "op", "device", "workloads", "recent", "baseline"}


def _result(**extra) -> WorkloadAnswer:
    return WorkloadAnswer(workload="w[4]:fp16", workload_id="w-1", candidate="c-1", label="t(A=1)", trial="t-1",
                          index=0, status="PASSED", message="", build=None, measurement=None,
                          costs=Costs(compile_s=0.0, verify_s=0.0, bench_s=0.0, wall_s=0.0), on_front=True, **extra)


def test_optional_keys_appear_only_when_set_in_their_place():
    plain = _result().model_dump(mode="json")
    assert list(plain) == ["workload", "workload_id", "candidate", "label", "trial", "index", "status", "message",
                           "build", "measurement", "costs", "on_front"]
    failed = _result(reason="r", failing_case=None, error_metrics=[], log_tail="",
                     parents=[ParentResult(candidate="c-0", status="PASSED", kernel_us=None)],
                     previously_archived=False).model_dump(mode="json")
    assert list(failed)[11:] == ["reason", "failing_case", "error_metrics", "log_tail", "on_front", "parents",
                                 "previously_archived"]
    assert failed["failing_case"] is None and failed["parents"] == [{"candidate": "c-0", "status": "PASSED",
                                                                     "kernel_us": None}]
    hit = StaticRuleHit(rule="r", line=None, source="s", why="w")
    cand = AnswerCandidate(id="c", label="l", template="t", config={}, parent_ids=[], proposer="p", hypothesis="",
                           static_rules=[hit])
    assert cand.model_dump(mode="json")["static_rules"] == [{"rule": "r", "line": None, "source": "s", "why": "w"}]
    answer = SubmitAnswer(workspace="ws", run="r", device="interpret", interpreter=True, verdict="PASSED",
                          candidates=[cand], results=[_result()])
    assert json.loads(answer.model_dump_json()) == answer.as_json()
    assert SubmitAnswer.model_validate(answer.as_json()) == answer


def test_the_profile_of_a_result_is_a_record():
    """The `profile` of a CUDA result: a status from its list, a note without a report; another shape is refused."""
    r = WorkloadAnswer.model_validate({**_result().model_dump(), "profile": {"status": "unavailable", "note": "no ncu"}})
    assert r.profile.status == "unavailable" and r.model_dump(mode="json")["profile"] == {"status": "unavailable",
                                                                                            "note": "no ncu"}
    for bad in ({"status": "skipped"}, {"status": "ok", "report": "a report"}, {"status": "ok", "seconds": 3}):
        with pytest.raises(ValidationError):
            WorkloadAnswer.model_validate({**_result().model_dump(), "profile": bad})
