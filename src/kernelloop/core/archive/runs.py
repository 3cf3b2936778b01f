"""The archive's runs, candidates (with their lineage), workloads and trials.

A resumed controller asks `find_trial` before evaluating a (candidate, workload) and `next_index` for the next trial
number; `record_trial` writes a trial with its candidate and workload in one transaction and refuses duplicates, so
nothing is lost or recorded twice.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from ...base.records import Candidate, Environment, OpSpec, Status, Trial, Workload
from ...base.records.base import canonical_json
from . import integrity
from .connection import ArchiveError
from .macs import MacRecords


def _status_value(status: Status | str) -> str:
    return status.value if isinstance(status, Status) else str(status)


def _tampered(trial: Trial) -> Trial:
    """The trial as readers must see a row that fails its MAC: TAMPERED, without a measurement."""
    verdict = trial.verdict.model_copy(update={"status": Status.TAMPERED, "message": integrity.TAMPERED_MESSAGE})
    return trial.model_copy(update={"verdict": verdict, "measurement": None})


def _decode_run(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "created": row["created"],
        "op": row["op"],
        "spec": json.loads(row["spec_json"]),
        "manifest": json.loads(row["manifest_json"]),
        "manifest_hash": row["manifest_hash"],
        "environment": json.loads(row["environment_json"]),
        "options": json.loads(row["options_json"]),
        "status": row["status"],
    }


class RunRecords(MacRecords):
    """Runs, candidates, workloads and trials of `store.Archive`."""

    def create_run(self, run_id: str, spec: OpSpec, manifest: dict, manifest_hash: str,
                   environment: Environment, options: dict, secret: str | None = None) -> None:
        """Create run `run_id`, or do nothing if it exists with the same manifest hash (resume).

        With the run's `secret` (sandbox/keys.run_secret), the run is MAC'd: the integrity marker and a MAC of every
        row it will have (core/archive/integrity.py). Without it the run is unauthenticated.

        Raises ArchiveError if the run exists under a different manifest hash: its trials were
        produced under another reference/verifier/policy/environment and must not be mixed.
        """
        what = f"create run {run_id!r}"
        with self.transaction(what) as conn:
            row = conn.execute("SELECT manifest_hash FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is not None:
                if row["manifest_hash"] != manifest_hash:
                    raise ArchiveError(
                        f"{what}: run already exists with manifest hash {row['manifest_hash']}, "
                        f"not {manifest_hash}; the reference, verifier, timing policy or environment "
                        "changed; start a new run instead of resuming this one")
                return
            conn.execute(
                "INSERT INTO runs(id, created, op, spec_json, manifest_json, manifest_hash, environment_json,"
                " options_json, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running')",
                (run_id, time.time(), spec.name, spec.to_json(), canonical_json(manifest), manifest_hash,
                 environment.to_json(), canonical_json(options)))
            if secret is not None:
                self.attach_secret(run_id, secret)
                conn.execute("INSERT INTO integrity(run_id, scheme) VALUES (?, ?)", (run_id, integrity.SCHEME))
                row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
                self._write_mac(conn, run_id, "run", "", integrity.run_fields(row))

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        """The run as a dict: id, created, op, spec, manifest, manifest_hash, environment, options,
        status (JSON fields decoded to dicts); None if absent."""
        with self.reading(f"get run {run_id!r}") as conn:
            row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else _decode_run(row)

    def set_run_status(self, run_id: str, status: str) -> None:
        """Set a run's status (a `kernelloop.base.records.RunStatus`: 'running' or 'complete')."""
        from ...base.records.run import RunStatus
        status = RunStatus(status).value
        what = f"set status of run {run_id!r}"
        with self.transaction(what) as conn:
            cur = conn.execute("UPDATE runs SET status = ? WHERE id = ?", (status, run_id))
            if cur.rowcount == 0:
                raise ArchiveError(f"{what}: no such run")

    def runs(self) -> list[dict[str, Any]]:
        """All runs, oldest first, shaped as `get_run` returns them."""
        with self.reading("list runs") as conn:
            rows = conn.execute("SELECT * FROM runs ORDER BY created, id").fetchall()
        return [_decode_run(r) for r in rows]

    # ------------------------------------------------------------------ candidates and workloads

    @staticmethod
    def _insert_candidate(conn: sqlite3.Connection, c: Candidate) -> bool:
        """Insert a candidate and its lineage edges unless its id is stored; True if inserted.

        Edges are written only with the row, so they always equal the stored record's parent_ids
        (the same source+config proposed again from other parents keeps its first lineage).
        """
        cur = conn.execute(
            "INSERT OR IGNORE INTO candidates(id, op, template, language, source, config_json, parent_ids_json,"
            " proposer, hypothesis, json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (c.id, c.op, c.template, c.language, c.source, canonical_json(c.config),
             canonical_json(c.parent_ids), c.proposer, c.hypothesis, c.to_json()))
        if cur.rowcount == 0:
            return False
        conn.executemany("INSERT OR IGNORE INTO lineage(child_id, parent_id) VALUES (?, ?)",
                         [(c.id, p) for p in c.parent_ids])
        return True

    @staticmethod
    def _insert_workload(conn: sqlite3.Connection, w: Workload) -> bool:
        cur = conn.execute("INSERT OR IGNORE INTO workloads(id, op, dtype, json) VALUES (?, ?, ?, ?)",
                           (w.id, w.op, w.dtype.value, w.to_json()))
        return cur.rowcount > 0

    def put_candidate(self, c: Candidate) -> None:
        """Store a candidate and its lineage edges; a no-op if its id is already stored."""
        with self.transaction(f"put candidate {c.id}") as conn:
            self._insert_candidate(conn, c)

    def get_candidate(self, cid: str) -> Candidate | None:
        """The stored candidate with id `cid`, or None."""
        with self.reading(f"get candidate {cid}") as conn:
            row = conn.execute("SELECT json FROM candidates WHERE id = ?", (cid,)).fetchone()
        return None if row is None else Candidate.from_json(row["json"])

    def ancestors(self, cid: str) -> list[str]:
        """Ids of every transitive parent of `cid`, nearest generation first (breadth-first).

        Safe against cycles: the recursive query deduplicates ids, so it terminates.
        """
        with self.reading(f"ancestors of {cid}") as conn:
            rows = conn.execute(
                """
                WITH RECURSIVE anc(id) AS (
                    SELECT parent_id FROM lineage WHERE child_id = :cid
                    UNION
                    SELECT l.parent_id FROM lineage AS l JOIN anc ON l.child_id = anc.id
                )
                SELECT id FROM anc WHERE id != :cid
                """, {"cid": cid}).fetchall()
        return [r["id"] for r in rows]

    def put_workload(self, w: Workload) -> None:
        """Store a workload; a no-op if its id is already stored."""
        with self.transaction(f"put workload {w.id}") as conn:
            self._insert_workload(conn, w)

    def get_workload(self, wid: str) -> Workload | None:
        """The stored workload with id `wid`, or None."""
        with self.reading(f"get workload {wid}") as conn:
            row = conn.execute("SELECT json FROM workloads WHERE id = ?", (wid,)).fetchone()
        return None if row is None else Workload.from_json(row["json"])

    # ------------------------------------------------------------------ trials

    @staticmethod
    def _insert_trial(conn: sqlite3.Connection, trial: Trial) -> None:
        m = trial.measurement
        conn.execute(
            "INSERT INTO trials(id, run_id, idx, candidate_id, workload_id, status, kernel_median_us,"
            " call_median_us, manifest_hash, started, finished, json)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (trial.id, trial.run_id, trial.index, trial.candidate_id, trial.workload_id,
             trial.verdict.status.value, m.kernel.median_us if m else None, m.call.median_us if m else None,
             trial.manifest_hash, trial.started, trial.finished, trial.to_json()))

    def record_trial(self, trial: Trial, candidate: Candidate, workload: Workload) -> bool:
        """Write candidate, workload and trial in one transaction; all of it lands or none does.

        Returns False, writing nothing, if the run already has a trial for this (candidate, workload).
        Raises ArchiveError if the run does not exist, was created under another manifest hash, or
        already used `trial.index` for another trial; ValueError if the records do not match.
        """
        if trial.candidate_id != candidate.id:
            raise ValueError(f"trial is for candidate {trial.candidate_id}, got candidate {candidate.id}")
        if trial.workload_id != workload.id:
            raise ValueError(f"trial is for workload {trial.workload_id}, got workload {workload.id}")
        what = f"record trial {trial.index} of run {trial.run_id!r}"
        with self.transaction(what) as conn:
            run = conn.execute("SELECT manifest_hash FROM runs WHERE id = ?", (trial.run_id,)).fetchone()
            if run is None:
                raise ArchiveError(f"{what}: no such run; call create_run first")
            if run["manifest_hash"] != trial.manifest_hash:
                raise ArchiveError(f"{what}: trial manifest hash {trial.manifest_hash} differs from the "
                                   f"run's {run['manifest_hash']}")
            if conn.execute("SELECT 1 FROM trials WHERE run_id = ? AND candidate_id = ? AND workload_id = ?",
                            (trial.run_id, trial.candidate_id, trial.workload_id)).fetchone():
                return False
            taken = conn.execute("SELECT candidate_id, workload_id FROM trials WHERE run_id = ? AND idx = ?",
                                 (trial.run_id, trial.index)).fetchone()
            if taken is not None:
                raise ArchiveError(f"{what}: index {trial.index} is already used by candidate "
                                   f"{taken['candidate_id']} on workload {taken['workload_id']}; "
                                   "take the index from next_index()")
            self._insert_candidate(conn, candidate)
            self._insert_workload(conn, workload)
            self._insert_trial(conn, trial)
            row = conn.execute("SELECT * FROM trials WHERE run_id = ? AND idx = ?",
                               (trial.run_id, trial.index)).fetchone()
            self._write_mac(conn, trial.run_id, "trial", str(trial.index), integrity.trial_fields(conn, row))
        return True

    def _read_trial(self, conn: sqlite3.Connection, row: sqlite3.Row) -> Trial | None:
        """The row's trial, TAMPERED when it fails its MAC (None when a tampered row does not even parse)."""
        ok = self._trial_row_ok(conn, row)
        try:
            trial = Trial.from_json(row["json"])
        except ValueError:
            if ok:
                raise
            return None
        return trial if ok else _tampered(trial)

    def find_trial(self, run_id: str, candidate_id: str, workload_id: str) -> Trial | None:
        """The run's trial of this candidate on this workload, or None if it was never recorded."""
        with self.reading(f"find trial in run {run_id!r}") as conn:
            row = conn.execute("SELECT * FROM trials WHERE run_id = ? AND candidate_id = ? AND workload_id = ?",
                               (run_id, candidate_id, workload_id)).fetchone()
            return None if row is None else self._read_trial(conn, row)

    def trials(self, run_id: str, workload_id: str | None = None,
               status: Status | str | None = None) -> list[Trial]:
        """The run's trials ordered by index, optionally only one workload's and/or one status's. A row of a MAC'd
        run that fails its MAC is TAMPERED (core/archive/integrity.py), whatever its status column says."""
        sql, args = "SELECT * FROM trials WHERE run_id = ?", [run_id]
        if workload_id is not None:
            sql += " AND workload_id = ?"
            args.append(workload_id)
        with self.reading(f"list trials of run {run_id!r}") as conn:
            rows = conn.execute(sql + " ORDER BY idx", args).fetchall()
            trials = [t for t in (self._read_trial(conn, r) for r in rows) if t is not None]
        if status is not None:
            trials = [t for t in trials if t.verdict.status.value == _status_value(status)]
        return trials

    def next_index(self, run_id: str) -> int:
        """One past the highest trial index of the run (0 for a run without trials)."""
        with self.reading(f"next index of run {run_id!r}") as conn:
            row = conn.execute("SELECT MAX(idx) FROM trials WHERE run_id = ?", (run_id,)).fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def count(self, run_id: str) -> dict[str, int]:
        """Number of the run's trials per verdict status (statuses with no trial are omitted; TAMPERED rows counted
        as such)."""
        counts: dict[str, int] = {}
        for t in self.trials(run_id):
            counts[t.verdict.status.value] = counts.get(t.verdict.status.value, 0) + 1
        return dict(sorted(counts.items()))
