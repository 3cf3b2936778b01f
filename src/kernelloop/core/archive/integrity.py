"""Integrity of the archive: every row a run's verdicts, times, fronts and confirmations come from carries an
HMAC-SHA256 under a key derived from the run key (core/sandbox/keys.py), which is kept outside the run folder and the
agent's workspace.

- A run created with its key (every run the controller starts) writes a format marker (a row of the `integrity`
  table, scheme `hmac-sha256-v1`) and a MAC per row in `row_macs`: the run row, each trial (with the stored JSON of
  its candidate and workload, so an edited kernel source is caught as well), each final, confirmation, baseline and
  front. A row whose MAC is missing or wrong is TAMPERED: readers mark the trial TAMPERED (never PASSED, never best)
  and drop the final, confirmation, baseline or front.
- A run without the marker was written before the archive had MACs, or without a key (recorded results, test
  fixtures): it reads as "unauthenticated (legacy)". Stripping the MACs and the marker therefore gives an
  unauthenticated run, never an authenticated one; `export` refuses such a run unless asked to take it.
- A run with the marker whose key cannot be read here (another machine, a changed commitment) is "unverifiable".

The MAC key is hmac(run secret, "kernelloop-archive-mac-v1"); the run secret is sha256(salt | key).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
from ...base.records.integrity import RunIntegrity

SCHEME = "hmac-sha256-v1"
TAMPERED_MESSAGE = "TAMPERED: this archive row fails its MAC (it was edited after the controller recorded it)"

def mac_key(secret: str) -> bytes:
    """The archive's MAC key of a run, from the run secret (sandbox/keys.run_secret)."""
    return hmac.new(secret.encode(), b"kernelloop-archive-mac-v1", hashlib.sha256).digest()


def row_mac(key: bytes, table: str, row_key: str, fields: list) -> str:
    msg = json.dumps(["kernelloop-archive-row-v1", table, row_key, fields], sort_keys=True, separators=(",", ":"),
                     ensure_ascii=False, allow_nan=True)
    return hmac.new(key, msg.encode(), hashlib.sha256).hexdigest()


def _json_sha(conn: sqlite3.Connection, table: str, row_id: str) -> str:
    row = conn.execute(f"SELECT json FROM {table} WHERE id = ?", (row_id,)).fetchone()
    return "" if row is None else hashlib.sha256(row["json"].encode()).hexdigest()


def run_fields(row: sqlite3.Row) -> list:
    return [row["id"], row["created"], row["op"], row["spec_json"], row["manifest_json"], row["manifest_hash"],
            row["environment_json"], row["options_json"]]


def trial_fields(conn: sqlite3.Connection, row: sqlite3.Row) -> list:
    """A trial row's columns and the sha256 of its candidate's and workload's stored JSON."""
    return [row["run_id"], row["idx"], row["id"], row["candidate_id"], row["workload_id"], row["status"],
            row["kernel_median_us"], row["call_median_us"], row["manifest_hash"], row["started"], row["finished"],
            row["json"], _json_sha(conn, "candidates", row["candidate_id"]),
            _json_sha(conn, "workloads", row["workload_id"])]


def front_fields(conn: sqlite3.Connection, run_id: str, workload_id: str) -> list:
    rows = conn.execute("SELECT candidate_id, pos, objectives_json FROM fronts WHERE run_id = ? AND workload_id = ?"
                        " ORDER BY pos", (run_id, workload_id)).fetchall()
    return [[r["candidate_id"], r["pos"], r["objectives_json"]] for r in rows]


