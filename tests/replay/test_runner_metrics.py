"""The replay executor as referee, and the metrics computed from best-so-far curves."""

import numpy as np
import pytest

from kernelloop.tune.replay import RecordedSpace, ReplayError, replay
from kernelloop.tune.replay.metrics import (best_so_far, bootstrap_ci, cutoff_fevals, evals_to_within,
                                       fraction_of_optimum, methodology_score, random_curve, score_range)
from kernelloop.tune.replay.runner import drive


def space(n=50):
    cfgs = [{"i": i} for i in range(n)]
    return RecordedSpace("line", cfgs, [float(1 + i) if i % 7 else None for i in range(n)], ["ok"] * n)


def test_curves_and_thresholds():
    c = best_so_far([None, 5.0, 3.0, 4.0, 1.02], budget=7)
    assert np.isinf(c[0]) and c.tolist()[1:] == [5.0, 3.0, 3.0, 1.02, 1.02, 1.02]
    assert evals_to_within(c, 1.0) == 5 and evals_to_within(c, 1.0, tol=3.0) == 3
    assert evals_to_within(best_so_far([9.0], 3), 1.0) is None
    assert fraction_of_optimum(c, 1.0, 3) == pytest.approx(1 / 3) and fraction_of_optimum(c, 1.0, 1) == 0.0


def test_random_curve_is_the_expected_rank_formula():
    vals = np.arange(1.0, 100.0)                         # N = 99 distinct values, 1 is the optimum
    # autotuning_methodology's closed form: 0-based index round(M (N+1) / (M+1)) into the values sorted
    # worst first (capped at N-1): M=1 -> index 50 -> 49; M=4 -> 80 -> 19; M=9 -> 90 -> 9; M=99 -> 98 -> 1
    assert random_curve(vals, np.array([1, 4, 9, 99])).tolist() == [49.0, 19.0, 9.0, 1.0]
    assert cutoff_fevals(vals, 0.95) >= 1 and score_range(vals, budget=5)[-1] <= 5


def test_methodology_score_is_zero_for_the_random_curve_and_one_for_the_optimum():
    vals = np.arange(1.0, 1001.0)
    fe = score_range(vals, budget=400)
    rnd = np.full(400, np.inf)
    rnd[fe - 1] = random_curve(vals, fe)
    assert methodology_score(rnd, vals, fe) == pytest.approx(0.0)
    assert methodology_score(np.full(400, 1.0), vals, fe) == pytest.approx(1.0)
    assert methodology_score(np.full(400, 1000.0), vals, fe) < 0


def test_referee_rejects_outside_and_repeated_configurations():
    sp = space()

    class Outside:
        name = "outside"
        events = []

        def ask(self):
            return {"i": 999}

        def tell(self, c, v, *, status=None, costs=None):
            pass

    class Twice(Outside):
        name = "twice"

        def ask(self):
            return {"i": 1}

    with pytest.raises(ReplayError, match="not in line"):
        drive(Outside(), sp, 0, 5)
    with pytest.raises(ReplayError, match="twice"):
        drive(Twice(), sp, 0, 5)


def test_replay_serves_recorded_values_including_failures():
    sp = space()
    t = replay(sp, "exhaustive", 0, 10, record_keys=True)
    assert t.values == [None, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, None, 9.0, 10.0]
    assert t.curve()[-1] == 2.0 and t.strategy_seconds >= 0


def test_replay_tells_each_failure_its_status_and_each_evaluation_its_cost():
    n = 12
    sp = RecordedSpace("costed", [{"i": i} for i in range(n)], [None if i % 4 == 0 else float(i) for i in range(n)],
                       ["OUT_OF_RESOURCES" if i % 4 == 0 else "ok" for i in range(n)], costs=[0.5 * i for i in range(n)])
    told = []

    class Recorder:
        name = "recorder"
        events = []

        def __init__(self):
            self.left = [{"i": i} for i in range(n)]

        def ask(self):
            return self.left.pop(0) if self.left else None

        def tell(self, c, v, *, status=None, costs=None):
            told.append((c["i"], v, status, costs))

    t = drive(Recorder(), sp, 0, n)
    assert told[0] == (0, None, "OUT_OF_RESOURCES", 0.0) and told[1] == (1, 1.0, None, 0.5)
    assert t.costs == [0.5 * i for i in range(n)]
    assert replay(space(), "random", 0, 5).costs == []          # a recording without costs: none


