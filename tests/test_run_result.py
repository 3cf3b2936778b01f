"""Controller.run's RunResult, the run options archived whole and read back whole on resume, and throughput."""

from __future__ import annotations

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from kernelloop.core.archive import Archive
from kernelloop.cli.app import app
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.tune.loop import AS_BEFORE, KEPT, OPTIONS_FORMAT, Budget, Controller, RunOptions
from kernelloop.base.records import Costs, RunResult, Status, Trial, Verdict, Workload
from kernelloop.base.records.summary import WarmStart
from kernelloop.tune.loop.throughput import compute

W = Workload(op="layernorm", axes={"M": 4, "N": 300}, dtype="fp32")

NON_DEFAULT = RunOptions(
    device="interpret", budget=Budget(evals=3, seconds=900.0, gpu_seconds=120.0), screen_samples=4,
    strategy="planner", seed=7,
    checks=1, confirm=False, sanitize=False, baselines=["eager"], static_rules=False, gate="audit",
    timeouts=Timeouts(check=61.0, bench=62.0), start={"BLOCK_N": "512"}, profile_timeout_s=12.0,
    templates=["rowwise"], fixed={"ROWS": "1"},
    devices=["interpret:0", "interpret:1"], executor="ray", in_flight=3, build_jobs=2)
# a start is the planner's, a prior a warm-started strategy's: the prior's field is set in a second record
WARM = NON_DEFAULT.model_copy(update={"strategy": "staged", "start": None,
                                      "prior": WarmStart(files=[{"path": "space.json", "sha256": "ab" * 32}],
                                                         configurations=3)})


def test_every_field_has_a_non_default_value_in_the_round_trip():
    defaults = RunOptions(device="cuda")
    assert [k for k in RunOptions.model_fields
            if getattr(NON_DEFAULT, k) == getattr(defaults, k) and getattr(WARM, k) == getattr(defaults, k)] == []


def test_options_check_themselves():
    """A start outside the planner, a prior for a strategy that takes none, a short screen, devices of another
    kind: refused by the record itself, with the API's message."""
    from pydantic import ValidationError
    for bad, match in [({"start": {"BLOCK_N": "512"}, "strategy": "random"}, "start is only used by strategy planner"),
                       ({"prior": {"files": [{"path": "s.json", "sha256": "ab" * 32}], "configurations": 1},
                        "strategy": "exhaustive"}, "prior is only used by strategy"),
                       ({"screen_samples": 2}, "screen_samples 2: a screen needs at least 3"),
                       ({"devices": ["cuda:0"]}, "a run on interpret needs interpret devices, not cuda:0"),
                       ({"strategy": "guess"}, "strategy 'guess': choose from"),
                       ({"profile_timeout_s": 0}, "profile_timeout_s 0: seconds must be positive")]:
        with pytest.raises(ValidationError, match=match):
            RunOptions(device="interpret", **bad)


def test_options_are_archived_whole_and_read_back_whole():
    stored = json.loads(json.dumps(NON_DEFAULT.archived({"salt": "s"}, [W])))   # as the archive keeps it
    assert stored["options_format"] == OPTIONS_FORMAT and stored["key"] == {"salt": "s"}
    assert stored["timeouts"] == {"check": 61.0, "bench": 62.0}
    back = RunOptions.from_archived(stored)
    assert back == NON_DEFAULT and isinstance(back.timeouts, Timeouts)
    assert RunOptions.from_archived(json.loads(json.dumps(WARM.archived({"salt": "s"}, [W])))) == WARM
    with pytest.raises(ValueError):   # an unknown key is refused, not dropped
        RunOptions.from_archived({**stored, "nonesuch": 1})


def test_an_archive_of_the_old_format_reads_back():
    old = {"device": "interpret", "budget_evals": 2, "budget_seconds": None, "strategy": "planner", "seed": 3,
           "checks": 1, "confirm": False, "sanitize": True, "baselines": None, "static_rules": True,
           "start": {"BLOCK_N": "512"}, "profile_timeout_s": 30.0, "templates": ["rowwise"],
           "secret": "from before keys", "workloads": [W.model_dump(mode="json")]}
    back = RunOptions.from_archived(old)
    assert back.start == {"BLOCK_N": "512"} and back.templates == ["rowwise"] and back.seed == 3
    assert back.budget == Budget(evals=2) and back.fixed is None and back.timeouts == Timeouts()


