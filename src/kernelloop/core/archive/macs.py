"""The archive's MAC keys per run and the checks its readers and writers make (core/archive/integrity.py says why).

A writer holds the key of the run it writes (`create_run(..., secret=...)` for a new run, `attach_secret` on resume)
or, failing that, loads it as the controller does (core/sandbox/keys.py: $KERNELLOOP_KEY or the key file outside the run
folder). Writing a row of a MAC'd run without its key is refused: an unauthenticated row would read as TAMPERED.
"""

from __future__ import annotations

import json
import sqlite3

from . import integrity
from .connection import ArchiveConnection, ArchiveError
from .integrity import RunIntegrity


class Unverifiable(Exception):
    """A MAC'd run whose key cannot be read here."""


class MacRecords(ArchiveConnection):
    """Per-run MAC keys of `store.Archive` and the integrity of its runs."""

    def _mac_state(self) -> dict:
        state = self.__dict__.get("_macs")
        if state is None:
            state = self.__dict__["_macs"] = {}
        return state

    def attach_secret(self, run_id: str, secret: str) -> None:
        """The run secret of `run_id` (sandbox/keys.run_secret), held by the controller that writes the run."""
        self._mac_state()[run_id] = integrity.mac_key(secret)

    def _load_key(self, conn: sqlite3.Connection, run_id: str) -> bytes:
        from ..sandbox import keys
        row = conn.execute("SELECT options_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise Unverifiable("the run row is missing")
        try:
            rec = json.loads(row["options_json"]).get("key") or {}
            salt, commit = str(rec["salt"]), str(rec["commitment"])
        except (ValueError, KeyError, TypeError, AttributeError):
            raise Unverifiable("the run row names no key commitment") from None
        try:
            key = keys.load_key(run_id, salt, commit, self.path.resolve().parent)
        except keys.RunKeyError as e:
            raise Unverifiable(str(e)) from None
        return integrity.mac_key(keys.run_secret(key, salt))

    def _mac_key(self, conn: sqlite3.Connection, run_id: str) -> bytes | None:
        """The run's MAC key; None for a run without the marker (legacy); raises Unverifiable."""
        state = self._mac_state()
        if integrity.marker(conn, run_id) is None:
            return None
        got = state.get(run_id)
        if isinstance(got, bytes):
            return got
        if isinstance(got, Unverifiable):
            raise got
        try:
            state[run_id] = self._load_key(conn, run_id)
        except Unverifiable as e:
            state[run_id] = e
            raise
        return state[run_id]

    def _write_mac(self, conn: sqlite3.Connection, run_id: str, table: str, row_key: str, fields: list) -> None:
        """MAC a row just written (inside its transaction); nothing for a legacy run."""
        try:
            key = self._mac_key(conn, run_id)
        except Unverifiable as e:
            raise ArchiveError(f"run {run_id}: its rows carry MACs but its key cannot be read here ({e}); refusing "
                               f"to write an unauthenticated {table} row") from None
        if key is not None:
            integrity.put_mac(conn, key, run_id, table, row_key, fields)

    def _row_ok(self, conn: sqlite3.Connection, run_id: str, table: str, row_key: str, fields: list) -> bool:
        """False only for a row of a MAC'd run whose MAC is missing or wrong (legacy, unverifiable: True)."""
        try:
            key = self._mac_key(conn, run_id)
        except Unverifiable:
            return True
        return key is None or integrity.good(conn, key, run_id, table, row_key, fields)

    def _trial_row_ok(self, conn: sqlite3.Connection, row: sqlite3.Row) -> bool:
        return self._row_ok(conn, row["run_id"], "trial", str(row["idx"]), integrity.trial_fields(conn, row))

    def integrity(self, run_id: str) -> RunIntegrity:
        """Whether the run's rows are authenticated, tampered, unauthenticated (legacy) or unverifiable here."""
        with self.reading(f"check the integrity of run {run_id!r}") as conn:
            try:
                key = self._mac_key(conn, run_id)
            except Unverifiable as e:
                return RunIntegrity(run_id=run_id, state="unverifiable", reason=str(e))
            if key is None:
                return RunIntegrity(run_id=run_id, state="unauthenticated",
                                    reason="no MAC marker: written before MACs or without a key")
            return integrity.check_run(conn, run_id, key)


__all__ = ["MacRecords", "Unverifiable"]
