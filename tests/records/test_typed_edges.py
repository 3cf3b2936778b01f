"""Typed records at the outer edges: the run summary's `prior` and `llm` sections are records (a wrong field type is
refused, an older summary still loads), and no record of base/records holds a loose `Any`/`dict` field outside the
allow-list below. The event kinds: tests/archive/test_event_kinds.py."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import kernelloop.base.records as records
from kernelloop.base.records.gate import GateDecision
from kernelloop.base.records.llm import LLMSection
from kernelloop.base.records.summary import RunSummary, WarmStart
from kernelloop.core.archive import Archive

ARCHIVES = Path(__file__).resolve().parents[1] / "fixtures" / "archives"

# Fields of base/records allowed to stay loose, each with its reason. A field typed since must leave this list.
ALLOWED = {
    ("Candidate", "config"): "template parameters as the op's template declares them (JSON scalars); the candidate "
                             "id hashes them exactly as written",
    ("FailurePayload", "case"): "the verifier's case (core/execute/battery.case_record, or the timed case): its "
                                "own record is still to come",
    ("FailedTrial", "case"): "the same failure case, read back from the `failure` event",
    ("Measurement", "environment"): "the clocks/temperature snapshot as NVML gives it; keys vary by driver and GPU",
    ("OtherEvent", "payload"): "the fallback itself: a kind an extension writes, or a payload an older kernelloop "
                               "wrote that does not fit its kind's record",
}
# Records that keep fields they do not declare (`extra="allow"`), each with its reason.
EXTRA_ALLOWED = {
    "FrontEntry": "objectives of older archives",
    "PruneSummary": "prune events of older archives",
    "SearchDecision": "each search strategy's own decision fields beside the typed ones",
}


def loose(t: Any) -> bool:
    """Any, a bare dict, or a container of Any, anywhere in the annotation."""
    if t is Any or t is dict or t is object:
        return True
    return any(loose(a) for a in typing.get_args(t) if a is not Ellipsis)


def record_classes():
    for m in pkgutil.iter_modules(records.__path__):
        mod = importlib.import_module(f"{records.__name__}.{m.name}")
        for cls in vars(mod).values():
            if inspect.isclass(cls) and issubclass(cls, BaseModel) and cls.__module__ == mod.__name__:
                yield cls


def test_the_loose_field_check_finds_loose_fields():
    assert all(loose(t) for t in (Any, dict, dict[str, Any], list[Any], dict[str, Any] | None, dict[str, list[Any]]))
    assert not any(loose(t) for t in (dict[str, int], list[str], GateDecision | None, dict[str, tuple[float, float]]))


def test_no_record_has_a_loose_field_outside_the_allow_list():
    found = {(cls.__name__, f) for cls in record_classes() for f, info in cls.model_fields.items()
             if loose(info.annotation)}
    assert found - set(ALLOWED) == set(), "a record field typed Any/dict: give it a record (or a reason here)"
    assert set(ALLOWED) - found == set(), "typed since: take it off the allow-list"
    extra = {cls.__name__ for cls in record_classes() if cls.model_config.get("extra") == "allow"}
    assert extra == set(EXTRA_ALLOWED)


@pytest.fixture(scope="module")
def summary_json() -> dict:
    from kernelloop.deliver.report.summary import run_summary
    with Archive(ARCHIVES / "cpu-rmsnorm-interpreter.sqlite.xz", readonly=True) as a:
        return run_summary(a).model_dump(mode="json")


def test_an_old_shaped_summary_still_loads(summary_json):
    """A summary JSON written before `prior` and `llm` were records: one recording at the top, integer sums."""
    old = {**summary_json, "prior": {"path": "old.space", "sha256": "ab" * 32, "configurations": 12},
           "llm": {"total": {"calls": 2, "errors": 0, "input_tokens": 10, "output_tokens": 5, "cached_tokens": 0,
                             "cache_write_tokens": 0, "latency_s": 0.5, "usd": 0.0, "unpriced_calls": 2},
                   "by_role": {}, "by_model": {}, "per_trial": {}, "unattributed": {"calls": 0, "errors": 0,
                   "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "cache_write_tokens": 0,
                   "latency_s": 0, "usd": 0.0, "unpriced_calls": 0}, "replayed_calls": 0, "inexact_replays": 0,
                   "prompt_hashes": [], "proposers": ["llm:m"], "stops": [{"workload": "w-1", "reason": "stop"}]}}
    s = RunSummary.model_validate(json.loads(json.dumps(old)))
    assert isinstance(s.prior, WarmStart) and [(f.path, f.sha256) for f in s.prior.files] == [("old.space", "ab" * 32)]
    assert isinstance(s.llm, LLMSection) and s.llm.total.calls == 2 and s.llm.stops[0].reason == "stop"
    again = s.model_dump(mode="json")
    assert again["prior"]["path"] == "old.space" and again["llm"]["proposers"] == ["llm:m"]
    assert RunSummary.model_validate(again) == s


def test_several_recordings_have_no_top_path():
    w = WarmStart.model_validate({"files": [{"path": "a", "sha256": "1"}, {"path": "b", "sha256": "2"}],
                                  "configurations": 3})
    assert w.model_dump(mode="json") == {"files": [{"path": "a", "sha256": "1"}, {"path": "b", "sha256": "2"}],
                                         "configurations": 3}


@pytest.mark.parametrize("field,value", [
    ("prior", "old.space"), ("prior", {"files": [], "configurations": 3}),
    ("prior", {"files": [{"path": "a", "sha256": "1"}], "configurations": "many"}),
    ("llm", {"total": {"calls": "ten"}}), ("llm", {"total": {}, "stops": ["budget spent"]}),
    ("llm", {"total": {}, "cost": 1.0})])
def test_a_summary_with_a_wrong_field_type_is_refused(summary_json, field, value):
    with pytest.raises(ValidationError):
        RunSummary.model_validate({**summary_json, field: value})
