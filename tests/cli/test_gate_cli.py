"""`kernelloop gate check` (one candidate) and `kernelloop gate precision RUN [--json]` (a run's decisions against its
verdicts); `--gate` of the commands that start runs reaches the run's options (absent: not set, so a resume keeps
the archived mode)."""

import json

import pytest
from typer.testing import CliRunner

from kernelloop.core.archive import Archive
from kernelloop.base.builtin import ops_dir
from kernelloop.cli.app import app
from kernelloop.tune.gate import GateDecision, GateFinding, record_decision
from kernelloop.base.records import Candidate, Environment, Status, Trial, Verdict, Workload
from kernelloop.tune.schedule.library import gluon_ws
from kernelloop.tune.schedule.lower import lower
from kernelloop.tune.schedule.patch import apply_patch
from kernelloop.core.spec import load_op

run = CliRunner().invoke
W = Workload(op="gemm", axes={"M": 256, "N": 256, "K": 256}, dtype="fp16")


def test_check_rejects_a_broken_schedule_without_building(tmp_path, monkeypatch):
    import kernelloop.core.build.aot as aot
    monkeypatch.setattr(aot, "build_configs", lambda *a, **k: (_ for _ in ()).throw(AssertionError("built")))
    broken = apply_patch(gluon_ws(), [{"op": "replace", "path": "/roles/1/k_step/0/parity", "value": "phase"}])
    cand = Candidate(op="gemm", template="schedule", source=lower(broken), config=gluon_ws().config())
    path = tmp_path / "c.json"
    path.write_text(cand.to_json())
    out = run(app, ["gate", "check", str(path), "--workload", "M=2048,N=4096,K=4096", "--json"])
    assert out.exit_code == 1
    d = json.loads(out.stdout)
    assert d["passed"] is False and d["findings"][0]["field"] == "roles[1].k_step[0].parity"
    assert run(app, ["gate", "check", str(tmp_path / "none.json"), "--workload", "M=1"]).exit_code == 2


@pytest.fixture
def gated_run(tmp_path):
    """A run folder whose archive holds three decisions: passed then PASSED, passed then RUNTIME_ERROR, and one
    rejected in audit mode (the resources check) that then PASSED."""
    env = Environment(device="cuda", gpu="NVIDIA H200", driver="580", cuda="13.0", torch="2.11", triton="3.6.0",
                      python="3.12", host="h", properties={})
    with Archive(tmp_path / "archive.sqlite") as a:
        a.create_run("r", load_op(ops_dir() / "gemm").spec, {}, "m", env, {"gate": "audit"})
        for i, (passed, status) in enumerate([(True, Status.PASSED), (True, Status.RUNTIME_ERROR),
                                              (False, Status.PASSED)]):
            c = Candidate(op="gemm", template="schedule_ws", source=f"# {i}", config={"i": i})
            found = [] if passed else [GateFinding(check="resources", field="ring.stages", message="too deep")]
            record_decision(a, "r", GateDecision(candidate_id=c.id, workload_id=W.id, template=c.template,
                                                 passed=passed, findings=found, enforced=False))
            a.record_trial(Trial(run_id="r", index=i, candidate_id=c.id, workload_id=W.id, manifest_hash="m",
                                 verdict=Verdict(status=status, message="" if status is Status.PASSED else "planned"), started=0.0, finished=0.0), c, W)
    return tmp_path


def test_precision_as_json(gated_run):
    out = run(app, ["gate", "precision", str(gated_run), "--json"])
    assert out.exit_code == 0
    (p,) = json.loads(out.stdout)
    assert (p["run_id"], p["gate"], p["decisions"], p["passed"], p["rejected"]) == ("r", "audit", 3, 2, 1)
    assert p["passed_then_failed"] == {"RUNTIME_ERROR": 1} and p["pass_precision"] == 0.5
    assert (p["rejected_and_ran"], p["rejected_yet_passed"], p["reject_precision"]) == (1, 1, 0.0)
    assert p["rejections_by_check"] == {"resources": 1}


def test_precision_as_text(gated_run, tmp_path_factory):
    out = run(app, ["gate", "precision", str(gated_run / "archive.sqlite")], terminal_width=200)
    assert out.exit_code == 0
    assert "gate audit" in out.output and "3 decision(s), 2 passed, 1 rejected" in out.output
    assert "then failed: RUNTIME_ERROR 1" in out.output and "pass precision 50 %" in out.output
    assert "yet PASSED 1" in out.output and "rejections by check: resources 1" in out.output
    assert run(app, ["gate", "precision", str(tmp_path_factory.mktemp("empty"))]).exit_code == 2


def test_gate_option_reaches_the_run_options(monkeypatch):
    import kernelloop.tune.loop as entry
    seen = []

    class Stop(RuntimeError):
        """Ends the command once the options are seen."""

    def fake(bundle, wls, opts, run_dir, **kw):   # the one way into the loop (tune/loop/entry.py)
        seen.append(opts)
        raise Stop("run stopped here")

    monkeypatch.setattr(entry, "run", fake)
    base = ["optimize", "layernorm", "--device", "interpret", "--budget", "1"]
    for extra in (["--gate", "off"], ["--gate", "audit"], []):
        assert run(app, base + extra).exit_code == 3
    assert [o.gate for o in seen] == ["off", "audit", "on"]
    assert ["gate" in o.model_fields_set for o in seen] == [True, True, False]   # absent: a resume keeps its mode
    bad = run(app, base + ["--gate", "maybe"])
    assert bad.exit_code == 2 and "maybe" in bad.output and len(seen) == 3


