"""The controller's side of failure-aware, cost-aware search: strategies are told each trial's verdict status and
costs, a budget in GPU seconds ends the search once the trials' measured compile + verify + timing seconds
reach it, and a screen times candidates with a few samples first, in full only when promoted."""

import pytest

import kernelloop.tune.loop.proposers as loop
from kernelloop.core.archive import Archive
from kernelloop.tune.loop import Budget, Controller, RunOptions
from kernelloop.base.records import Workload


@pytest.fixture
def told(monkeypatch):
    """Every tell the controller makes to a strategy, with its keywords."""
    calls = []
    real = loop.make_strategy

    def recording(name, space, seed, **options):
        strat = real(name, space, seed, **options)
        inner = strat.tell

        def tell(config, value, **kw):
            calls.append((config, value, kw))
            return inner(config, value, **kw)

        strat.tell = tell
        return strat

    monkeypatch.setattr(loop, "make_strategy", recording)
    return calls


def test_strategies_are_told_status_and_costs_and_a_screen_times_in_full_only_what_is_promoted(
        layernorm, tmp_path, told, monkeypatch):
    from kernelloop.tune.search.budget import SuccessiveHalving

    verdicts = iter([True, False])          # the first screened candidate is promoted, the second is not
    screened = []
    real = SuccessiveHalving.promote

    def promote(self, value):
        screened.append(value)
        real(self, value)
        return next(verdicts)

    monkeypatch.setattr(SuccessiveHalving, "promote", promote)
    w = Workload(op="layernorm", axes={"M": 4, "N": 300}, dtype="fp32")
    opts = RunOptions(device="interpret", budget=Budget(evals=2), strategy="exhaustive", checks=1, confirm=False,
                      screen_samples=3)
    run_dir = tmp_path / "run"
    Controller(layernorm, [w], opts, run_dir).run()
    assert len(told) == 2
    for _, value, kw in told:
        assert kw["status"] == "PASSED" and value is not None
        assert set(kw["costs"]) == {"compile_s", "verify_s", "bench_s", "wall_s"}
        assert kw["costs"]["verify_s"] > 0   # measured, not a default
    with Archive(run_dir / "archive.sqlite") as a:
        run_id = a.runs()[0]["id"]
        full, screen = sorted(a.trials(run_id), key=lambda t: t.index)
        (event,) = a.events(run_id, "screen")
    # exhaustive has no model: both candidates are screened (3 samples); the promoted one is then timed in full
    assert len(screened) == 2
    assert full.measurement.policy.name == "interpreter-wallclock" and len(full.measurement.kernel_samples_us) == 5
    assert screen.measurement.policy.name == "interpreter-wallclock-screen"
    assert len(screen.measurement.kernel_samples_us) == 3 and screen.verdict.status.value == "PASSED"
    assert told[1][1] == screen.measurement.kernel.median_us == screened[1]   # the strategy learns the screen value
    assert full.costs.bench_s > 0 and screen.costs.bench_s > 0
    assert event["payload"]["samples"] == 3 and event["payload"]["direct"] == 0


def test_gpu_second_budget_ends_the_search_and_says_so(layernorm, tmp_path, told):
    w = Workload(op="layernorm", axes={"M": 4, "N": 300}, dtype="fp32")
    opts = RunOptions(device="interpret", budget=Budget(evals=6, gpu_seconds=1e-6), strategy="exhaustive", checks=1,
                      confirm=False)
    run_dir = tmp_path / "run"
    Controller(layernorm, [w], opts, run_dir).run()
    with Archive(run_dir / "archive.sqlite") as a:
        run = a.runs()[0]
        assert len(a.trials(run["id"])) == 1   # the first trial spends more than a microsecond
        (event,) = a.events(run["id"], "budget")
        assert event["payload"]["reason"] == "gpu seconds" and event["payload"]["spent"] > 0
        assert event["payload"]["evaluations"] == 1
        assert run["status"] == "complete"


def test_gpu_second_budget_is_stored_with_the_options():
    assert RunOptions(device="interpret").as_dict()["budget"]["gpu_seconds"] is None   # every field is archived
    opts = RunOptions(device="interpret", budget=Budget(gpu_seconds=30.0))
    assert opts.as_dict()["budget"] == {"evals": 24, "seconds": None, "gpu_seconds": 30.0}
    # archives of format 2 kept the budget as three fields: read back into the one record
    assert RunOptions.from_archived({"device": "interpret", "budget_evals": 5, "budget_gpu_seconds": 30.0}).budget \
        == Budget(evals=5, gpu_seconds=30.0)
