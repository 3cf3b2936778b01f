"""What the archive keeps beside the trials: baselines, the winners' final and cross-process confirmations, fronts,
events, and the profile reports of trials and baselines.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from ...base.records import Measurement
from ...base.records.base import canonical_json
from . import integrity
from .connection import ArchiveError
from .macs import MacRecords

if TYPE_CHECKING:
    from ...base.records.confirm import CrossProcessConfirmation
    from ...base.records.profile import ProfileReport
    from ...base.records.base import Record
    from ...base.records.events import ArchivedEvent, Event


class ResultRecords(MacRecords):
    """Baselines, finals, confirmations, fronts, events and profiles of `store.Archive`."""

    def put_baseline(self, run_id: str, workload_id: str, name: str, measurement: Measurement | None,
                     note: str = "") -> None:
        """Store (or replace) baseline `name` on a workload; `measurement` None when it could not run."""
        with self.transaction(f"put baseline {name!r} of run {run_id!r}") as conn:
            conn.execute(
                "INSERT INTO baselines(run_id, workload_id, name, json, note) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT(run_id, workload_id, name) DO UPDATE SET json = excluded.json, note = excluded.note",
                (run_id, workload_id, name, measurement.to_json() if measurement is not None else None, note))
            r = conn.execute("SELECT json, note FROM baselines WHERE run_id = ? AND workload_id = ? AND name = ?",
                             (run_id, workload_id, name)).fetchone()
            self._write_mac(conn, run_id, "baseline", f"{workload_id}|{name}",
                            [run_id, workload_id, name, r["json"], r["note"]])

    def baselines(self, run_id: str, workload_id: str) -> dict[str, tuple[Measurement | None, str]]:
        """Baselines of a workload: name -> (measurement or None, note)."""
        with self.reading(f"list baselines of run {run_id!r}") as conn:
            rows = conn.execute("SELECT name, json, note FROM baselines WHERE run_id = ? AND workload_id = ?"
                                " ORDER BY name", (run_id, workload_id)).fetchall()
            ok = {r["name"]: self._row_ok(conn, run_id, "baseline", f"{workload_id}|{r['name']}",
                                          [run_id, workload_id, r["name"], r["json"], r["note"]]) for r in rows}
        return {r["name"]: (Measurement.from_json(r["json"]) if r["json"] is not None else None, r["note"])
                if ok[r["name"]] else (None, integrity.TAMPERED_MESSAGE) for r in rows}

    def put_final(self, run_id: str, workload_id: str, candidate_id: str, measurement: Measurement) -> None:
        """Store (or replace) the confirmation measurement of the best candidate on a workload.

        The candidate and workload must be archived (they are, once a trial of them is recorded).
        """
        with self.transaction(f"put final of run {run_id!r} on {workload_id}") as conn:
            conn.execute(
                "INSERT INTO finals(run_id, workload_id, candidate_id, json) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(run_id, workload_id) DO UPDATE SET candidate_id = excluded.candidate_id,"
                " json = excluded.json",
                (run_id, workload_id, candidate_id, measurement.to_json()))
            self._write_mac(conn, run_id, "final", workload_id,
                            [run_id, workload_id, candidate_id, measurement.to_json()])

    def finals(self, run_id: str) -> dict[str, tuple[str, Measurement]]:
        """Final confirmations of a run: workload_id -> (candidate_id, measurement)."""
        with self.reading(f"list finals of run {run_id!r}") as conn:
            rows = conn.execute("SELECT workload_id, candidate_id, json FROM finals WHERE run_id = ?"
                                " ORDER BY workload_id", (run_id,)).fetchall()
            rows = [r for r in rows if self._row_ok(conn, run_id, "final", r["workload_id"],
                                                    [run_id, r["workload_id"], r["candidate_id"], r["json"]])]
        return {r["workload_id"]: (r["candidate_id"], Measurement.from_json(r["json"])) for r in rows}

    def put_confirmation(self, run_id: str, confirmation: "CrossProcessConfirmation") -> None:
        """Store (or replace) the cross-process confirmation of a workload's winner."""
        with self.transaction(f"put confirmation of run {run_id!r} on {confirmation.workload_id}") as conn:
            conn.execute("INSERT INTO confirmations(run_id, workload_id, json) VALUES (?, ?, ?)"
                         " ON CONFLICT(run_id, workload_id) DO UPDATE SET json = excluded.json",
                         (run_id, confirmation.workload_id, confirmation.to_json()))
            self._write_mac(conn, run_id, "confirmation", confirmation.workload_id,
                            [run_id, confirmation.workload_id, confirmation.to_json()])

    def confirmations(self, run_id: str) -> dict[str, "CrossProcessConfirmation"]:
        """Cross-process confirmations of a run: workload_id -> record (none for runs confirmed in one process)."""
        from ...base.records.confirm import CrossProcessConfirmation
        with self.reading(f"list confirmations of run {run_id!r}") as conn:
            rows = conn.execute("SELECT workload_id, json FROM confirmations WHERE run_id = ? ORDER BY workload_id",
                                (run_id,)).fetchall()
            rows = [r for r in rows if self._row_ok(conn, run_id, "confirmation", r["workload_id"],
                                                    [run_id, r["workload_id"], r["json"]])]
        return {r["workload_id"]: CrossProcessConfirmation.from_json(r["json"]) for r in rows}

    def set_front(self, run_id: str, workload_id: str, entries: list[tuple[str, dict]]) -> None:
        """Replace the workload's front with `entries` (candidate_id, objectives) in one transaction."""
        with self.transaction(f"set front of run {run_id!r} on {workload_id}") as conn:
            conn.execute("DELETE FROM fronts WHERE run_id = ? AND workload_id = ?", (run_id, workload_id))
            conn.executemany(
                "INSERT INTO fronts(run_id, workload_id, candidate_id, pos, objectives_json) VALUES (?, ?, ?, ?, ?)",
                [(run_id, workload_id, cid, pos, canonical_json(obj)) for pos, (cid, obj) in enumerate(entries)])
            self._write_mac(conn, run_id, "front", workload_id, integrity.front_fields(conn, run_id, workload_id))

    def front(self, run_id: str, workload_id: str) -> list[tuple[str, dict]]:
        """The workload's front as last set: [(candidate_id, objectives)] in the order given."""
        with self.reading(f"get front of run {run_id!r}") as conn:
            rows = conn.execute("SELECT candidate_id, objectives_json FROM fronts WHERE run_id = ? AND workload_id = ?"
                                " ORDER BY pos", (run_id, workload_id)).fetchall()
            if rows and not self._row_ok(conn, run_id, "front", workload_id,
                                         integrity.front_fields(conn, run_id, workload_id)):
                return []   # an edited front is no front: readers rebuild nothing from it
        return [(r["candidate_id"], json.loads(r["objectives_json"])) for r in rows]

    # ------------------------------------------------------------------ events

    def log_event(self, run_id: str, event: "Event | str", payload: "dict | Record | None" = None) -> None:
        """Append an event of the run's log: an `Event` record (base/records/events.py), or a kind and its payload,
        validated through the same union first (a known kind's payload must fit its record; another kind is kept as
        an `OtherEvent`). Payloads must be JSON-able, no NaN."""
        from ...base.records.events import event_of, payload_dict
        if isinstance(event, str):
            event = event_of(event, payload if payload is not None else {})
        elif payload is not None:
            raise TypeError("log_event takes an Event record, or a kind and its payload")
        with self.transaction(f"log event {event.kind!r} of run {run_id!r}") as conn:
            conn.execute("INSERT INTO events(run_id, t, kind, json) VALUES (?, ?, ?, ?)",
                         (run_id, time.time(), event.kind, canonical_json(payload_dict(event))))

    def event_records(self, run_id: str, kind: str | None = None) -> list["ArchivedEvent"]:
        """The run's events in logging order, each read back through the `Event` union (a kind it does not type, or
        an older payload that does not fit its kind's record, as an `OtherEvent`), optionally of one kind."""
        from ...base.records.events import ArchivedEvent, read_event
        sql, args = "SELECT seq, t, kind, json FROM events WHERE run_id = ?", [run_id]
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        with self.reading(f"list events of run {run_id!r}") as conn:
            rows = conn.execute(sql + " ORDER BY seq", args).fetchall()
        return [ArchivedEvent(seq=r["seq"], t=r["t"], event=read_event(r["kind"], json.loads(r["json"])))
                for r in rows]

    def events(self, run_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        """The run's events as plain data, [{'seq', 't', 'kind', 'payload'}] (`event_records`, each payload dumped
        back to the mapping it is stored as), optionally one kind."""
        from ...base.records.events import payload_dict
        return [{"seq": e.seq, "t": e.t, "kind": e.kind, "payload": payload_dict(e.event)}
                for e in self.event_records(run_id, kind)]

    # ------------------------------------------------------------------ profiles (schema version 2)

    def put_profile(self, run_id: str, trial_id: str, report: "ProfileReport") -> None:
        """Store (or replace) the profile report of one of the run's trials.

        Raises ArchiveError if the run has no trial with this id, or if the report is about another trial.
        """
        if report.trial_id != trial_id:
            raise ArchiveError(f"put profile of trial {trial_id}: the report is about trial {report.trial_id}")
        what = f"put profile of trial {trial_id} in run {run_id!r}"
        with self.transaction(what) as conn:
            if conn.execute("SELECT 1 FROM trials WHERE run_id = ? AND id = ?", (run_id, trial_id)).fetchone() is None:
                raise ArchiveError(f"{what}: the run has no such trial")
            conn.execute(
                "INSERT INTO profiles(run_id, trial_id, json) VALUES (?, ?, ?)"
                " ON CONFLICT(run_id, trial_id) DO UPDATE SET json = excluded.json",
                (run_id, trial_id, report.to_json()))

    def profile(self, run_id: str, trial_id: str) -> "ProfileReport | None":
        """The stored profile report of a trial, or None."""
        from ...base.records.profile import ProfileReport
        with self.reading(f"get profile of trial {trial_id} in run {run_id!r}") as conn:
            row = conn.execute("SELECT json FROM profiles WHERE run_id = ? AND trial_id = ?",
                               (run_id, trial_id)).fetchone()
        return None if row is None else ProfileReport.from_json(row["json"])

    # ------------------------------------------------------------------ baseline profiles (schema version 3)

    def put_baseline_profile(self, run_id: str, workload_id: str, name: str, report: "ProfileReport") -> None:
        """Store (or replace) the profile report of baseline `name` on one of the run's workloads.

        Raises ArchiveError if the run does not exist, or if the report is about another baseline or workload.
        """
        what = f"put profile of baseline {name!r} on {workload_id} in run {run_id!r}"
        if report.baseline != name or report.workload_id != workload_id:
            raise ArchiveError(f"{what}: the report is about baseline {report.baseline!r} on {report.workload_id}")
        with self.transaction(what) as conn:
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                raise ArchiveError(f"{what}: no such run")
            conn.execute(
                "INSERT INTO baseline_profiles(run_id, workload_id, name, json) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(run_id, workload_id, name) DO UPDATE SET json = excluded.json",
                (run_id, workload_id, name, report.to_json()))

    def baseline_profile(self, run_id: str, workload_id: str, name: str) -> "ProfileReport | None":
        """The stored profile report of a baseline on a workload, or None."""
        from ...base.records.profile import ProfileReport
        with self.reading(f"get profile of baseline {name!r} on {workload_id} in run {run_id!r}") as conn:
            row = conn.execute("SELECT json FROM baseline_profiles WHERE run_id = ? AND workload_id = ? AND name = ?",
                               (run_id, workload_id, name)).fetchone()
        return None if row is None else ProfileReport.from_json(row["json"])

    def baseline_profiles(self, run_id: str, workload_id: str | None = None) -> list["ProfileReport"]:
        """Every stored baseline profile of the run (of one workload), by workload and name."""
        from ...base.records.profile import ProfileReport
        sql, args = "SELECT json FROM baseline_profiles WHERE run_id = ?", [run_id]
        if workload_id is not None:
            sql += " AND workload_id = ?"
            args.append(workload_id)
        with self.reading(f"list baseline profiles of run {run_id!r}") as conn:
            rows = conn.execute(sql + " ORDER BY workload_id, name", args).fetchall()
        return [ProfileReport.from_json(r["json"]) for r in rows]