@pytest.fixture
def broken_candidate(tmp_path, monkeypatch):
    """A candidate whose schedule deadlocks (rejected before any build; a build would fail the test)."""
    import kernelloop.core.build.aot as aot
    monkeypatch.setattr(aot, "build_configs", lambda *a, **k: (_ for _ in ()).throw(AssertionError("built")))
    broken = apply_patch(gluon_ws(), [{"op": "replace", "path": "/roles/1/k_step/0/parity", "value": "phase"}])
    path = tmp_path / "c.json"
    path.write_text(Candidate(op="gemm", template="schedule", source=lower(broken), config=gluon_ws().config()).to_json())
    return path


def test_check_refuses_a_workload_without_the_ops_axes(broken_candidate):
    out = run(app, ["gate", "check", str(broken_candidate), "--workload", "M=256,N=256"], terminal_width=200)
    assert out.exit_code == 2 and "missing K" in out.output, out.output
    out = run(app, ["gate", "check", str(broken_candidate), "--workload", "M=256,N=256,K=256,Q=2"], terminal_width=200)
    assert out.exit_code == 2 and "unknown Q" in out.output, out.output
    out = run(app, ["gate", "check", str(broken_candidate), "--workload", "M=256,N=256,K=256", "--dtype", "int7"])
    assert out.exit_code == 2 and "fp16" in out.output


def test_check_records_only_under_a_run_of_the_candidates_op(broken_candidate, tmp_path):
    from kernelloop.tune.gate import decisions
    env = Environment(device="cuda", gpu="NVIDIA H200", driver="580", cuda="13.0", torch="2.11", triton="3.6.0",
                      python="3.12", host="h", properties={})
    with Archive(tmp_path / "archive.sqlite") as a:
        a.create_run("g", load_op(ops_dir() / "gemm").spec, {}, "m", env, {})
        a.create_run("n", load_op(ops_dir() / "rmsnorm").spec, {}, "m", env, {})
    base = ["gate", "check", str(broken_candidate), "--workload", "M=256,N=256,K=256", "--archive", str(tmp_path)]
    nope = run(app, base + ["--run-id", "r-nope"], terminal_width=200)
    assert nope.exit_code == 2 and "'r-nope' is not a run" in nope.output and "g, n" in nope.output
    other = run(app, base + ["--run-id", "n"], terminal_width=200)
    assert other.exit_code == 2 and "'rmsnorm'" in other.output
    assert run(app, base).exit_code == 2                       # the newest run is rmsnorm's
    ok = run(app, base + ["--run-id", "g"], terminal_width=200)
    assert ok.exit_code == 1 and "not built: rejected before the build" in ok.output and "None" not in ok.output
    with Archive(tmp_path / "archive.sqlite", readonly=True) as a:
        assert [len(decisions(a, r)) for r in ("g", "n", "r-nope")] == [1, 0, 0]


def test_precision_says_why_a_run_has_no_decision(tmp_path):
    env = Environment(device="interpret", gpu="", driver="", cuda="", torch="2.13", triton="3.9.0", python="3.11", host="h",
                      properties={})
    with Archive(tmp_path / "archive.sqlite") as a:
        spec = load_op(ops_dir() / "rmsnorm").spec
        a.create_run("i", spec, {}, "m", env, {"gate": "on", "device": "interpret"})
        a.create_run("o", spec, {}, "m", env, {"gate": "off", "device": "cuda"})
        a.create_run("old", spec, {}, "m", env, {"device": "cuda"})
    lines = run(app, ["gate", "precision", str(tmp_path)], terminal_width=300).output.splitlines()
    said = dict(zip(lines[::2], lines[1::2]))                 # each run's line, then why it has no decision
    assert "the gate was on, but in the interpreter only candidates lowered from a schedule are decided" in \
        said["i (gate on): 0 decision(s), 0 passed, 0 rejected"]
    assert said["o (gate off): 0 decision(s), 0 passed, 0 rejected"].endswith("the gate was off")
    assert "record no gate mode" in said["old (gate not recorded): 0 decision(s), 0 passed, 0 rejected"]


def test_messages_are_printed_verbatim(tmp_path):
    out = run(app, ["gate", "check", str(tmp_path / "[a] :factory:.json"), "--workload", "M=1"], terminal_width=300)
    assert out.exit_code == 2 and "[a] :factory:.json" in out.output, out.output


def test_a_finding_without_a_field_prints_check_and_message(tmp_path, monkeypatch):
    """A build finding names no schedule field: 'shared: ...', not 'shared : ...'."""
    import kernelloop.tune.gate as gate_mod
    finding = GateFinding(check="shared", field="", message="_gemm_kernel: 1572864 bytes of shared memory > 232448")
    monkeypatch.setattr(gate_mod, "gate_candidate", lambda cand, spec, w: GateDecision(
        candidate_id=cand.id, workload_id=w.id, template=cand.template, passed=False, findings=[finding]))
    cand = Candidate(op="gemm", template="tiled", source="# t", config={"BLOCK_M": 256})
    path = tmp_path / "c.json"
    path.write_text(cand.to_json())
    out = run(app, ["gate", "check", str(path), "--workload", "M=256,N=256,K=256"], terminal_width=200)
    assert out.exit_code == 1
    assert "  shared: _gemm_kernel: 1572864 bytes" in out.output and "shared :" not in out.output
