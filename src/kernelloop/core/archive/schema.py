"""Schema of the run archive: an ordered list of migrations applied when an archive is opened.

Each migration is a numbered tuple of SQL statements. `migrate` applies every migration whose version
is above the one recorded in `schema_version`, each in its own `BEGIN IMMEDIATE` transaction together
with the row that records it, so a crash mid-migration leaves the database at the previous version.

To change the schema, append a `Migration(version=len(MIGRATIONS) + 1, ...)`; never edit one that has
shipped (archives already written have recorded it as applied).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass


class SchemaError(RuntimeError):
    """The database's schema cannot be brought to the version this code expects."""


@dataclass(frozen=True)
class Migration:
    """One schema step: statements run in one transaction, then `version` is recorded."""

    version: int
    description: str
    statements: tuple[str, ...]


_V1 = (
    # One row per optimization run. The manifest (reference, verifier, timing policy, environment) is
    # frozen at creation: trials are only comparable under one manifest hash.
    """
    CREATE TABLE runs (
        id               TEXT PRIMARY KEY,
        created          REAL NOT NULL,
        op               TEXT NOT NULL,
        spec_json        TEXT NOT NULL,
        manifest_json    TEXT NOT NULL,
        manifest_hash    TEXT NOT NULL,
        environment_json TEXT NOT NULL,
        options_json     TEXT NOT NULL,
        status           TEXT NOT NULL DEFAULT 'running'
    )
    """,
    # Candidates are content-addressed (id = hash of language, source, config) and shared across runs.
    # `json` is the full record; the other columns are copies for querying.
    """
    CREATE TABLE candidates (
        id              TEXT PRIMARY KEY,
        op              TEXT NOT NULL,
        template        TEXT NOT NULL,
        language        TEXT NOT NULL,
        source          TEXT NOT NULL,
        config_json     TEXT NOT NULL,
        parent_ids_json TEXT NOT NULL,
        proposer        TEXT NOT NULL,
        hypothesis      TEXT NOT NULL,
        json            TEXT NOT NULL
    )
    """,
    "CREATE INDEX candidates_op ON candidates(op, template)",
    # Lineage edges, one per (child, parent). Parents are not foreign keys: a proposer may name a
    # parent that was never archived (e.g. a seed from another store).
    """
    CREATE TABLE lineage (
        child_id  TEXT NOT NULL REFERENCES candidates(id),
        parent_id TEXT NOT NULL,
        PRIMARY KEY (child_id, parent_id)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX lineage_parent ON lineage(parent_id)",
    """
    CREATE TABLE workloads (
        id    TEXT PRIMARY KEY,
        op    TEXT NOT NULL,
        dtype TEXT NOT NULL,
        json  TEXT NOT NULL
    )
    """,
    # One row per evaluated (candidate, workload) of a run. Trial.id hashes candidate, workload and
    # manifest but not the run, so it is indexed, not unique: two runs under one manifest share ids.
    """
    CREATE TABLE trials (
        id               TEXT NOT NULL,
        run_id           TEXT NOT NULL REFERENCES runs(id),
        idx              INTEGER NOT NULL CHECK (idx >= 0),
        candidate_id     TEXT NOT NULL REFERENCES candidates(id),
        workload_id      TEXT NOT NULL REFERENCES workloads(id),
        status           TEXT NOT NULL,
        kernel_median_us REAL,
        call_median_us   REAL,
        manifest_hash    TEXT NOT NULL,
        started          REAL NOT NULL,
        finished         REAL NOT NULL,
        json             TEXT NOT NULL,
        UNIQUE (run_id, candidate_id, workload_id),
        UNIQUE (run_id, idx)
    )
    """,
    "CREATE INDEX trials_run_workload ON trials(run_id, workload_id, status)",
    "CREATE INDEX trials_id ON trials(id)",
    "CREATE INDEX trials_candidate ON trials(candidate_id)",
    # Baseline measurements (eager, torch.compile, ...); json NULL when the baseline could not run,
    # with the reason in `note`.
    """
    CREATE TABLE baselines (
        run_id      TEXT NOT NULL REFERENCES runs(id),
        workload_id TEXT NOT NULL,
        name        TEXT NOT NULL,
        json        TEXT,
        note        TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (run_id, workload_id, name)
    )
    """,
    # The confirmation measurement of the best candidate per workload.
    """
    CREATE TABLE finals (
        run_id       TEXT NOT NULL REFERENCES runs(id),
        workload_id  TEXT NOT NULL REFERENCES workloads(id),
        candidate_id TEXT NOT NULL REFERENCES candidates(id),
        json         TEXT NOT NULL,
        PRIMARY KEY (run_id, workload_id)
    )
    """,
    # The current Pareto front per workload; `pos` keeps the order the caller gave.
    """
    CREATE TABLE fronts (
        run_id          TEXT NOT NULL REFERENCES runs(id),
        workload_id     TEXT NOT NULL REFERENCES workloads(id),
        candidate_id    TEXT NOT NULL REFERENCES candidates(id),
        pos             INTEGER NOT NULL,
        objectives_json TEXT NOT NULL,
        PRIMARY KEY (run_id, workload_id, candidate_id)
    )
    """,
    # Supervisor/controller notes. No foreign key: a note may precede the run's creation.
    """
    CREATE TABLE events (
        seq    INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        t      REAL NOT NULL,
        kind   TEXT NOT NULL,
        json   TEXT NOT NULL
    )
    """,
    "CREATE INDEX events_run ON events(run_id, seq)",
)

_V2 = (
    # Profile reports (kernelloop.base.records.ProfileReport as JSON) of a run's trials: Nsight Compute metrics,
    # bottleneck class, roofline position, build resources, hypotheses and outcomes. One per trial; a new
    # profile of the same trial replaces the old one. The .ncu-rep file itself stays in the run folder.
    """
    CREATE TABLE profiles (
        run_id   TEXT NOT NULL REFERENCES runs(id),
        trial_id TEXT NOT NULL,
        json     TEXT NOT NULL,
        PRIMARY KEY (run_id, trial_id)
    )
    """,
)

_V3 = (
    # Profile reports of a run's baselines (eager, torch.compile, copy, liger, ...) on one workload: the same
    # ProfileReport JSON as `profiles`, with `baseline` set and no trial. One per (workload, baseline); a new profile
    # replaces the old one. The .ncu-rep stays in the run folder (profiles/baseline-<name>-<workload>.ncu-rep).
    """
    CREATE TABLE baseline_profiles (
        run_id      TEXT NOT NULL REFERENCES runs(id),
        workload_id TEXT NOT NULL,
        name        TEXT NOT NULL,
        json        TEXT NOT NULL,
        PRIMARY KEY (run_id, workload_id, name)
    )
    """,
)

_V4 = (
    # The confirmation of a workload's winner across fresh worker processes (records.confirm.CrossProcessConfirmation:
    # per-process medians, the spread between processes, the stated interval); one per (run, workload), replaced when
    # the workload is confirmed again.
    """
    CREATE TABLE confirmations (
        run_id      TEXT NOT NULL REFERENCES runs(id),
        workload_id TEXT NOT NULL,
        json        TEXT NOT NULL,
        PRIMARY KEY (run_id, workload_id)
    )
    """,
)

_V5 = (
    # PTX-level candidates (kernelloop.tune.ptx): an edit of a source-level candidate's compiled PTX. `parent_candidate_id`
    # is the lineage edge (not a foreign key: the parent may come from another archive); `diff` the unified diff;
    # `json` the full PtxCandidate. The PTX they edit, content-addressed, in ptx_sources.
    """
    CREATE TABLE ptx_candidates (
        id                  TEXT PRIMARY KEY,
        parent_candidate_id TEXT NOT NULL,
        kernel              TEXT NOT NULL,
        original_ptx_sha256 TEXT NOT NULL,
        rule                TEXT NOT NULL,
        proposer            TEXT NOT NULL,
        hypothesis          TEXT NOT NULL,
        diff                TEXT NOT NULL,
        json                TEXT NOT NULL
    )
    """,
    "CREATE INDEX ptx_candidates_parent ON ptx_candidates(parent_candidate_id)",
    "CREATE TABLE ptx_sources (sha256 TEXT PRIMARY KEY, ptx TEXT NOT NULL)",
    # One differential proof (and timing) of a PTX candidate on a workload in a run (kernelloop.tune.ptx.prove's
    # ProofReport), replaced when proved again.
    """
    CREATE TABLE ptx_proofs (
        run_id      TEXT NOT NULL,
        ptx_id      TEXT NOT NULL REFERENCES ptx_candidates(id),
        workload_id TEXT NOT NULL,
        verdict     TEXT NOT NULL,
        created     REAL NOT NULL,
        json        TEXT NOT NULL,
        PRIMARY KEY (run_id, ptx_id, workload_id)
    )
    """,
)

_V6 = (
    # Integrity (core/archive/integrity.py): a run created with its key has a row here (the format marker: scheme
    # 'hmac-sha256-v1'); a run without one was written before MACs existed or without a key, and reads as
    # unauthenticated. `row_macs` holds one HMAC per MAC'd row of such a run: tbl is run, trial, final,
    # confirmation, baseline or front; row_key the row's key within the run (the trial's index, the workload id...).
    "CREATE TABLE integrity (run_id TEXT PRIMARY KEY, scheme TEXT NOT NULL)",
    """
    CREATE TABLE row_macs (
        run_id  TEXT NOT NULL,
        tbl     TEXT NOT NULL,
        row_key TEXT NOT NULL,
        mac     TEXT NOT NULL,
        PRIMARY KEY (run_id, tbl, row_key)
    ) WITHOUT ROWID
    """,
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema: runs, candidates, lineage, workloads, trials, baselines, finals, fronts, events",
              _V1),
    Migration(2, "profiles: one ProfileReport per trial", _V2),
    Migration(3, "baseline_profiles: one ProfileReport per (workload, baseline)", _V3),
    Migration(4, "confirmations: a winner re-measured across fresh processes, with its stated interval", _V4),
    Migration(5, "ptx_candidates, ptx_sources, ptx_proofs: PTX-level edits of source-level candidates, proved", _V5),
    Migration(6, "integrity, row_macs: a format marker and an HMAC per row of runs created with a key", _V6),
)

LATEST_VERSION: int = MIGRATIONS[-1].version


def _check_migrations(migrations: tuple[Migration, ...]) -> None:
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(migrations) + 1)):
        raise SchemaError(f"migration versions must be 1..{len(migrations)} in order, got {versions}")


def current_version(conn: sqlite3.Connection) -> int:
    """Highest applied migration version; 0 for a new database."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone()
    if not exists:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def migrate(conn: sqlite3.Connection, migrations: tuple[Migration, ...] = MIGRATIONS) -> int:
    """Apply pending migrations; return the resulting version.

    `conn` must be in autocommit mode (`isolation_level=None`) so transactions are explicit. Each
    migration runs in `BEGIN IMMEDIATE` and re-reads the version inside it, so two processes opening
    the same archive at once apply each migration exactly once.
    """
    _check_migrations(migrations)
    latest = migrations[-1].version if migrations else 0
    have = current_version(conn)
    if have > latest:
        raise SchemaError(f"archive has schema version {have}, newer than this code's {latest}; "
                          "upgrade kernelloop to open it")
    for m in migrations:
        if m.version <= have:
            continue  # fast path: no write transaction when nothing is pending (read-only copies open)
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version ("
                         " version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied REAL NOT NULL)")
            have = current_version(conn)
            if have > latest:
                raise SchemaError(f"archive has schema version {have}, newer than this code's {latest}; "
                                  "upgrade kernelloop to open it")
            if have < m.version:
                for stmt in m.statements:
                    conn.execute(stmt)
                conn.execute("INSERT INTO schema_version(version, description, applied) VALUES (?, ?, ?)",
                             (m.version, m.description, time.time()))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return current_version(conn)
