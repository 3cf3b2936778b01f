"""The archive's connection: opening (read-write, or a read-only snapshot in memory, compressed files too), the
journal settings that make every committed write durable, and the transactions every write goes through.

Every write is one explicit transaction (`BEGIN IMMEDIATE ... COMMIT`), so a controller killed with `kill -9` at any
instant leaves either the whole write or none of it. The tables' reads and writes live in `runs.py` (runs,
candidates, workloads, trials) and `results.py` (baselines, finals, confirmations, fronts, events, profiles);
`store.Archive` is all of them.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ...base.compressed import decompress_to, plain_name, suffix_of
from .schema import SchemaError, migrate


@contextmanager
def _plain_copy(path: Path):
    """The archive file itself, or for a name ending in .xz or .gz a temporary decompressed copy of it."""
    if suffix_of(path) is None:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="kl-archive-") as tmp:
        yield decompress_to(path, Path(tmp) / plain_name(path))


def _readonly_uri(path: Path) -> str:
    """The SQLite URI that reads `path` without writing beside it: `immutable=1` (no -wal or -shm file is created,
    which a plain read-only open of a WAL database does) unless a -wal file is already there -- a run still
    writing, or one that stopped before its checkpoint, whose last commits live in it and must be read."""
    uri = path.resolve().as_uri() + "?mode=ro"
    return uri if Path(f"{path}-wal").exists() else uri + "&immutable=1"


class ArchiveError(RuntimeError):
    """A write or read of the archive failed, or a request contradicts what the archive holds."""


class ArchiveConnection:
    """One SQLite connection to an archive file, guarded by a lock; the base of `store.Archive`."""

    def __init__(self, path: str | Path, *, timeout_s: float = 30.0, readonly: bool = False) -> None:
        """`readonly=True`: read a snapshot of the file in memory (migrated there when it is older than this
        code), so that reading an archive — `show`, `report`, `profile` without `--ncu`, committed results — never
        changes it, nor leaves -wal or -shm files beside it (`_readonly_uri`). Writes then go to the snapshot only.
        Read-only, a compressed archive (`archive.sqlite.xz`, as committed results are kept, or `.gz`) is read the
        same way."""
        self.path = Path(path)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        if readonly:
            if not self.path.is_file():
                raise ArchiveError(f"cannot open archive {path}: no such file")
            try:
                with _plain_copy(self.path) as plain:
                    src = sqlite3.connect(_readonly_uri(plain), uri=True, timeout=timeout_s)
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

    def __enter__(self):
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
    def transaction(self, what: str) -> Iterator[sqlite3.Connection]:
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
                    with contextlib.suppress(sqlite3.Error):   # the failed statement may have ended it already
                        conn.execute("ROLLBACK")
                if isinstance(e, sqlite3.Error):
                    raise ArchiveError(f"{what}: {e}") from e
                raise

    @contextmanager
    def reading(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connection()
            try:
                yield conn
            except sqlite3.Error as e:
                raise ArchiveError(f"{what}: {e}") from e

    def integrity_check(self) -> str:
        """Result of `PRAGMA integrity_check` ('ok' when the file is sound)."""
        with self.reading("integrity check") as conn:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        return "\n".join(str(r[0]) for r in rows)
