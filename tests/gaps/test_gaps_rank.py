"""kernelloop.tune.gaps and `kernelloop gaps`: gaps recorded in two runs' archives (by the LLM sink's events and a
strategy's search events) and failure classes recurring across runs, ranked by tasks blocked and expected gain."""

import json

from typer.testing import CliRunner

from kernelloop.core.archive import Archive
from kernelloop.base.builtin import ops_dir
from kernelloop.cli.app import app
from kernelloop.tune.gaps import CapabilityGap, rank, record_gap
from kernelloop.base.records import Candidate, Environment, Status, Trial, Verdict, Workload
from kernelloop.core.spec import load_op

ENV = Environment(device="cuda", gpu="NVIDIA H200", driver="580", cuda="13.0", torch="2.11", triton="3.6.0",
                  python="3.12", host="h", properties={})


def workload(m):
    return Workload(op="gemm", axes={"M": m, "N": 256, "K": 256}, dtype="fp16")


def fill(path, run, ms):
    spec = load_op(ops_dir() / "gemm").spec
    with Archive(path) as a:
        a.create_run(run, spec, {}, "m", ENV, {})
        for i, m in enumerate(ms):
            record_gap(a, run, CapabilityGap(op="gemm", kind="inexpressible", need="a fused bias epilogue",
                                             field="epilogue.fused", source="llm:m", workload_id=workload(m).id,
                                             expected_change_pct=-4.0 - i))
        a.log_event(run, "search", {"kind": "capability-gap", "gap": CapabilityGap(
            op="gemm", kind="outside_space", need="num_stages up from num_stages=6", field="num_stages",
            source="planner:E-X", workload_id=workload(ms[0]).id).model_dump(mode="json")})
        cand = Candidate(op="gemm", template="schedule_ws", source=f"# {run}", config={},
                         hypothesis="latency_us down -12%")
        a.record_trial(Trial(run_id=run, index=0, candidate_id=cand.id, workload_id=workload(ms[0]).id,
                             manifest_hash="m", verdict=Verdict(status=Status.TIMEOUT, message="deadline"),
                             started=0.0, finished=0.0), cand, workload(ms[0]))


def test_rank_across_runs(tmp_path):
    fill(tmp_path / "a.sqlite", "r1", [64, 128])
    fill(tmp_path / "b.sqlite", "r2", [256])
    with Archive(tmp_path / "a.sqlite") as a, Archive(tmp_path / "b.sqlite") as b:
        ranked = rank([a, b])
        alone = rank([a])
    first = ranked[0]
    assert (first.kind, first.field, first.tasks_blocked, first.occurrences, first.runs) == \
        ("inexpressible", "epilogue.fused", 3, 3, 2)
    assert first.expected_gain_pct == 5.0 and first.sources == ["llm:m"]
    timeout = next(r for r in ranked if r.kind == "failure_class")
    assert (timeout.need, timeout.field, timeout.runs, timeout.expected_gain_pct) == ("timeout", "schedule_ws", 2, 12.0)
    assert {r.kind for r in ranked} == {"inexpressible", "failure_class", "outside_space"}
    assert not any(r.kind == "failure_class" for r in alone), "one run's failure is not yet a recurring class"


def test_gaps_command(tmp_path):
    fill(tmp_path / "a.sqlite", "r1", [64])
    out = CliRunner().invoke(app, ["gaps", str(tmp_path / "a.sqlite"), "--json", "--min-recurrence", "1"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert [r["kind"] for r in rows] == ["failure_class", "inexpressible", "outside_space"]  # by tasks, then gain
    table = CliRunner().invoke(app, ["gaps", str(tmp_path / "a.sqlite")])
    assert table.exit_code == 0 and "epilogue.fused" in table.output
    empty = tmp_path / "none"
    empty.mkdir()
    assert CliRunner().invoke(app, ["gaps", str(empty)]).exit_code == 2


def test_gaps_command_reads_a_corrupt_file_as_an_archive_error_and_prints_needs_verbatim(tmp_path):
    (tmp_path / "corrupt.json").write_text("not an archive {")
    out = CliRunner().invoke(app, ["gaps", str(tmp_path / "corrupt.json")])
    assert out.exit_code == 3 and "cannot read" in out.output, out.output
    with Archive(tmp_path / "m.sqlite") as a:
        a.create_run("r", load_op(ops_dir() / "gemm").spec, {}, "m", ENV, {})
        record_gap(a, "r", CapabilityGap(op="gemm", kind="inexpressible", need="a [a] :factory: epilogue",
                                         field="epilogue.fused", source="llm:m", workload_id=workload(64).id))
    table = CliRunner().invoke(app, ["gaps", str(tmp_path / "m.sqlite"), "--min-recurrence", "1"], terminal_width=200)
    assert table.exit_code == 0 and "a [a] :factory: epilogue" in table.output
