"""Schema version 2 of the run archive: the profiles table, put_profile / profile."""

import sqlite3

import pytest

from kernelloop.core.archive import Archive, ArchiveError, LATEST_VERSION, MIGRATIONS
from kernelloop.core.archive.schema import migrate
from kernelloop.base.records import (Axis, Candidate, Environment, KernelProfile, OpSpec, ParamSpace, ProfileReport,
                                Status, TemplateSpec, TensorSpec, Tolerance, Trial, Verdict, Workload)

SPEC = OpSpec(name="layernorm", axes={"M": Axis(), "N": Axis()}, inputs=[TensorSpec(name="x", shape=["M", "N"])],
              outputs=[TensorSpec(name="y", shape=["M", "N"])], dtypes=["fp16"],
              tolerance={"fp16": Tolerance(atol=1e-2, rtol=1e-2)}, bytes_formula="2 * M * N * elem",
              flops_formula="8 * M * N", reference="reference.py",
              templates=[TemplateSpec(name="rowwise", file="kernel.py", params=[ParamSpace(name="B", values=[1])])])
ENV = Environment(device="cuda", gpu="NVIDIA H200", torch="2.11", triton="3.6", python="3.12", host="h")
W = Workload(op="layernorm", axes={"M": 8, "N": 8}, dtype="fp16")
CAND = Candidate(op="layernorm", template="rowwise", source="def launch(): pass", config={"B": 1})


def _trial() -> Trial:
    return Trial(run_id="r1", index=0, candidate_id=CAND.id, workload_id=W.id, manifest_hash="m",
                 verdict=Verdict(status=Status.PASSED), started=0.0, finished=1.0)


def _report(trial: Trial, note: str) -> ProfileReport:
    return ProfileReport(trial_id=trial.id, candidate_id=trial.candidate_id, workload_id=trial.workload_id,
                         kernel=KernelProfile(kernel="_k", source="csv", metrics={"sol_dram_pct": 81.5}),
                         notes=[note])


@pytest.fixture
def arch(tmp_path):
    with Archive(tmp_path / "archive.sqlite") as a:
        a.create_run("r1", SPEC, {"m": 1}, "m", ENV, {})
        a.record_trial(_trial(), CAND, W)
        yield a


def test_version_two_adds_profiles(arch):
    assert LATEST_VERSION >= 2 and MIGRATIONS[1].version == 2
    cols = [r[1] for r in arch._connection().execute("PRAGMA table_info(profiles)")]
    assert cols == ["run_id", "trial_id", "json"]


def test_put_and_get_replace(arch):
    t = _trial()
    assert arch.profile("r1", t.id) is None
    arch.put_profile("r1", t.id, _report(t, "first"))
    got = arch.profile("r1", t.id)
    assert got == _report(t, "first") and got.kernel.metrics["sol_dram_pct"] == 81.5
    arch.put_profile("r1", t.id, _report(t, "second"))
    assert arch.profile("r1", t.id).notes == ["second"]
    assert arch._connection().execute("SELECT COUNT(*) FROM profiles").fetchone()[0] == 1


def test_profile_must_belong_to_a_trial_of_the_run(arch):
    t = _trial()
    with pytest.raises(ArchiveError, match="no such trial"):
        arch.put_profile("r1", "t-unknown", _report(t, "x").model_copy(update={"trial_id": "t-unknown"}))
    with pytest.raises(ArchiveError, match="about trial"):
        arch.put_profile("r1", "t-other", _report(t, "x"))
    with pytest.raises(ArchiveError, match="no such trial"):
        arch.put_profile("r-other", t.id, _report(t, "x"))


def test_version_one_archive_is_upgraded_in_place(tmp_path):
    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(db, isolation_level=None)
    assert migrate(conn, MIGRATIONS[:1]) == 1
    conn.execute("INSERT INTO events(run_id, t, kind, json) VALUES ('r', 0, 'note', '{}')")
    conn.close()
    with Archive(db) as a:
        assert a.schema_version == LATEST_VERSION
        assert [e["kind"] for e in a.events("r")] == ["note"]
        assert a.profile("r", "t") is None
        assert a.baseline_profile("r", "w", "eager") is None
