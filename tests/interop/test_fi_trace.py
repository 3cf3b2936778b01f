"""A real run (`kernelloop optimize ops/rmsnorm --budget 2` in the interpreter, one per module, on two small workloads
of two dtypes: every check is per trial, per workload or per dtype, so the op's four interpreter workloads would add
only interpreter time) exported with `kernelloop trace export`: the dataset's layout, every file valid against the
format's records, every trial one Trace whose numbers are the archive's; imported back and optimized again; the
status mapping; refusals."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.core.archive import Archive
from kernelloop.cli.trace import trace_app
from kernelloop.deliver.interop import STATUS_MAP, InteropError, export_trace, load_dataset, solution_name
from kernelloop.deliver.interop import flashinfer_trace as fi
from kernelloop.base.records import ErrorMetrics, OpSpec, Status, Verdict

from fi_helpers import ROOT

runner = CliRunner()


def _optimize(op_dir: Path, out: Path, budget: str, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "kernelloop.cli.app", "optimize", str(op_dir), "--budget", budget, "--no-confirm",
           "--device", "interpret", "--out", str(out), "--json", *extra]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("fi_run")
    wl = base / "workloads.toml"
    wl.write_text('op = "rmsnorm"\n[[workload]]\naxes = { M = 3, N = 300 }\ndtype = "fp16"\n'
                  '[[workload]]\naxes = { M = 2, N = 200 }\ndtype = "fp32"\n')
    out = base / "run"
    r = _optimize(ops_dir() / "rmsnorm", out, "2", "--workloads", str(wl))
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def archived(run_dir):
    with Archive(run_dir / "archive.sqlite", readonly=True) as a:
        run = a.runs()[0]
        trials = a.trials(run["id"])
        cands = {t.candidate_id: a.get_candidate(t.candidate_id) for t in trials}
        wls = {t.workload_id: a.get_workload(t.workload_id) for t in trials}
    return run, trials, cands, wls


@pytest.fixture(scope="module")
def dataset(run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("fi_ds") / "ds"
    r = runner.invoke(trace_app, ["export", str(run_dir), "--out", str(out), "--op", str(ops_dir() / "rmsnorm"),
                                  "--json"])
    assert r.exit_code == 0, r.output
    return out, json.loads(r.stdout)


def test_export_layout_and_validity(dataset, archived):
    out, summary = dataset
    run, trials, cands, wls = archived
    dtypes = sorted({w.dtype.value for w in wls.values()})
    assert sorted(p.name for p in (out / "definitions" / "rmsnorm").iterdir()) == [f"rmsnorm_{d}.json" for d in dtypes]
    assert summary["traces"] == len(trials) and summary["skipped"] == []
    assert summary["workloads"] == len(run["options"]["workloads"])
    files = [Path(f) for f in summary["files"]]
    assert all(f.is_file() for f in files)
    kinds = {"definitions": fi.Definition, "solutions": fi.Solution, "workloads": fi.Trace, "traces": fi.Trace}
    for f in files:
        model = kinds[f.relative_to(out).parts[0]]
        texts = f.read_text().splitlines() if f.suffix == ".jsonl" else [f.read_text()]
        assert f.suffix == (".jsonl" if model is fi.Trace else ".json")
        for text in texts:
            data = json.loads(text)
            rec = model.model_validate(data)
            assert json.loads(rec.model_dump_json()) == data  # no field the format's records would drop
    ds = load_dataset(out)  # also checks: workloads/ holds workload entries only, traces/ full traces only
    assert sum(len(v) for v in ds.traces.values()) == len(trials)
    for dname, d in ds.definitions.items():
        for s in ds.solutions[dname]:
            assert (out / "solutions" / "kernelloop" / d.op_type / dname / f"{s.name}.json").is_file()
        uuids = {t.workload.uuid for t in ds.workloads[dname]}
        for t in ds.traces[dname]:
            assert t.workload.uuid in uuids and t.solution in {s.name for s in ds.solutions[dname]}


def test_traces_carry_the_archive_numbers(dataset, archived):
    out, _ = dataset
    run, trials, cands, wls = archived
    ds = load_dataset(out)
    traces = {(t.solution, t.workload.uuid): t for v in ds.traces.values() for t in v}
    for trial in trials:
        w, c = wls[trial.workload_id], cands[trial.candidate_id]
        t = traces[(solution_name(c, f"rmsnorm_{w.dtype.value}"), w.id)]
        ev = t.evaluation
        assert ev.status.value == STATUS_MAP[trial.verdict.status].value == "PASSED"
        m = trial.measurement
        assert math.isclose(ev.performance.latency_ms, m.kernel.median_us / 1000, rel_tol=1e-12)
        eager = next(r for r in m.ratios if r.baseline == "eager")
        assert math.isclose(ev.performance.speedup_factor, eager.speedup, rel_tol=1e-12)
        assert math.isclose(ev.performance.reference_latency_ms, ev.performance.latency_ms * eager.speedup,
                            rel_tol=1e-12)
        assert ev.correctness.max_absolute_error == max(x.max_abs for x in trial.verdict.metrics)
        assert ev.correctness.max_relative_error == max(x.max_rel for x in trial.verdict.metrics)
        assert ev.environment.hardware == "cpu_triton_interpreter"
        assert ev.environment.libs["torch"] == run["environment"]["torch"]
        assert datetime.fromisoformat(ev.timestamp.replace("Z", "+00:00")).timestamp() == pytest.approx(trial.finished)
        assert trial.id in ev.log and "interpreter-wallclock" in ev.log
        assert t.workload.axes == w.axes and t.workload.inputs["eps"].value == 1e-6
        assert isinstance(t.workload.inputs["x"], fi.RandomInput)


def test_export_is_repeatable(dataset, run_dir, tmp_path, monkeypatch):
    out, summary = dataset
    monkeypatch.chdir(ROOT)  # the op folder found as ./ops/<op>, as `kernelloop show` users run it
    r = runner.invoke(trace_app, ["export", str(run_dir), "--out", str(tmp_path / "again"), "--json"])
    assert r.exit_code == 0, r.output
    for f in summary["files"]:
        rel = Path(f).relative_to(out)
        assert (tmp_path / "again" / rel).read_bytes() == Path(f).read_bytes()


def test_import_back_and_optimize(dataset, tmp_path):
    """The dataset's fastest fp16 solution becomes an op kernelloop optimizes (verifies, times) again."""
    out, _ = dataset
    ds = load_dataset(out)
    passed = [t for t in ds.traces["rmsnorm_fp16"] if t.evaluation.status is fi.EvaluationStatus.PASSED]
    best = min(passed, key=lambda t: t.evaluation.performance.latency_ms).solution
    ops = tmp_path / "ops"
    r = runner.invoke(trace_app, ["import", str(out), "--ops", str(ops), "--definition", "rmsnorm_fp16",
                                  "--solution", best, "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.stdout)
    assert info["op"] == "rmsnorm_fp16" and sorted(Path(f).name for f in info["files"]) == \
        ["reference.py", "solution.py", "spec.toml", "workloads.toml"]
    res = _optimize(ops / "rmsnorm_fp16", tmp_path / "run2", "1")
    assert res.returncode == 0, res.stderr[-3000:]
    with Archive(tmp_path / "run2" / "archive.sqlite", readonly=True) as a:
        run = a.runs()[0]
        trials = a.trials(run["id"])
    assert len(trials) == len(ds.workloads["rmsnorm_fp16"])
    assert all(t.verdict.status is Status.PASSED and t.measurement is not None for t in trials)


def test_status_mapping(archived):
    run, trials, cands, wls = archived
    spec = OpSpec.model_validate(run["spec"])
    t0 = trials[0]
    w, c = wls[t0.workload_id], cands[t0.candidate_id]
    metrics = [ErrorMetrics(output="y", max_abs=0.5, max_rel=0.25, mismatched=3, total=10, matched_ratio=0.7)]
    verdicts = {
        Status.COMPILE_ERROR: Verdict(status=Status.COMPILE_ERROR, message="syntax"),
        Status.WRONG_SHAPE: Verdict(status=Status.WRONG_SHAPE, case="c", message="y replaced"),
        Status.WRONG_VALUES: Verdict(status=Status.WRONG_VALUES, case="c", metrics=metrics),
        Status.WRONG_NONFINITE: Verdict(status=Status.WRONG_NONFINITE, case="c"),
        Status.WRONG_INCOMPLETE: Verdict(status=Status.WRONG_INCOMPLETE, case="c"),
        Status.WRONG_INPUT_MUTATED: Verdict(status=Status.WRONG_INPUT_MUTATED, case="c"),
        Status.WRONG_NONDETERMINISTIC: Verdict(status=Status.WRONG_NONDETERMINISTIC, case="c", metrics=metrics),
        Status.RUNTIME_ERROR: Verdict(status=Status.RUNTIME_ERROR, message="illegal address", log="Traceback ..."),
        Status.TIMEOUT: Verdict(status=Status.TIMEOUT, message="deadline"),
        Status.REJECTED: Verdict(status=Status.REJECTED, message="static rule library-op"),
        Status.TAMPERED: Verdict(status=Status.TAMPERED, message="the trial's row fails its MAC"),
    }
    assert set(verdicts) | {Status.PASSED} == set(Status) == set(STATUS_MAP)
    for status, v in verdicts.items():
        tr = export_trace(t0.model_copy(update={"verdict": v, "measurement": None}), w, c, run["environment"], spec)
        ev = fi.Trace.model_validate_json(tr.model_dump_json()).evaluation
        assert ev.status is STATUS_MAP[status] and ev.performance is None
        assert ev.log.splitlines()[0].endswith(status.value + (f": {v.message}" if v.message else ""))
        if ev.status is fi.EvaluationStatus.INCORRECT_NUMERICAL:
            assert ev.correctness.extra["kernelloop_status"] == status.value
            if v.metrics:
                assert (ev.correctness.max_absolute_error, ev.correctness.max_relative_error) == (0.5, 0.25)
            else:
                assert math.isnan(ev.correctness.max_absolute_error)
        else:
            assert ev.correctness is None
    assert STATUS_MAP[Status.WRONG_VALUES] is fi.EvaluationStatus.INCORRECT_NUMERICAL
    assert STATUS_MAP[Status.REJECTED] is fi.EvaluationStatus.RUNTIME_ERROR
    with pytest.raises(InteropError) as e:
        export_trace(t0.model_copy(update={"measurement": None}), w, c, run["environment"], spec)
    assert e.value.field == "trial.measurement"
    other = next(x for x in wls.values() if x.id != w.id)
    with pytest.raises(InteropError) as e:
        export_trace(t0, other, c, run["environment"], spec)
    assert e.value.field == "trial.workload_id"


def test_export_refuses_a_changed_reference(run_dir, tmp_path):
    op = tmp_path / "rmsnorm"
    shutil.copytree(ops_dir() / "rmsnorm", op)
    (op / "reference.py").write_text((op / "reference.py").read_text() + "\n# edited after the run\n")
    r = runner.invoke(trace_app, ["export", str(run_dir), "--out", str(tmp_path / "ds"), "--op", str(op)])
    assert r.exit_code == 2
    assert "reference" in r.output and "changed since run" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "ds").exists()
    r = runner.invoke(trace_app, ["export", str(tmp_path / "nowhere"), "--out", str(tmp_path / "ds")])
    assert r.exit_code == 2 and "no archive" in r.output


def test_registered_as_kernelloop_trace():
    from kernelloop.cli.app import app
    r = runner.invoke(app, ["trace", "--help"])
    assert r.exit_code == 0 and "export" in r.output and "import" in r.output