def test_bootstrap_interval_contains_the_point_and_shrinks_with_more_seeds():
    rng = np.random.default_rng(0)
    few = [rng.normal(1, 1, 5), rng.normal(2, 1, 5)]
    many = [rng.normal(1, 1, 200), rng.normal(2, 1, 200)]
    mean = lambda xs: float(np.mean([x.mean() for x in xs]))  # noqa: E731
    p, lo, hi = bootstrap_ci(few, mean, 500)
    assert lo <= p <= hi
    p2, lo2, hi2 = bootstrap_ci(many, mean, 500)
    assert hi2 - lo2 < hi - lo and lo2 < 1.5 < hi2


def test_kernel_tuner_strategies_replay_the_same_recording(tmp_path):
    pytest.importorskip("kernel_tuner")
    import json as _json

    from kernelloop.tune.replay import load_space
    from kernelloop.tune.replay.external import kernel_tuner_run, plain_cache

    entries = {f"{a},{b}": {"a": a, "b": b, "time": 1.0 + abs(a - 8) + abs(b - 2)}
               for a in (1, 2, 4, 8, 16) for b in (1, 2, 3)}
    p = tmp_path / "kt.json"
    p.write_text(_json.dumps({"tune_params_keys": ["a", "b"], "tune_params": {"a": [1, 2, 4, 8, 16], "b": [1, 2, 3]},
                              "objective": "time", "kernel_name": "toy", "device_name": "toy", "problem_size": [4],
                              "cache": entries}))
    sp = load_space(p, valid_only=True)
    with plain_cache(p) as plain:
        t1 = kernel_tuner_run(plain, sp, "random_sample", seed=3, budget=6)
        t2 = kernel_tuner_run(plain, sp, "random_sample", seed=3, budget=6)
    assert t1.values == t2.values and len(t1.values) == 6
    assert set(t1.values) <= set(sp.values)


def test_kernel_tuner_searches_the_failures_when_they_are_kept(tmp_path):
    """failures_kept: every recorded configuration is in Kernel Tuner's space, a failed one a failed evaluation
    (tune_cache alone restricts it to the successes)."""
    pytest.importorskip("kernel_tuner")
    import json as _json

    from kernelloop.tune.replay import load_space
    from kernelloop.tune.replay.external import kernel_tuner_run

    entries = {f"{a},{b}": {"a": a, "b": b, "time": "RuntimeFailedConfig" if a * b >= 16 else 1.0 + a + b,
                            "compile_time": 1000.0, "verification_time": 0, "benchmark_time": 500.0}
               for a in (1, 2, 4, 8, 16) for b in (1, 2, 3)}
    p = tmp_path / "kt.json"
    p.write_text(_json.dumps({"tune_params_keys": ["a", "b"], "tune_params": {"a": [1, 2, 4, 8, 16], "b": [1, 2, 3]},
                              "objective": "time", "kernel_name": "toy", "device_name": "toy", "problem_size": [4],
                              "cache": entries}))
    full = load_space(p)
    kept = kernel_tuner_run(p, full, "random_sample", seed=1, budget=len(full), failures_kept=True)
    dropped = kernel_tuner_run(p, full, "random_sample", seed=1, budget=len(full))
    assert len(kept.values) == len(full) and sum(v is None for v in kept.values) == full.n_failed > 0
    assert None not in dropped.values and len(dropped.values) == len(full) - full.n_failed
    assert kept.costs == [1.5] * len(full)
