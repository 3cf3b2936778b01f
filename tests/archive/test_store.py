"""Tests of the SQLite run archive: round trips, idempotence, atomicity, lineage, crash safety."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelloop.core.archive import Archive, ArchiveError, LATEST_VERSION, MIGRATIONS, Migration
from kernelloop.core.archive.schema import migrate
from kernelloop.core.device import VIRTUAL_HOPPER
from kernelloop.base.records import (
    Axis, BuildArtifact, BuildFailure, Candidate, Costs, Environment, ErrorMetrics, Measurement, OpSpec,
    ParamSpace, Ratio, Stats, Status, TemplateSpec, TensorSpec, TimingPolicy, Tolerance, Trial, Verdict, Workload,
)

RUN = "run-0001"
MANIFEST = {"reference": "sha:ref", "verifier": "v1", "policy": "p-123", "environment": "e-abc"}
MHASH = "m-0123456789abcdef"

KERNEL = textwrap.dedent('''
    import triton
    import triton.language as tl

    @triton.jit
    def _kernel(X, Y, W, B, N, eps, BLOCK_N: tl.constexpr):
        pass  # variant {variant}

    def launch(x, weight, bias, **config):
        return x
''')


# ---------------------------------------------------------------- record builders

def make_spec() -> OpSpec:
    return OpSpec(
        name="layernorm", description="LayerNorm over the last axis",
        axes={"M": Axis(description="rows"), "N": Axis(description="features")},
        inputs=[TensorSpec(name="x", shape=["M", "N"]), TensorSpec(name="weight", shape=["N"], init="weight"),
                TensorSpec(name="bias", shape=["N"], init="bias")],
        outputs=[TensorSpec(name="y", shape=["M", "N"])],
        scalars={"eps": 1e-5}, dtypes=["fp16", "fp32"],
        tolerance={"fp16": Tolerance(atol=1e-2, rtol=1e-2), "fp32": Tolerance(atol=1e-4, rtol=1e-4)},
        bytes_formula="2 * M * N * elem + 2 * N * elem", flops_formula="8 * M * N", reference="reference.py",
        templates=[TemplateSpec(name="rowwise", file="kernel.py",
                                params=[ParamSpace(name="BLOCK_N", values=[1024, 2048]),
                                        ParamSpace(name="num_warps", values=[4, 8])])],
    )


def make_env() -> Environment:
    return Environment(device="cuda", gpu="NVIDIA H200", driver="560.35", cuda="12.4", torch="2.5.1",
                       triton="3.1.0", python="3.11.7", host="node-1",
                       properties=VIRTUAL_HOPPER.with_(virtual=False, name="NVIDIA H200"))


def make_candidate(variant: int = 0, parents: list[str] | None = None, pad: int = 0) -> Candidate:
    return Candidate(op="layernorm", template="rowwise", source=KERNEL.format(variant=variant) + "#" * pad,
                     config={"BLOCK_N": 1024, "num_warps": 4 + variant % 2}, parent_ids=parents or [],
                     proposer="grid", hypothesis=f"variant {variant} hides latency")


def make_workload(m: int = 4096, n: int = 1024, dtype: str = "fp16") -> Workload:
    return Workload(op="layernorm", axes={"M": m, "N": n}, dtype=dtype, weight=2.0)


def make_policy() -> TimingPolicy:
    return TimingPolicy(name="cold-l2-events", clock="cuda-events", warmup=5, samples=5, flush_bytes=256 << 20,
                        sleep_cycles=10000, bootstrap=1000)


def make_measurement(subject: str, workload_id: str, median: float = 10.0) -> Measurement:
    ks = [median * f for f in (0.98, 0.99, 1.0, 1.01, 1.03)]
    cs = [k + 5.0 for k in ks]
    return Measurement(
        subject=subject, workload_id=workload_id, policy=make_policy(), kernel_samples_us=ks, call_samples_us=cs,
        kernel=Stats(median_us=median, ci_low_us=median * 0.99, ci_high_us=median * 1.01, iqr_us=0.2, n=5),
        call=Stats(median_us=median + 5, ci_low_us=median + 4.9, ci_high_us=median + 5.1, iqr_us=0.2, n=5),
        bytes_moved=16.8e6, gbps=16.8e6 / (median * 1e3), roofline_fraction=0.8,
        ratios=[Ratio(baseline="eager", speedup=1.5, ci_low=1.45, ci_high=1.55, verdict="FASTER")],
        environment={"sm_clock_mhz": 1980},
    )


def make_trial(c: Candidate, w: Workload, index: int, status: Status = Status.PASSED,
               run_id: str = RUN, median: float = 10.0) -> Trial:
    build = BuildArtifact(kernel_names=["_kernel"], registers=40, spills=0, shared_bytes=0, compile_s=0.8,
                          toolchain="triton 3.1.0 / sm_90")
    measurement = None
    if status is Status.PASSED:
        verdict = Verdict(status=status)
        measurement = make_measurement(c.id, w.id, median)
    elif status is Status.WRONG_VALUES:
        verdict = Verdict(status=status, message="outside tolerance", case=f"{w.label} seed=0",
                          metrics=[ErrorMetrics(output="y", max_abs=0.5, max_rel=0.1, mismatched=3,
                                                total=4096 * 1024, worst_index=[1, 2])])
    elif status is Status.COMPILE_ERROR:
        build = BuildFailure(stage="compile", log="error: bad", compile_s=0.1, toolchain="triton 3.1.0")
        verdict = Verdict(status=status, message="compile failed", log="error: bad")
    else:
        verdict = Verdict(status=status, message=f"{status.value.lower()} happened", case=f"{w.label} seed=0")
    return Trial(run_id=run_id, index=index, candidate_id=c.id, workload_id=w.id, manifest_hash=MHASH,
                 build=build, verdict=verdict, measurement=measurement,
                 costs=Costs(compile_s=0.8, verify_s=0.2, bench_s=1.0, wall_s=2.1),
                 started=1_700_000_000.0 + index, finished=1_700_000_002.1 + index)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "run" / "archive.sqlite"


@pytest.fixture
def arch(db_path: Path):
    with Archive(db_path) as a:
        a.create_run(RUN, make_spec(), MANIFEST, MHASH, make_env(), {"budget": 100, "seed": 0})
        yield a


def table_counts(a: Archive) -> dict[str, int]:
    conn = a._connection()
    return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("runs", "candidates", "lineage", "workloads", "trials")}


# ---------------------------------------------------------------- opening and schema

def test_open_sets_pragmas_and_schema(db_path: Path):
    with Archive(db_path) as a:
        conn = a._connection()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert a.schema_version == LATEST_VERSION == len(MIGRATIONS)
    assert a.closed
    a.close()  # idempotent
    with pytest.raises(ArchiveError, match="closed"):
        a.runs()
    # Reopening applies nothing twice.
    with Archive(db_path) as a:
        rows = a._connection().execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        assert [r[0] for r in rows] == [m.version for m in MIGRATIONS]
        assert a.integrity_check() == "ok"


def test_later_migration_is_applied_once(db_path: Path):
    Archive(db_path).close()
    extra = MIGRATIONS + (Migration(LATEST_VERSION + 1, "add a note column",
                                    ("ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT ''",)),)
    conn = sqlite3.connect(db_path, isolation_level=None)
    assert migrate(conn, extra) == LATEST_VERSION + 1
    assert migrate(conn, extra) == LATEST_VERSION + 1
    assert "note" in [r[1] for r in conn.execute("PRAGMA table_info(runs)")]
    conn.close()
    # This code does not know version LATEST+1: refuse rather than misread the file.
    with pytest.raises(ArchiveError, match="newer"):
        Archive(db_path)


def test_readonly_open_never_changes_the_file(db_path: Path, tmp_path: Path):
    """An archive written by older code is read through a migrated in-memory snapshot: the file keeps its bytes
    and its schema version; writes through the read-only handle stay in the snapshot."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db_path, isolation_level=None)
    assert migrate(conn, MIGRATIONS[:1]) == 1  # as version-1 code left it
    conn.close()
    before = db_path.read_bytes()
    with Archive(db_path, readonly=True) as a:
        assert a.schema_version == LATEST_VERSION and a.runs() == []
        a.log_event("r-x", "note", {"written": "to the snapshot"})
        assert [e["payload"] for e in a.events("r-x", "note")] == [{"written": "to the snapshot"}]
    assert db_path.read_bytes() == before
    conn = sqlite3.connect(db_path)
    assert [r[0] for r in conn.execute("SELECT version FROM schema_version")] == [1]
    conn.close()
    with pytest.raises(ArchiveError, match="no such file"):
        Archive(tmp_path / "missing.sqlite", readonly=True)


