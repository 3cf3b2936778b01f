"""compute-sanitizer at export (deliver/package/export.py, tune/select/sanitize.py): findings leave a winner out with the tool's
report in audit/<op>.json, a clean kernel is packaged, not_run is recorded with its reason, and a winner the run's
own sanitizer rejected is not packaged.

The tool is a stand-in script ($KERNELLOOP_COMPUTE_SANITIZER) printing recorded reports (tests/fixtures/sanitizer/);
`sanitize` itself runs, with `cuda_available=True` and `warm=False` (the kernel cannot launch on a CUDA device here).
"""

import functools
import json
import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from kernelloop.core.archive import Archive  # noqa: E402
from kernelloop.base.builtin import ops_dir  # noqa: E402
from kernelloop.deliver.package.export import ExportOptions, export_package  # noqa: E402
from kernelloop.tune.select.sanitize import INTERPRETER_REASON, SANITIZE_EVENT  # noqa: E402
from kernelloop.core.verify.sanitizer import ERROR_EXIT, sanitize  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "sanitizer"
ON_A_DEVICE = functools.partial(sanitize, cuda_available=True, warm=False)
pytestmark = pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter tests")

@pytest.fixture(scope="module")
def run_dir(persistent_rmsnorm_runs) -> Path:
    """rmsnorm's persistent template pinned to PROGRAMS_PER_SM=1,num_warps=4,PREFETCH=0 on M 5 at N 256 and M 23 at
    N 512, fp16 (budget 1, no confirmation; tests/conftest.py runs it beside the other modules' runs)."""
    return persistent_rmsnorm_runs["tests/package/test_export_sanitize.py"]


def tool(folder: Path, report: str, code: int) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "compute-sanitizer"
    exe.write_text(f"#!/bin/sh\ncat {FIX / report}\nexit {code}\n")
    exe.chmod(0o755)
    return str(exe)


def _export(run_dir: Path, out: Path, sanitizer=None, **options):
    notes = []
    result = export_package([run_dir], ExportOptions(out=out, ops_root=ops_dir(), ranges=False, **options),
                            on_note=notes.append, sanitizer=sanitizer)
    audit = json.loads((out / "audit" / "rmsnorm.json").read_text())
    return result.builds["rmsnorm"], audit, notes


def test_findings_leave_the_winner_out_with_the_report(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLOOP_COMPUTE_SANITIZER", tool(tmp_path / "t", "racecheck_shared_hazard.txt",
                                                            ERROR_EXIT))
    build, audit, notes = _export(run_dir, tmp_path / "p", ON_A_DEVICE)
    assert build.table.entries == []
    checks = audit["sanitizer"]
    assert checks and {c["status"] for c in checks} == {"findings"} and {c["stage"] for c in checks} == {"export"}
    c = checks[0]
    assert c["verdict"].startswith("compute-sanitizer ") and "Race reported between Write access" in c["report"]
    assert c["workload"]["M"] <= 5 and len(c["tools"]) == 4
    assert len(audit["left_out"]) == 2 and all("rejected by compute-sanitizer" in x for x in audit["left_out"])
    assert any("compute-sanitizer findings" in n for n in notes)


def test_a_clean_kernel_is_packaged_and_the_outcome_audited(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLOOP_COMPUTE_SANITIZER", tool(tmp_path / "t", "clean.txt", 0))
    build, audit, _ = _export(run_dir, tmp_path / "p", ON_A_DEVICE)
    assert len(build.table.entries) == 2 and audit["left_out"] == []
    assert {c["status"] for c in audit["sanitizer"]} == {"clean"}
    assert all(t["status"] == "clean" for c in audit["sanitizer"] for t in c["tools"])


def test_not_run_is_audited_with_its_reason(run_dir, tmp_path, monkeypatch):
    build, audit, notes = _export(run_dir, tmp_path / "p1")   # an interpreter run: nothing compiled to check
    assert len(build.table.entries) == 2
    assert {(c["status"], c["reason"]) for c in audit["sanitizer"]} == {("not_run", INTERPRETER_REASON)}
    assert any("compute-sanitizer not run" in n for n in notes)
    monkeypatch.setenv("KERNELLOOP_COMPUTE_SANITIZER", str(tmp_path / "absent"))
    build, audit, _ = _export(run_dir, tmp_path / "p2", ON_A_DEVICE)
    assert len(build.table.entries) == 2
    assert all(c["status"] == "not_run" and c["reason"].startswith("no compute-sanitizer") for c in audit["sanitizer"])
    _, audit, _ = _export(run_dir, tmp_path / "p3", ON_A_DEVICE, sanitize=False)
    assert {c["status"] for c in audit["sanitizer"]} == {"off"}


def test_a_winner_the_runs_sanitizer_rejected_is_not_packaged(run_dir, tmp_path):
    copy = tmp_path / "run"
    copy.mkdir()
    (copy / "archive.sqlite").write_bytes((run_dir / "archive.sqlite").read_bytes())
    with Archive(copy / "archive.sqlite") as a:
        rid = a.runs()[0]["id"]
        t = next(t for t in a.trials(rid, status="PASSED") if a.get_workload(t.workload_id).axes["M"] == 23)
        a.log_event(rid, SANITIZE_EVENT, {"stage": "confirm", "workload_id": t.workload_id,
                                          "label": a.get_workload(t.workload_id).label, "candidate": t.candidate_id,
                                          "status": "findings", "candidate_id": t.candidate_id,
                                          "verdict": "compute-sanitizer memcheck: Invalid __global__ read",
                                          "report": "== memcheck: findings"})
    build, audit, _ = _export(copy, tmp_path / "p")
    assert [e.shapes[0].axes["M"] for e in build.table.entries] == [5]
    (confirm,) = [c for c in audit["sanitizer"] if c["stage"] == "confirm"]
    assert confirm["status"] == "findings" and confirm["report"] == "== memcheck: findings"
    assert any("before the run's confirmation" in x for x in audit["left_out"])
