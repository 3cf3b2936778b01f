import math

import pytest

from kernelloop.tune.search.objectives import (MultiWorkloadObjective, geomean_speedup, overfitting, specialize,
                                          worst_speedup)

BASE = {"small": 10.0, "large": 100.0}


def test_weighted_geomean_and_worst_shape():
    t = {"small": 5.0, "large": 200.0}            # 2x on small, 0.5x on large
    assert geomean_speedup(t, BASE) == pytest.approx(1.0)
    assert geomean_speedup(t, BASE, {"small": 3, "large": 1}) == pytest.approx(math.exp((3 * math.log(2) - math.log(2)) / 4))
    assert worst_speedup(t, BASE) == (pytest.approx(0.5), "large")
    assert geomean_speedup({"small": None, "large": 1.0}, BASE) is None


def test_regression_limit_turns_a_good_mean_into_a_failure():
    obj = MultiWorkloadObjective(BASE, min_speedup=0.95)
    assert obj({"small": 2.0, "large": 120.0}) is None          # 5x and 0.83x: the mean is great, one shape regresses
    assert obj({"small": 9.0, "large": 99.0}) == pytest.approx(1 / math.sqrt(10 / 9 * 100 / 99))


def test_specialization_splits_shapes_that_one_configuration_cannot_serve():
    table = {"a": {"small": 5.0, "large": 200.0}, "b": {"small": 20.0, "large": 50.0},
             "c": {"small": 9.0, "large": 90.0}}
    spec = specialize(table, BASE, max_configs=3)
    assert spec.assignment == {"small": "a", "large": "b"}
    assert spec.geomean_speedup == pytest.approx(2.0) and spec.worst_speedup == pytest.approx(2.0)
    assert spec.steps[0]["added"] == "c"                         # the best single configuration comes first
    one = specialize(table, BASE, max_configs=1)
    assert one.configs == ["c"]


def test_overfitting_shows_what_a_single_shape_choice_costs_elsewhere():
    table = {"a": {"small": 5.0, "large": 200.0}, "b": {"small": 20.0, "large": 50.0}}
    rep = overfitting(table, "a", ["small", "large"])
    assert rep["small"]["ratio_to_best"] == pytest.approx(1.0)
    assert rep["large"]["ratio_to_best"] == pytest.approx(4.0) and rep["large"]["best"] == "b"
