"""The run archive: one SQLite file in the run folder, the durable store of an optimization run.

Every write is one explicit transaction (`BEGIN IMMEDIATE ... COMMIT`), so a controller killed with
`kill -9` at any instant leaves either the whole write or none of it. A resumed controller asks
`find_trial` before evaluating a (candidate, workload) and `next_index` for the next trial number;
`record_trial` refuses duplicates, so nothing is lost or recorded twice.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from ..records import Candidate, Environment, Measurement, OpSpec, Status, Trial, Workload
from ..records.base import canonical_json

if TYPE_CHECKING:
    from ..records.confirm import CrossProcessConfirmation
from .schema import LATEST_VERSION, SchemaError, migrate


@contextmanager
def _plain_copy(path: Path):
    """The archive file itself, or for a name ending in .gz a temporary decompressed copy of it."""
    if not path.name.endswith(".gz"):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="kl-archive-") as tmp:
        plain = Path(tmp) / path.name[:-3]
        with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst)
        yield plain


class ArchiveError(RuntimeError):
    """A write or read of the archive failed, or a request contradicts what the archive holds."""


def _status_value(status: Status | str) -> str:
    return status.value if isinstance(status, Status) else str(status)


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


class Archive:
    """SQLite store of runs, candidates, workloads, trials, baselines, finals, fronts and events.

    Open with `Archive(path)` (the file and its folder are created if missing), or as a context
    manager. One connection, guarded by a lock, so an instance may be shared between threads; several
    processes may open the same file (WAL: readers never block the writer).
    """

    def __init__(self, path: str | Path, *, timeout_s: float = 30.0, readonly: bool = False) -> None:
        """`readonly=True`: read a snapshot of the file in memory (migrated there when it is older than this
        code), so that reading an archive — `show`, `profile` without `--ncu`, committed results — never
        changes it. Writes then go to the snapshot only. Read-only, a gzipped archive (`archive.sqlite.gz`, as
        committed results are kept) is read the same way."""
        self.path = Path(path)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        if readonly:
            if not self.path.is_file():
                raise ArchiveError(f"cannot open archive {path}: no such file")
            try:
                with _plain_copy(self.path) as plain:
                    src = sqlite3.connect(f"file:{plain}?mode=ro", uri=True, timeout=timeout_s)
                    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
                    try:
                        src.backup(conn)
                    finally:
                        src.close()
            except (sqlite3.Error, OSError, EOFError) as e:
                raise ArchiveError(f"cannot open archive {path}: {e}") from e
        elif str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # isolation_level=None: autocommit mode; every transaction below is explicit.
            if not readonly:
                conn = sqlite3.connect(str(path), timeout=timeout_s, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise ArchiveError(f"cannot open archive {path}: {e}") from e
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal" and str(path) != ":memory:" and not readonly:
                raise ArchiveError(f"archive {path}: cannot enable WAL journal mode (got {mode!r}); "
                                   "is the run folder on a filesystem without shared-memory support?")
            # synchronous=FULL: in WAL mode, NORMAL only fsyncs the WAL at checkpoints, so after a power
            # loss or OS crash the last committed trials may vanish (the database stays consistent, but
            # a trial the controller saw as recorded would be re-run under a new index). FULL fsyncs the
            # WAL at every commit, so a committed trial survives any crash. The cost, one fsync per
            # trial, is negligible next to the seconds a trial spends compiling, verifying and timing.
            # (A mere `kill -9` of the controller is safe under either setting: the OS keeps the writes.)
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            self.schema_version = migrate(conn)
        except SchemaError as e:
            conn.close()
            raise ArchiveError(f"archive {path}: {e}") from e
        except sqlite3.Error as e:
            conn.close()
            raise ArchiveError(f"cannot open archive {path}: {e}") from e
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    # ------------------------------------------------------------------ plumbing

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent). Committed data is already durable."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                finally:
                    self._conn = None

    @property
    def closed(self) -> bool:
        return self._conn is None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise ArchiveError(f"archive {self.path} is closed")
        return self._conn

    @contextmanager
    def _tx(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed if the block returns, rolled back if anything raises.

        sqlite3 errors (disk full, I/O error, constraint violations) surface as ArchiveError carrying
        the original message; the database is left as it was before the transaction.
        """
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise ArchiveError(f"{what}: cannot begin transaction: {e}") from e
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as e:
                # SQLite may already have rolled back by itself (e.g. after SQLITE_FULL).
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                if isinstance(e, sqlite3.Error):
                    raise ArchiveError(f"{what}: {e}") from e
                raise

    @contextmanager
    def _read(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connection()
            try:
                yield conn
            except sqlite3.Error as e:
                raise ArchiveError(f"{what}: {e}") from e

    def integrity_check(self) -> str:
        """Result of `PRAGMA integrity_check` ('ok' when the file is sound)."""
        with self._read("integrity check") as conn:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        return "\n".join(str(r[0]) for r in rows)

    # ------------------------------------------------------------------ runs

    def create_run(self, run_id: str, spec: OpSpec, manifest: dict, manifest_hash: str,
                   environment: Environment, options: dict) -> None:
        """Create run `run_id`, or do nothing if it exists with the same manifest hash (resume).

        Raises ArchiveError if the run exists under a different manifest hash: its trials were
        produced under another reference/verifier/policy/environment and must not be mixed.
        """
        what = f"create run {run_id!r}"
        with self._tx(what) as conn:
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

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        """The run as a dict: id, created, op, spec, manifest, manifest_hash, environment, options,
        status (JSON fields decoded to dicts); None if absent."""
        with self._read(f"get run {run_id!r}") as conn:
            row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else _decode_run(row)

    def set_run_status(self, run_id: str, status: str) -> None:
        """Set a run's status (free-form, e.g. 'running', 'finished', 'failed', 'interrupted')."""
        what = f"set status of run {run_id!r}"
        with self._tx(what) as conn:
            cur = conn.execute("UPDATE runs SET status = ? WHERE id = ?", (status, run_id))
            if cur.rowcount == 0:
                raise ArchiveError(f"{what}: no such run")

    def runs(self) -> list[dict[str, Any]]:
        """All runs, oldest first, shaped as `get_run` returns them."""
        with self._read("list runs") as conn:
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
        with self._tx(f"put candidate {c.id}") as conn:
            self._insert_candidate(conn, c)

    def get_candidate(self, cid: str) -> Candidate | None:
        """The stored candidate with id `cid`, or None."""
        with self._read(f"get candidate {cid}") as conn:
            row = conn.execute("SELECT json FROM candidates WHERE id = ?", (cid,)).fetchone()
        return None if row is None else Candidate.from_json(row["json"])

    def ancestors(self, cid: str) -> list[str]:
        """Ids of every transitive parent of `cid`, nearest generation first (breadth-first).

        Safe against cycles: the recursive query deduplicates ids, so it terminates.
        """
        with self._read(f"ancestors of {cid}") as conn:
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
        with self._tx(f"put workload {w.id}") as conn:
            self._insert_workload(conn, w)

    def get_workload(self, wid: str) -> Workload | None:
        """The stored workload with id `wid`, or None."""
        with self._read(f"get workload {wid}") as conn:
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
        with self._tx(what) as conn:
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
        return True

    def find_trial(self, run_id: str, candidate_id: str, workload_id: str) -> Trial | None:
        """The run's trial of this candidate on this workload, or None if it was never recorded."""
        with self._read(f"find trial in run {run_id!r}") as conn:
            row = conn.execute("SELECT json FROM trials WHERE run_id = ? AND candidate_id = ? AND workload_id = ?",
                               (run_id, candidate_id, workload_id)).fetchone()
        return None if row is None else Trial.from_json(row["json"])

    def trials(self, run_id: str, workload_id: str | None = None,
               status: Status | str | None = None) -> list[Trial]:
        """The run's trials ordered by index, optionally only one workload's and/or one status's."""
        sql, args = "SELECT json FROM trials WHERE run_id = ?", [run_id]
        if workload_id is not None:
            sql += " AND workload_id = ?"
            args.append(workload_id)
        if status is not None:
            sql += " AND status = ?"
            args.append(_status_value(status))
        with self._read(f"list trials of run {run_id!r}") as conn:
            rows = conn.execute(sql + " ORDER BY idx", args).fetchall()
        return [Trial.from_json(r["json"]) for r in rows]

    def next_index(self, run_id: str) -> int:
        """One past the highest trial index of the run (0 for a run without trials)."""
        with self._read(f"next index of run {run_id!r}") as conn:
            row = conn.execute("SELECT MAX(idx) FROM trials WHERE run_id = ?", (run_id,)).fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def count(self, run_id: str) -> dict[str, int]:
        """Number of the run's trials per verdict status (statuses with no trial are omitted)."""
        with self._read(f"count trials of run {run_id!r}") as conn:
            rows = conn.execute("SELECT status, COUNT(*) AS n FROM trials WHERE run_id = ? GROUP BY status"
                                " ORDER BY status", (run_id,)).fetchall()
        return {r["status"]: int(r["n"]) for r in rows}

    # ------------------------------------------------------------------ baselines, finals, fronts

    def put_baseline(self, run_id: str, workload_id: str, name: str, measurement: Measurement | None,
                     note: str = "") -> None:
        """Store (or replace) baseline `name` on a workload; `measurement` None when it could not run."""
        with self._tx(f"put baseline {name!r} of run {run_id!r}") as conn:
            conn.execute(
                "INSERT INTO baselines(run_id, workload_id, name, json, note) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT(run_id, workload_id, name) DO UPDATE SET json = excluded.json, note = excluded.note",
                (run_id, workload_id, name, measurement.to_json() if measurement is not None else None, note))

    def baselines(self, run_id: str, workload_id: str) -> dict[str, tuple[Measurement | None, str]]:
        """Baselines of a workload: name -> (measurement or None, note)."""
        with self._read(f"list baselines of run {run_id!r}") as conn:
            rows = conn.execute("SELECT name, json, note FROM baselines WHERE run_id = ? AND workload_id = ?"
                                " ORDER BY name", (run_id, workload_id)).fetchall()
        return {r["name"]: (Measurement.from_json(r["json"]) if r["json"] is not None else None, r["note"])
                for r in rows}

    def put_final(self, run_id: str, workload_id: str, candidate_id: str, measurement: Measurement) -> None:
        """Store (or replace) the confirmation measurement of the best candidate on a workload.

        The candidate and workload must be archived (they are, once a trial of them is recorded).
        """
        with self._tx(f"put final of run {run_id!r} on {workload_id}") as conn:
            conn.execute(
                "INSERT INTO finals(run_id, workload_id, candidate_id, json) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(run_id, workload_id) DO UPDATE SET candidate_id = excluded.candidate_id,"
                " json = excluded.json",
                (run_id, workload_id, candidate_id, measurement.to_json()))

    def finals(self, run_id: str) -> dict[str, tuple[str, Measurement]]:
        """Final confirmations of a run: workload_id -> (candidate_id, measurement)."""
        with self._read(f"list finals of run {run_id!r}") as conn:
            rows = conn.execute("SELECT workload_id, candidate_id, json FROM finals WHERE run_id = ?"
                                " ORDER BY workload_id", (run_id,)).fetchall()
        return {r["workload_id"]: (r["candidate_id"], Measurement.from_json(r["json"])) for r in rows}

    def put_confirmation(self, run_id: str, confirmation: "CrossProcessConfirmation") -> None:
        """Store (or replace) the cross-process confirmation of a workload's winner."""
        with self._tx(f"put confirmation of run {run_id!r} on {confirmation.workload_id}") as conn:
            conn.execute("INSERT INTO confirmations(run_id, workload_id, json) VALUES (?, ?, ?)"
                         " ON CONFLICT(run_id, workload_id) DO UPDATE SET json = excluded.json",
                         (run_id, confirmation.workload_id, confirmation.to_json()))

    def confirmations(self, run_id: str) -> dict[str, "CrossProcessConfirmation"]:
        """Cross-process confirmations of a run: workload_id -> record (none for runs confirmed in one process)."""
        from ..records.confirm import CrossProcessConfirmation
        with self._read(f"list confirmations of run {run_id!r}") as conn:
            rows = conn.execute("SELECT workload_id, json FROM confirmations WHERE run_id = ? ORDER BY workload_id",
                                (run_id,)).fetchall()
        return {r["workload_id"]: CrossProcessConfirmation.from_json(r["json"]) for r in rows}

    def set_front(self, run_id: str, workload_id: str, entries: list[tuple[str, dict]]) -> None:
        """Replace the workload's front with `entries` (candidate_id, objectives) in one transaction."""
        with self._tx(f"set front of run {run_id!r} on {workload_id}") as conn:
            conn.execute("DELETE FROM fronts WHERE run_id = ? AND workload_id = ?", (run_id, workload_id))
            conn.executemany(
                "INSERT INTO fronts(run_id, workload_id, candidate_id, pos, objectives_json) VALUES (?, ?, ?, ?, ?)",
                [(run_id, workload_id, cid, pos, canonical_json(obj)) for pos, (cid, obj) in enumerate(entries)])

    def front(self, run_id: str, workload_id: str) -> list[tuple[str, dict]]:
        """The workload's front as last set: [(candidate_id, objectives)] in the order given."""
        with self._read(f"get front of run {run_id!r}") as conn:
            rows = conn.execute("SELECT candidate_id, objectives_json FROM fronts WHERE run_id = ? AND workload_id = ?"
                                " ORDER BY pos", (run_id, workload_id)).fetchall()
        return [(r["candidate_id"], json.loads(r["objectives_json"])) for r in rows]

    # ------------------------------------------------------------------ events

    def log_event(self, run_id: str, kind: str, payload: dict) -> None:
        """Append a supervisor/controller note (payload must be JSON-able, no NaN)."""
        with self._tx(f"log event {kind!r} of run {run_id!r}") as conn:
            conn.execute("INSERT INTO events(run_id, t, kind, json) VALUES (?, ?, ?, ?)",
                         (run_id, time.time(), kind, canonical_json(payload)))

    def events(self, run_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        """The run's events in logging order: [{'seq', 't', 'kind', 'payload'}], optionally one kind."""
        sql, args = "SELECT seq, t, kind, json FROM events WHERE run_id = ?", [run_id]
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        with self._read(f"list events of run {run_id!r}") as conn:
            rows = conn.execute(sql + " ORDER BY seq", args).fetchall()
        return [{"seq": r["seq"], "t": r["t"], "kind": r["kind"], "payload": json.loads(r["json"])} for r in rows]

    # ------------------------------------------------------------------ profiles (schema version 2)

    def put_profile(self, run_id: str, trial_id: str, report: "ProfileReport") -> None:
        """Store (or replace) the profile report of one of the run's trials.

        Raises ArchiveError if the run has no trial with this id, or if the report is about another trial.
        """
        if report.trial_id != trial_id:
            raise ArchiveError(f"put profile of trial {trial_id}: the report is about trial {report.trial_id}")
        what = f"put profile of trial {trial_id} in run {run_id!r}"
        with self._tx(what) as conn:
            if conn.execute("SELECT 1 FROM trials WHERE run_id = ? AND id = ?", (run_id, trial_id)).fetchone() is None:
                raise ArchiveError(f"{what}: the run has no such trial")
            conn.execute(
                "INSERT INTO profiles(run_id, trial_id, json) VALUES (?, ?, ?)"
                " ON CONFLICT(run_id, trial_id) DO UPDATE SET json = excluded.json",
                (run_id, trial_id, report.to_json()))

    def profile(self, run_id: str, trial_id: str) -> "ProfileReport | None":
        """The stored profile report of a trial, or None."""
        from ..records.profile import ProfileReport
        with self._read(f"get profile of trial {trial_id} in run {run_id!r}") as conn:
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
        with self._tx(what) as conn:
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                raise ArchiveError(f"{what}: no such run")
            conn.execute(
                "INSERT INTO baseline_profiles(run_id, workload_id, name, json) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(run_id, workload_id, name) DO UPDATE SET json = excluded.json",
                (run_id, workload_id, name, report.to_json()))

    def baseline_profile(self, run_id: str, workload_id: str, name: str) -> "ProfileReport | None":
        """The stored profile report of a baseline on a workload, or None."""
        from ..records.profile import ProfileReport
        with self._read(f"get profile of baseline {name!r} on {workload_id} in run {run_id!r}") as conn:
            row = conn.execute("SELECT json FROM baseline_profiles WHERE run_id = ? AND workload_id = ? AND name = ?",
                               (run_id, workload_id, name)).fetchone()
        return None if row is None else ProfileReport.from_json(row["json"])

    def baseline_profiles(self, run_id: str, workload_id: str | None = None) -> list["ProfileReport"]:
        """Every stored baseline profile of the run (of one workload), by workload and name."""
        from ..records.profile import ProfileReport
        sql, args = "SELECT json FROM baseline_profiles WHERE run_id = ?", [run_id]
        if workload_id is not None:
            sql += " AND workload_id = ?"
            args.append(workload_id)
        with self._read(f"list baseline profiles of run {run_id!r}") as conn:
            rows = conn.execute(sql + " ORDER BY workload_id, name", args).fetchall()
        return [ProfileReport.from_json(r["json"]) for r in rows]


__all__ = ["Archive", "ArchiveError", "LATEST_VERSION"]
