"""PTX-level candidates in the run archive: an archive written before them opens (migrated) with none; each edit is
kept with its parent and diff, the PTX it edits once, each proof per (run, workload); the best winner is the
fastest edit proved FASTER than its parent."""

from pathlib import Path

from kernelloop.base.compressed import decompress_to
from kernelloop.core.archive import Archive
from kernelloop.tune.ptx.archive import best_winner, candidates, diff, proofs, put_candidate, put_proof, source
from kernelloop.tune.ptx.prove import ProofReport, StandInExecutor, TimingComparison
from kernelloop.tune.ptx.rules import propose

OLD = Path(__file__).parents[1] / "fixtures" / "archives" / "h200-layernorm-planner.sqlite.xz"


def _report(edit, verdict, speedup=None, executor="written by the test"):
    t = None if speedup is None else TimingComparison(workload="w", original_us=10.0, edited_us=10.0 / speedup,
                                                      speedup=speedup, ci_low=speedup - 0.01, ci_high=speedup + 0.01,
                                                      verdict=verdict.upper(), samples=60, policy="p")
    return ProofReport(candidate_id=edit.id, parent_candidate_id=edit.parent_candidate_id, kernel=edit.kernel,
                       rule=edit.rule, executor=executor, stage="done", verdict=verdict, timing=t)


def test_old_archives_open_and_edits_keep_lineage(tmp_path, scale_rows):
    path = tmp_path / "archive.sqlite"
    decompress_to(OLD, path)
    with Archive(path, readonly=True) as a:   # migrated in memory: the new tables, empty
        assert candidates(a) == [] and proofs(a, a.runs()[0]["id"]) == []
    edits = propose(scale_rows, parent="c-parent", rules=["cache_hint", "unroll"])
    a1, a2, a3 = edits[:3]
    with Archive(path) as a:
        run_id = a.runs()[0]["id"]
        for e in (a1, a2, a3):
            put_candidate(a, e, scale_rows.ptx)
        put_candidate(a, a1, scale_rows.ptx)   # idempotent
        put_proof(a, run_id, "w1", _report(a1, "faster", 1.05))
        put_proof(a, run_id, "w1", _report(a2, "faster", 1.20))
        put_proof(a, run_id, "w1", _report(a3, "rejected"))
        got = candidates(a, "c-parent")
        assert sorted(c.id for c in got) == sorted(e.id for e in (a1, a2, a3)) and candidates(a, "c-other") == []
        assert diff(a, a1.id).startswith("--- a/scale_rows.ptx") and source(a, a1.original_ptx_sha256) == scale_rows.ptx
        cand, report, original = best_winner(a, run_id, "c-parent")
        assert cand.id == a2.id and report.timing.speedup == 1.20 and original == scale_rows.ptx
        assert best_winner(a, run_id, "c-other") is None and len(proofs(a, run_id, "w1")) == 3


def test_a_stand_in_proof_is_never_a_winner(tmp_path, scale_rows):
    """The CPU stand-in runs no PTX and times the interpreter: its FASTER (noise) must not reach a package."""
    edit, other = propose(scale_rows, parent="c-parent", rules=["cache_hint"])[:2]
    with Archive(tmp_path / "archive.sqlite") as a:
        run_id = "r-test"
        for e in (edit, other):
            put_candidate(a, e, scale_rows.ptx)
        put_proof(a, run_id, "w1", _report(edit, "faster", 1.5, executor=StandInExecutor.name))
        assert best_winner(a, run_id, "c-parent") is None
        put_proof(a, run_id, "w1", _report(other, "faster", 1.1))
        assert best_winner(a, run_id, "c-parent")[0].id == other.id
