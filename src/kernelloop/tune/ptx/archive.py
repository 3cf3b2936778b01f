"""PTX-level candidates in the run archive (schema migration 5): the edit with its lineage (the source-level
candidate it edits) and its unified diff, the PTX it edits (content-addressed), and each proof of it in a run."""

from __future__ import annotations

import time

from ...core.archive import Archive
from ...base.records.base import sha256_hex
from .patch import edited_ptx, unified
from .prove import ProofReport, StandInExecutor
from .records import PtxCandidate


def put_candidate(archive: Archive, candidate: PtxCandidate, original_ptx: str) -> None:
    """Archive the edit and the PTX it edits (idempotent)."""
    if sha256_hex(original_ptx) != candidate.original_ptx_sha256:
        raise ValueError("the PTX is not the one the edit was made from (sha256 differs)")
    diff = unified(original_ptx, edited_ptx(candidate, original_ptx), f"{candidate.kernel}.ptx")
    with archive.transaction("put PTX candidate") as conn:
        conn.execute("INSERT OR IGNORE INTO ptx_sources(sha256, ptx) VALUES (?, ?)",
                     (candidate.original_ptx_sha256, original_ptx))
        conn.execute("INSERT OR IGNORE INTO ptx_candidates(id, parent_candidate_id, kernel, original_ptx_sha256, "
                     "rule, proposer, hypothesis, diff, json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (candidate.id, candidate.parent_candidate_id, candidate.kernel, candidate.original_ptx_sha256,
                      candidate.rule, candidate.proposer, candidate.hypothesis, diff, candidate.to_json()))


def put_proof(archive: Archive, run_id: str, workload_id: str, report: ProofReport) -> None:
    with archive.transaction("put PTX proof") as conn:
        conn.execute("INSERT OR REPLACE INTO ptx_proofs(run_id, ptx_id, workload_id, verdict, created, json) "
                     "VALUES (?, ?, ?, ?, ?, ?)", (run_id, report.candidate_id, workload_id, report.verdict,
                                                   time.time(), report.model_dump_json()))


def candidates(archive: Archive, parent_candidate_id: str | None = None) -> list[PtxCandidate]:
    """Archived PTX candidates (of one source-level parent, or all), in id order."""
    with archive.reading("PTX candidates") as conn:
        rows = conn.execute("SELECT json FROM ptx_candidates" + (" WHERE parent_candidate_id = ?" if parent_candidate_id
                            else "") + " ORDER BY id", (parent_candidate_id,) if parent_candidate_id else ()).fetchall()
    return [PtxCandidate.from_json(r[0]) for r in rows]


def diff(archive: Archive, ptx_id: str) -> str:
    with archive.reading("PTX diff") as conn:
        row = conn.execute("SELECT diff FROM ptx_candidates WHERE id = ?", (ptx_id,)).fetchone()
    return row[0] if row else ""


def source(archive: Archive, sha256: str) -> str | None:
    """The archived PTX with this sha256."""
    with archive.reading("PTX source") as conn:
        row = conn.execute("SELECT ptx FROM ptx_sources WHERE sha256 = ?", (sha256,)).fetchone()
    return row[0] if row else None


def proofs(archive: Archive, run_id: str, workload_id: str | None = None) -> list[tuple[str, ProofReport]]:
    """(workload id, report) of the run's proofs."""
    with archive.reading("PTX proofs") as conn:
        rows = conn.execute("SELECT workload_id, json FROM ptx_proofs WHERE run_id = ?" + (
            " AND workload_id = ?" if workload_id else "") + " ORDER BY created",
            (run_id, workload_id) if workload_id else (run_id,)).fetchall()
    return [(w, ProofReport.model_validate_json(j)) for w, j in rows]


def best_winner(archive: Archive, run_id: str, candidate_id: str, workload_id: str | None = None
                ) -> tuple[PtxCandidate, ProofReport, str] | None:
    """The fastest PTX edit of `candidate_id` proved FASTER than it in the run (on `workload_id`, or any), with
    the PTX it edits; None when there is none. A stand-in's proof (`StandInExecutor`: it runs no PTX and times the
    interpreter) never counts."""
    best = None
    for _, report in proofs(archive, run_id, workload_id):
        if report.parent_candidate_id != candidate_id or report.verdict != "faster" or report.timing is None:
            continue
        if report.executor == StandInExecutor.name:
            continue
        if best is None or report.timing.speedup > best.timing.speedup:
            best = report
    if best is None:
        return None
    with archive.reading("PTX candidate") as conn:
        row = conn.execute("SELECT json FROM ptx_candidates WHERE id = ?", (best.candidate_id,)).fetchone()
    cand = PtxCandidate.from_json(row[0])
    return cand, best, source(archive, cand.original_ptx_sha256) or ""