def marker(conn: sqlite3.Connection, run_id: str) -> str | None:
    row = conn.execute("SELECT scheme FROM integrity WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else row["scheme"]


def stored_mac(conn: sqlite3.Connection, run_id: str, table: str, row_key: str) -> str | None:
    row = conn.execute("SELECT mac FROM row_macs WHERE run_id = ? AND tbl = ? AND row_key = ?",
                       (run_id, table, row_key)).fetchone()
    return None if row is None else row["mac"]


def put_mac(conn: sqlite3.Connection, key: bytes, run_id: str, table: str, row_key: str, fields: list) -> None:
    conn.execute("INSERT INTO row_macs(run_id, tbl, row_key, mac) VALUES (?, ?, ?, ?)"
                 " ON CONFLICT(run_id, tbl, row_key) DO UPDATE SET mac = excluded.mac",
                 (run_id, table, row_key, row_mac(key, table, row_key, fields)))


def good(conn: sqlite3.Connection, key: bytes, run_id: str, table: str, row_key: str, fields: list) -> bool:
    """Whether the row's stored MAC is the one its fields give under `key`."""
    have = stored_mac(conn, run_id, table, row_key)
    return have is not None and hmac.compare_digest(have, row_mac(key, table, row_key, fields))


def _sections(conn: sqlite3.Connection, run_id: str) -> list[tuple[str, str, object]]:
    """Every MAC'd row of a run: (table, row key, fields or a callable giving them)."""
    out: list[tuple[str, str, object]] = []
    run = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if run is not None:
        out.append(("run", "", run_fields(run)))
    for r in conn.execute("SELECT * FROM trials WHERE run_id = ? ORDER BY idx", (run_id,)).fetchall():
        out.append(("trial", str(r["idx"]), trial_fields(conn, r)))
    for r in conn.execute("SELECT * FROM finals WHERE run_id = ?", (run_id,)).fetchall():
        out.append(("final", r["workload_id"], [run_id, r["workload_id"], r["candidate_id"], r["json"]]))
    for r in conn.execute("SELECT * FROM confirmations WHERE run_id = ?", (run_id,)).fetchall():
        out.append(("confirmation", r["workload_id"], [run_id, r["workload_id"], r["json"]]))
    for r in conn.execute("SELECT * FROM baselines WHERE run_id = ?", (run_id,)).fetchall():
        out.append(("baseline", f"{r['workload_id']}|{r['name']}",
                    [run_id, r["workload_id"], r["name"], r["json"], r["note"]]))
    for (wid,) in conn.execute("SELECT DISTINCT workload_id FROM fronts WHERE run_id = ?", (run_id,)).fetchall():
        out.append(("front", wid, front_fields(conn, run_id, wid)))
    return out


def check_run(conn: sqlite3.Connection, run_id: str, key: bytes) -> RunIntegrity:
    """Every row of a marked run against its MAC, and every MAC against a row (a deleted trial is tampering too)."""
    bad, present = [], set()
    for table, row_key, fields in _sections(conn, run_id):
        present.add((table, row_key))
        if not good(conn, key, run_id, table, row_key, fields):
            bad.append(f"{table} {row_key}".strip())
    for r in conn.execute("SELECT tbl, row_key FROM row_macs WHERE run_id = ? AND tbl IN ('run', 'trial')",
                          (run_id,)).fetchall():
        if (r["tbl"], r["row_key"]) not in present:
            bad.append(f"{r['tbl']} {r['row_key']} (deleted)".replace("  ", " "))
    if bad:
        return RunIntegrity(run_id=run_id, state="tampered", tampered=bad,
                            reason="rows were edited, added or deleted after the controller recorded them")
    macs = conn.execute("SELECT tbl, row_key, mac FROM row_macs WHERE run_id = ? AND tbl IN ('run', 'trial')"
                        " ORDER BY tbl, row_key", (run_id,)).fetchall()
    digest = hashlib.sha256(json.dumps([[r["tbl"], r["row_key"], r["mac"]] for r in macs]).encode()).hexdigest()
    return RunIntegrity(run_id=run_id, state="authenticated", commitment=f"{SCHEME}:{digest}")


__all__ = ["RunIntegrity", "SCHEME", "TAMPERED_MESSAGE", "check_run", "good", "mac_key", "marker", "put_mac",
           "row_mac"]