def test_a_gzipped_archive_opens_read_only_with_the_same_contents(arch: Archive, db_path: Path, tmp_path: Path):
    """Committed results are kept as archive.sqlite.gz: read-only, it opens as the plain file does (through a
    temporary decompressed copy) and is left as it was; a .gz that is not a gzipped archive is a clear error."""
    import gzip
    import shutil
    arch.close()
    gz = tmp_path / "kept" / "archive.sqlite.gz"
    gz.parent.mkdir()
    with open(db_path, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    before = gz.read_bytes()
    with Archive(db_path, readonly=True) as plain, Archive(gz, readonly=True) as packed:
        assert packed.runs() == plain.runs() and packed.runs()[0]["id"] == RUN
        assert packed.trials(RUN) == plain.trials(RUN)
    assert gz.read_bytes() == before
    not_gz = tmp_path / "x.sqlite.gz"
    not_gz.write_bytes(b"plain text, not gzip")
    with pytest.raises(ArchiveError, match="cannot open archive"):
        Archive(not_gz, readonly=True)
    not_db = tmp_path / "y.sqlite.gz"
    with gzip.open(not_db, "wb") as f:
        f.write(b"gzipped, but no SQLite database")
    with pytest.raises(ArchiveError, match="cannot open archive"):
        Archive(not_db, readonly=True)


# ---------------------------------------------------------------- runs

def test_run_round_trip_and_conflict(arch: Archive):
    run = arch.get_run(RUN)
    assert run is not None
    assert run["op"] == "layernorm" and run["status"] == "running"
    assert OpSpec.model_validate(run["spec"]) == make_spec()
    assert Environment.model_validate(run["environment"]) == make_env()
    assert run["manifest"] == MANIFEST and run["manifest_hash"] == MHASH
    assert run["options"] == {"budget": 100, "seed": 0}
    assert arch.get_run("nope") is None

    # Same manifest: resume, a no-op that keeps the original row.
    arch.create_run(RUN, make_spec(), MANIFEST, MHASH, make_env(), {"budget": 999})
    assert arch.get_run(RUN)["options"] == {"budget": 100, "seed": 0}
    assert len(arch.runs()) == 1

    with pytest.raises(ArchiveError, match="different|manifest hash") as ei:
        arch.create_run(RUN, make_spec(), MANIFEST, "m-other", make_env(), {})
    assert MHASH in str(ei.value) and "m-other" in str(ei.value)
    assert arch.get_run(RUN)["manifest_hash"] == MHASH

    arch.set_run_status(RUN, "complete")
    assert arch.get_run(RUN)["status"] == "complete"
    with pytest.raises(ValueError):           # only the statuses a run is ever given (records.run.RunStatus)
        arch.set_run_status(RUN, "finished")
    with pytest.raises(ArchiveError, match="no such run"):
        arch.set_run_status("nope", "complete")

    arch.create_run("run-0002", make_spec(), MANIFEST, "m-2", make_env(), {})
    assert [r["id"] for r in arch.runs()] == [RUN, "run-0002"]


# ---------------------------------------------------------------- candidates, workloads, lineage

def test_candidate_and_workload_round_trip_idempotent(arch: Archive):
    c = make_candidate(1)
    arch.put_candidate(c)
    arch.put_candidate(c)
    assert arch.get_candidate(c.id) == c
    assert arch.get_candidate("c-missing") is None
    w = make_workload()
    arch.put_workload(w)
    arch.put_workload(w)
    assert arch.get_workload(w.id) == w
    assert arch.get_workload("w-missing") is None
    counts = table_counts(arch)
    assert counts["candidates"] == 1 and counts["workloads"] == 1

    # Same content from another parent: the first record (and its lineage) is kept.
    again = make_candidate(1, parents=[make_candidate(7).id])
    assert again.id == c.id
    arch.put_candidate(again)
    assert arch.get_candidate(c.id).parent_ids == []
    assert arch.ancestors(c.id) == []


def test_ancestors_three_generations(arch: Archive):
    g0a, g0b = make_candidate(0), make_candidate(1)
    g1 = make_candidate(2, parents=[g0a.id, g0b.id])
    g2 = make_candidate(3, parents=[g1.id])
    g3 = make_candidate(4, parents=[g2.id, g0a.id])
    for c in (g0a, g0b, g1, g2, g3):
        arch.put_candidate(c)
    arch.put_candidate(g3)  # no duplicate edges
    assert arch._connection().execute("SELECT COUNT(*) FROM lineage").fetchone()[0] == 5
    anc = arch.ancestors(g3.id)
    assert sorted(anc) == sorted({g2.id, g1.id, g0a.id, g0b.id})
    assert len(anc) == len(set(anc))
    assert set(anc[:2]) == {g2.id, g0a.id}  # nearest generation first
    assert sorted(arch.ancestors(g1.id)) == sorted([g0a.id, g0b.id])
    assert arch.ancestors(g2.id)[0] == g1.id
    assert arch.ancestors(g0a.id) == []


def test_ancestors_terminates_on_a_cycle(arch: Archive):
    a = make_candidate(10, parents=[make_candidate(11).id])
    b = make_candidate(11, parents=[a.id])
    arch.put_candidate(a)
    arch.put_candidate(b)
    assert arch.ancestors(a.id) == [b.id]


# ---------------------------------------------------------------- trials

def test_record_trial_round_trip_and_queries(arch: Archive):
    w1, w2 = make_workload(4096, 1024), make_workload(8192, 4096, "fp32")
    cands = [make_candidate(i) for i in range(4)]
    statuses = [Status.PASSED, Status.WRONG_VALUES, Status.COMPILE_ERROR, Status.PASSED]
    assert arch.next_index(RUN) == 0
    expected = []
    for c, st in zip(cands, statuses):
        for w in (w1, w2):
            t = make_trial(c, w, arch.next_index(RUN), st, median=5.0 + len(expected))
            assert arch.record_trial(t, c, w) is True
            expected.append(t)
    assert arch.next_index(RUN) == 8
    assert arch.trials(RUN) == expected
    assert [t.index for t in arch.trials(RUN)] == list(range(8))
    assert arch.trials(RUN, workload_id=w2.id) == [t for t in expected if t.workload_id == w2.id]
    assert arch.trials(RUN, status=Status.PASSED) == [t for t in expected if t.verdict.status is Status.PASSED]
    assert arch.trials(RUN, w1.id, "WRONG_VALUES") == [expected[2]]
    assert arch.count(RUN) == {"PASSED": 4, "WRONG_VALUES": 2, "COMPILE_ERROR": 2}
    assert arch.count("other") == {} and arch.trials("other") == [] and arch.next_index("other") == 0
    assert arch.find_trial(RUN, cands[3].id, w2.id) == expected[7]
    assert arch.find_trial(RUN, cands[3].id, "w-missing") is None
    assert arch.get_candidate(cands[2].id) == cands[2] and arch.get_workload(w2.id) == w2

    row = arch._connection().execute(
        "SELECT kernel_median_us, call_median_us, status, id FROM trials WHERE idx = 0 AND run_id = ?",
        (RUN,)).fetchone()
    assert tuple(row) == (5.0, 10.0, "PASSED", expected[0].id)
    row = arch._connection().execute("SELECT kernel_median_us FROM trials WHERE idx = 2").fetchone()
    assert row[0] is None


def test_record_trial_is_idempotent(arch: Archive):
    c, w = make_candidate(), make_workload()
    t = make_trial(c, w, 0)
    assert arch.record_trial(t, c, w) is True
    before = table_counts(arch)
    assert arch.record_trial(t, c, w) is False
    # A retry under a fresh index (resumed controller) is also refused: no duplicate, index not consumed.
    assert arch.record_trial(make_trial(c, w, 1, Status.RUNTIME_ERROR), c, w) is False
    assert table_counts(arch) == before
    assert arch.trials(RUN) == [t] and arch.next_index(RUN) == 1


def test_record_trial_rejects_inconsistent_input(arch: Archive):
    c, c2, w = make_candidate(0), make_candidate(1), make_workload()
    arch.record_trial(make_trial(c, w, 0), c, w)
    before = table_counts(arch)
    with pytest.raises(ArchiveError, match="index 0 is already used"):
        arch.record_trial(make_trial(c2, w, 0), c2, w)
    with pytest.raises(ValueError):
        arch.record_trial(make_trial(c2, w, 1), c, w)
    with pytest.raises(ArchiveError, match="no such run"):
        arch.record_trial(make_trial(c2, w, 0, run_id="ghost"), c2, w)
    bad = make_trial(c2, w, 1).model_copy(update={"manifest_hash": "m-other"})
    with pytest.raises(ArchiveError, match="manifest hash"):
        arch.record_trial(bad, c2, w)
    assert table_counts(arch) == before
    assert arch.get_candidate(c2.id) is None


# ---------------------------------------------------------------- atomicity and write errors

def test_record_trial_atomic_when_failing_after_first_inserts(arch: Archive, monkeypatch):
    c, w = make_candidate(5, parents=[make_candidate(0).id]), make_workload()
    before = table_counts(arch)

    def boom(conn, trial):
        raise RuntimeError("controller died mid-write")

    monkeypatch.setattr(Archive, "_insert_trial", staticmethod(boom))
    with pytest.raises(RuntimeError, match="mid-write"):
        arch.record_trial(make_trial(c, w, 0), c, w)
    assert table_counts(arch) == before  # candidate, lineage and workload rolled back too
    assert arch.get_candidate(c.id) is None and arch.get_workload(w.id) is None

    def full(conn, w):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.undo()
    monkeypatch.setattr(Archive, "_insert_workload", staticmethod(full))
    with pytest.raises(ArchiveError, match="database or disk is full"):
        arch.record_trial(make_trial(c, w, 0), c, w)
    assert table_counts(arch) == before
    monkeypatch.undo()
    # The archive is still usable and the same trial now goes through.
    assert arch.record_trial(make_trial(c, w, 0), c, w) is True
    assert arch.find_trial(RUN, c.id, w.id) is not None


def test_record_trial_atomic_when_the_trial_insert_fails_in_sqlite(arch: Archive):
    arch._connection().execute(
        "CREATE TRIGGER fail_trials BEFORE INSERT ON trials BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
    c, w = make_candidate(6), make_workload()
    before = table_counts(arch)
    with pytest.raises(ArchiveError, match="injected failure"):
        arch.record_trial(make_trial(c, w, 0), c, w)
    assert table_counts(arch) == before
    assert not arch._connection().in_transaction


def test_disk_full_is_archive_error_and_leaves_db_consistent(arch: Archive):
    conn = arch._connection()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 40}")  # ~160 kB of room at 4 kB pages
    w = make_workload()
    recorded = 0
    with pytest.raises(ArchiveError, match="database or disk is full"):
        for i in range(200):
            c = make_candidate(i, pad=20_000)  # 20 kB of source per candidate
            assert arch.record_trial(make_trial(c, w, arch.next_index(RUN)), c, w)
            recorded += 1
    assert 0 < recorded < 200
    assert not conn.in_transaction
    assert arch.integrity_check() == "ok"
    trials = arch.trials(RUN)
    assert [t.index for t in trials] == list(range(recorded))
    failed = make_candidate(recorded, pad=20_000)
    assert arch.get_candidate(failed.id) is None  # nothing of the failed trial remains
    assert table_counts(arch)["candidates"] == recorded
    conn.execute("PRAGMA max_page_count = 1073741823")
    assert arch.record_trial(make_trial(failed, w, recorded), failed, w)


# ---------------------------------------------------------------- baselines, finals, fronts, events

def test_baselines_round_trip(arch: Archive):
    w = make_workload()
    m = make_measurement("eager", w.id, 15.0)
    arch.put_baseline(RUN, w.id, "eager", m)
    arch.put_baseline(RUN, w.id, "torch.compile", None, note="inductor failed: no triton")
    assert arch.baselines(RUN, w.id) == {"eager": (m, ""), "torch.compile": (None, "inductor failed: no triton")}
    m2 = make_measurement("torch.compile", w.id, 12.0)
    arch.put_baseline(RUN, w.id, "torch.compile", m2, note="retry")
    assert arch.baselines(RUN, w.id)["torch.compile"] == (m2, "retry")
    assert len(arch.baselines(RUN, w.id)) == 2
    assert arch.baselines(RUN, "w-other") == {}


def test_finals_round_trip(arch: Archive):
    c1, c2, w = make_candidate(1), make_candidate(2), make_workload()
    arch.record_trial(make_trial(c1, w, 0), c1, w)
    arch.record_trial(make_trial(c2, w, 1), c2, w)
    m1 = make_measurement(c1.id, w.id, 9.0)
    arch.put_final(RUN, w.id, c1.id, m1)
    assert arch.finals(RUN) == {w.id: (c1.id, m1)}
    m2 = make_measurement(c2.id, w.id, 8.0)
    arch.put_final(RUN, w.id, c2.id, m2)
    assert arch.finals(RUN) == {w.id: (c2.id, m2)}
    with pytest.raises(ArchiveError, match="FOREIGN KEY"):
        arch.put_final(RUN, w.id, "c-unknown", m2)
    assert arch.finals(RUN) == {w.id: (c2.id, m2)}
    assert arch.finals("other") == {}


def test_front_replaced_atomically(arch: Archive):
    w = make_workload()
    cands = [make_candidate(i) for i in range(3)]
    for i, c in enumerate(cands):
        arch.record_trial(make_trial(c, w, i), c, w)
    first = [(cands[2].id, {"kernel_us": 8.0, "call_us": 14.0}), (cands[0].id, {"kernel_us": 9.0, "call_us": 12.5})]
    arch.set_front(RUN, w.id, first)
    assert arch.front(RUN, w.id) == first
    second = [(cands[1].id, {"kernel_us": 7.5, "call_us": 13.0})]
    arch.set_front(RUN, w.id, second)
    assert arch.front(RUN, w.id) == second
    # A bad replacement (duplicate entry) fails as a whole: the previous front stays.
    with pytest.raises(ArchiveError, match="UNIQUE"):
        arch.set_front(RUN, w.id, [(cands[0].id, {}), (cands[0].id, {})])
    assert arch.front(RUN, w.id) == second
    arch.set_front(RUN, w.id, [])
    assert arch.front(RUN, w.id) == []


def test_events_round_trip(arch: Archive):
    arch.log_event(RUN, "start", {"pid": 123})
    arch.log_event(RUN, "note", {"text": "worker restarted", "gpu": 0})
    arch.log_event("other", "start", {})
    ev = arch.events(RUN)
    assert [(e["kind"], e["payload"]) for e in ev] == [("start", {"pid": 123}),
                                                       ("note", {"text": "worker restarted", "gpu": 0})]
    assert ev[0]["t"] <= ev[1]["t"] and ev[0]["seq"] < ev[1]["seq"]
    assert [e["kind"] for e in arch.events(RUN, kind="note")] == ["note"]
    with pytest.raises(ValueError):
        arch.log_event(RUN, "bad", {"x": float("nan")})
    assert len(arch.events(RUN)) == 2


# ---------------------------------------------------------------- crash safety

CHILD = textwrap.dedent('''
    import json, sys
    from kernelloop.core.archive import Archive
    from kernelloop.base.records import Candidate, Trial, Workload

    db, plan_path = sys.argv[1], sys.argv[2]
    plan = json.load(open(plan_path))
    with Archive(db) as a:
        for item in plan:
            c, w = Candidate.from_json(item["candidate"]), Workload.from_json(item["workload"])
            if a.find_trial(item["trial"]["run_id"], c.id, w.id) is not None:
                continue  # recorded before a crash: never evaluated or recorded twice
            t = dict(item["trial"], index=a.next_index(item["trial"]["run_id"]))
            assert a.record_trial(Trial.model_validate(t), c, w)
            print(c.id, w.id, flush=True)  # acknowledged: committed
''')


def _check_archive(db: Path, acknowledged: set[tuple[str, str]]) -> list[Trial]:
    with Archive(db) as a:
        assert a.integrity_check() == "ok"
        rows = a._connection().execute("SELECT json, idx, candidate_id, workload_id FROM trials").fetchall()
        trials = [Trial.from_json(r["json"]) for r in rows]  # every row decodes
        for t, r in zip(trials, rows):
            assert (t.index, t.candidate_id, t.workload_id) == (r["idx"], r["candidate_id"], r["workload_id"])
            assert a.get_candidate(t.candidate_id) is not None and a.get_workload(t.workload_id) is not None
        pairs = [(t.candidate_id, t.workload_id) for t in trials]
        assert len(pairs) == len(set(pairs)), "duplicate trials"
        assert sorted(t.index for t in trials) == list(range(len(trials))), "indices not contiguous"
        assert acknowledged <= set(pairs), "a committed trial was lost"
    return trials


@pytest.mark.timeout(120)
def test_sigkill_mid_run_then_resume(tmp_path: Path):
    db = tmp_path / "run" / "archive.sqlite"
    with Archive(db) as a:
        a.create_run(RUN, make_spec(), MANIFEST, MHASH, make_env(), {})
    workloads = [make_workload(1024 * (k + 1), 1024) for k in range(3)]
    plan, chain = [], []
    for i in range(40):
        c = make_candidate(i, parents=[chain[-1].id] if chain else [], pad=30_000)
        chain.append(c)
        for w in workloads:
            st = [Status.PASSED, Status.WRONG_VALUES, Status.TIMEOUT][(i + len(plan)) % 3]
            plan.append({"candidate": c.to_json(), "workload": w.to_json(),
                         "trial": json.loads(make_trial(c, w, 0, st).to_json())})
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan))
    env = dict(os.environ)
    cmd = [sys.executable, "-c", CHILD, str(db), str(plan_path)]

    acknowledged: set[tuple[str, str]] = set()
    for kill_after in (7, 25, 13):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        got = 0
        while got < kill_after:
            line = proc.stdout.readline()
            assert line, f"child exited early: {proc.wait()} {proc.stderr.read()}"
            acknowledged.add(tuple(line.split()))
            got += 1
        os.kill(proc.pid, signal.SIGKILL)  # anywhere: between trials or inside a transaction
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        for line in proc.stdout.read().splitlines():  # lines written before the kill landed
            acknowledged.add(tuple(line.split()))
        proc.stdout.close()
        proc.stderr.close()
        trials = _check_archive(db, acknowledged)
        assert len(acknowledged) <= len(trials) < len(plan)

    # Resume to the end: every planned trial exactly once, indices 0..n-1.
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=100)
    assert done.returncode == 0, done.stderr
    trials = _check_archive(db, acknowledged)
    assert len(trials) == len(plan)
    planned = {(Candidate.from_json(p["candidate"]).id, Workload.from_json(p["workload"]).id) for p in plan}
    assert {(t.candidate_id, t.workload_id) for t in trials} == planned
    with Archive(db) as a:
        assert a.ancestors(chain[-1].id) == [c.id for c in reversed(chain[:-1])]
