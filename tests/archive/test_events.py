"""The event log through the `Event` union (base/records/events.py): written as records, read back as the same
records; other kinds and older payloads load as `OtherEvent`; recorded archives read with every event typed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from pydantic import ValidationError

from kernelloop.base.records.events import (BudgetEvent, BudgetPayload, OtherEvent, PruneEvent, PrunePayload,
                                            SearchEvent, TransportEvent, event_of, payload_dict)
from kernelloop.core.archive import Archive

from test_store import MANIFEST, MHASH, RUN, make_env, make_spec

ARCHIVES = Path(__file__).resolve().parents[1] / "fixtures" / "archives"


@pytest.fixture
def arch(tmp_path: Path):
    with Archive(tmp_path / "a.sqlite") as a:
        a.create_run(RUN, make_spec(), MANIFEST, MHASH, make_env(), {})
        yield a


def test_typed_events_round_trip_as_records_and_as_the_old_mapping(arch):
    prune = PruneEvent(payload=PrunePayload(workload="w-1", label="M=4", template="rowwise", total=8, kept=6,
                                            pruned=2, reasons={"threads per program > 1024": 2}))
    wall = BudgetEvent(payload=BudgetPayload(reason="wall time", seconds=60.0))
    arch.log_event(RUN, prune)
    arch.log_event(RUN, wall)
    arch.log_event(RUN, "search", {"workload": "w-1", "kind": "supervisor", "action": "polish", "incumbent": 3})
    got = arch.event_records(RUN)
    assert [e.event for e in got[:2]] == [prune, wall]
    search = got[2].event
    assert isinstance(search, SearchEvent) and search.payload.kind == "supervisor"
    assert search.payload.model_extra == {"action": "polish", "incumbent": 3}   # a strategy's own fields, kept
    plain = arch.events(RUN)
    assert plain[1]["payload"] == {"reason": "wall time", "seconds": 60.0}     # unset fields are not written
    assert plain[0]["payload"]["reasons"] == {"threads per program > 1024": 2}
    assert [e.kind for e in arch.event_records(RUN, "budget")] == ["budget"]


def test_a_known_kind_with_a_payload_that_does_not_fit_is_refused_when_written(arch):
    with pytest.raises(ValidationError):
        arch.log_event(RUN, "transport", {"device": "cuda:0"})        # no transport, no reason
    with pytest.raises(ValidationError):
        arch.log_event(RUN, "budget", {"reason": "evaluations", "seconds": 1})
    with pytest.raises(TypeError):
        arch.log_event(RUN, TransportEvent(payload={"device": "cuda", "transport": "host-arena", "reason": "x"}), {})
    assert arch.events(RUN) == []


def test_other_kinds_and_older_payloads_still_load(arch, tmp_path):
    arch.log_event(RUN, "my-extension", {"candidate": "c-1", "rejected": False})   # a kind the union does not know
    (ext,) = arch.event_records(RUN, "my-extension")
    assert isinstance(ext.event, OtherEvent) and ext.payload == {"candidate": "c-1", "rejected": False}
    # an older kernelloop's `prune` payload (other keys): read back as it was written, not refused
    with sqlite3.connect(tmp_path / "a.sqlite") as conn:
        conn.execute("INSERT INTO events(run_id, t, kind, json) VALUES (?, ?, ?, ?)",
                     (RUN, 1.0, "prune", json.dumps({"template": "rowwise", "removed": 3})))
    (old,) = arch.event_records(RUN, "prune")
    assert isinstance(old.event, OtherEvent) and old.payload == {"template": "rowwise", "removed": 3}
    assert type(old.model_validate_json(old.model_dump_json()).event) is OtherEvent   # stays the fallback
    assert payload_dict(event_of("note", {"x": 1})) == {"x": 1}


@pytest.mark.parametrize("name", ["h200-layernorm-planner.sqlite.xz", "h200-attention-exhaustive.sqlite.xz"])
def test_recorded_archives_read_with_every_event_typed(name):
    with Archive(ARCHIVES / name, readonly=True) as a:
        rid = a.runs()[0]["id"]
        records, plain = a.event_records(rid), a.events(rid)
    assert records and not [e.kind for e in records if isinstance(e.event, OtherEvent)]
    assert [e["payload"] for e in plain] == [payload_dict(e.event) for e in records]