def test_resumed_keeps_the_archived_fields_left_none_and_takes_this_invocations_others():
    now = RunOptions(device="interpret", budget=Budget(evals=9), strategy="random", seed=7, checks=1, confirm=True,
                     sanitize=False, static_rules=False, timeouts=Timeouts(check=5.0, bench=6.0))
    got = now.resumed(NON_DEFAULT)
    for k in RunOptions.model_fields:
        want = getattr(NON_DEFAULT, k) if k in AS_BEFORE or k in KEPT else getattr(now, k)
        assert getattr(got, k) == want, k
    assert now.model_copy(update={"templates": ["chunked"]}).resumed(NON_DEFAULT).templates == ["chunked"]
    # the gate mode: the archived one unless this invocation names one (the default is on for a new run)
    assert now.gate == "on" and got.gate == "audit"
    assert RunOptions(device="interpret", gate="off").resumed(NON_DEFAULT).gate == "off"
    assert RunOptions(device="interpret", gate="on").resumed(NON_DEFAULT).gate == "on"


def _trial(i: int, started: float, finished: float, compile_s: float, verify_s: float, bench_s: float) -> Trial:
    return Trial(run_id="r", index=i, candidate_id=f"c{i}", workload_id="w", manifest_hash="m",
                 verdict=Verdict(status=Status.PASSED), started=started, finished=finished,
                 costs=Costs(compile_s=compile_s, verify_s=verify_s, bench_s=bench_s, wall_s=finished - started))


def test_throughput_over_sessions_and_uncovered_trials():
    trials = [_trial(0, 100.0, 110.0, 2.0, 5.0, 3.0), _trial(1, 110.0, 120.0, 1.0, 4.0, 4.0),
              # a later invocation killed before it logged its session: the span of its trials counts
              _trial(2, 500.0, 510.0, 3.0, 6.0, 1.0), _trial(3, 510.0, 530.0, 0.0, 2.0, 8.0)]
    tp = compute(trials, [{"started": 100.0, "finished": 140.0}], "NVIDIA H200")
    assert tp.trials == 4 and tp.sessions == 1 and tp.wall_s == pytest.approx(40.0 + 30.0)
    assert tp.trials_per_minute == pytest.approx(4 * 60 / 70)
    assert tp.build_wait_s == pytest.approx(6.0) and tp.build_wait_fraction == pytest.approx(6 / 70)
    (dev,) = tp.devices
    assert dev.device == "NVIDIA H200"
    assert dev.verify_s == pytest.approx(3 + 3 + 3 + 2) and dev.bench_s == pytest.approx(16.0)   # builds excluded
    assert dev.busy_fraction == pytest.approx(27 / 70)
    empty = compute([], [], "interpret")
    assert empty.trials_per_minute is None and empty.devices == [] and empty.build_wait_fraction is None


def test_throughput_per_device_with_builds_ahead_and_the_measured_wait():
    from kernelloop.base.records import BuildArtifact
    ahead = BuildArtifact(compile_s=4.0, toolchain="t", compiled_by="build stage", first_call_s=0.1)
    first = BuildArtifact(compile_s=1.5, toolchain="t", compiled_by="first call")
    trials = [_trial(0, 100.0, 110.0, 4.0, 5.0, 3.0).model_copy(update={"device": "cuda:0", "build": ahead}),
              _trial(1, 101.0, 111.0, 1.5, 4.0, 4.0).model_copy(update={"device": "cuda:1", "build": first}),
              # rejected by the build stage: no device, no device time
              _trial(2, 102.0, 102.0, 0.0, 0.0, 0.0)]
    tp = compute(trials, [{"started": 100.0, "finished": 120.0, "build_wait_s": 2.5}], "NVIDIA H200")
    assert [d.device for d in tp.devices] == ["cuda:0", "cuda:1"] and {d.model for d in tp.devices} == {"NVIDIA H200"}
    zero, one = tp.devices
    assert zero.trials == 1 and zero.verify_s == pytest.approx(5.0)   # compiled ahead: all of it is verification
    assert one.verify_s == pytest.approx(2.5)                          # the first call compiled: taken out
    assert zero.busy_fraction == pytest.approx(8 / 20) and one.busy_fraction == pytest.approx(6.5 / 20)
    assert tp.build_wait_s == pytest.approx(2.5 + 1.5)                 # measured wait + the first call's compile


def test_run_returns_a_run_result_resume_reads_the_options_back_and_show_prints_throughput(layernorm, tmp_path):
    run_dir = tmp_path / "run"
    first = RunOptions(device="interpret", budget=Budget(evals=2), strategy="exhaustive", seed=5, checks=1, confirm=False,
                       templates=["rowwise"], fixed={"ROWS": "1"}, baselines=["eager"],
                       timeouts=Timeouts(check=120.0, bench=120.0))
    result = Controller(layernorm, [W], first, run_dir).run()
    assert isinstance(result, RunResult)
    assert result.stop_reason == "evaluation budget" and result.evaluated == 2 and result.replayed == 0
    assert result.status == "complete" and result.archive == str(run_dir / "archive.sqlite")
    with Archive(run_dir / "archive.sqlite") as a:
        run = a.runs()[0]
        trials = a.trials(run["id"])
        assert RunOptions.from_archived(run["options"]) == first   # stored once, whole
    assert result.run_id == run["id"] and sum(result.counts.values()) == 2
    (wr,) = result.workloads
    assert wr.trials == 2 and wr.workload_id == W.id
    if wr.passed:
        best = min((t for t in trials if t.verdict.status is Status.PASSED),
                   key=lambda t: t.measurement.kernel.median_us)
        assert wr.best_trial == best.id and wr.best_kernel_us == best.measurement.kernel.median_us
    tp = result.throughput
    assert tp.trials == 2 and tp.sessions == 1 and tp.wall_s > 0 and tp.trials_per_minute > 0
    assert tp.devices[0].device == "interpret" and 0 < tp.devices[0].busy_fraction <= 1
    # the interpreter compiles nothing: the build record says so, and no compile time is invented
    assert all(t.build.compiled_by == "interpreter" and t.costs.compile_s == 0 and t.build.first_call_s > 0
               for t in trials)
    assert all(t.device == "interpret" for t in trials)

    # the archive as the previous format wrote it (RunOptions.as_dict of old: no timeouts, no format mark)
    con = sqlite3.connect(run_dir / "archive.sqlite")
    try:
        stored = json.loads(con.execute("SELECT options_json FROM runs").fetchone()[0])
        old = {k: v for k, v in stored.items() if k not in ("options_format", "timeouts", "start",
                                                              "profile_timeout_s", "budget", "prior")}
        old.update(budget_evals=stored["budget"]["evals"], budget_seconds=stored["budget"]["seconds"])
        con.execute("UPDATE runs SET options_json = ?", (json.dumps(old),))
        con.commit()
    finally:
        con.close()
    again = RunOptions(device="interpret", budget=Budget(evals=3), strategy="exhaustive", seed=5, checks=1, confirm=False)
    ctl = Controller(layernorm, [W], again, run_dir)
    more = ctl.run(resume=True)
    assert ctl.options.templates == ["rowwise"] and ctl.options.fixed == {"ROWS": "1"}
    assert ctl.options.baselines == ["eager"] and ctl.options.budget.evals == 3
    assert more.run_id == result.run_id and more.replayed == 2 and more.evaluated == 1
    assert more.throughput.trials == 3 and more.throughput.sessions == 2
    assert more.throughput.wall_s > tp.wall_s

    runner = CliRunner()
    shown = runner.invoke(app, ["show", str(run_dir), "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert data["throughput"] == more.throughput.model_dump(mode="json")
    table = runner.invoke(app, ["show", str(run_dir)], env={"COLUMNS": "300"})
    assert table.exit_code == 0, table.output
    assert "throughput:" in table.output and "trials/min" in table.output and "build wait" in table.output
    assert "interpret: 3 trials, busy" in table.output
