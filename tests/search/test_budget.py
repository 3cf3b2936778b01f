"""Cost-aware budgets: GPU seconds told to strategies, a GPU-second budget, successive halving of the screen."""

import pytest

from kernelloop.tune.search import make_strategy
from kernelloop.tune.search.budget import GpuBudget, Screening, SuccessiveHalving
from search_spaces import grid_space, grid_value


def test_strategies_add_up_the_gpu_seconds_they_are_told():
    for name in ("staged", "random", "optuna-tpe"):
        s = make_strategy(name, grid_space(), 0)
        for _ in range(5):
            c = s.ask()
            s.tell(c, grid_value(c), costs={"compile_s": 1.0, "verify_s": 0.5, "bench_s": 0.25, "wall_s": 9.0})
        assert s.spent_s == pytest.approx(5 * 1.75), name       # wall time is not GPU time
        c = s.ask()
        s.tell(c, grid_value(c))                                # a caller that passes no costs still works
        assert s.spent_s == pytest.approx(5 * 1.75)


def test_gpu_budget_ends_when_the_seconds_are_spent():
    b = GpuBudget(10.0)
    for _ in range(3):
        b.charge({"compile_s": 2.0, "bench_s": 1.0})
    assert not b.exhausted and b.left == pytest.approx(1.0) and b.evaluations == 3
    b.charge(1.5)
    assert b.exhausted
    with pytest.raises(ValueError):
        GpuBudget(0)


def test_successive_halving_promotes_the_best_third_and_anything_that_could_win():
    sh = SuccessiveHalving(eta=3, margin=0.05, min_screened=3)
    assert all(sh.promote(v) for v in (10.0, 12.0, 11.0))       # the first ones always
    sh.full(10.0)
    assert sh.promote(10.4)            # within 5 % of the best full timing: it could win
    assert not sh.promote(30.0)        # far behind and not in the best third of the screens
    assert sh.promote(9.0)             # the best screen yet
    assert sh.as_dict()["stopped"] == 1 and sh.as_dict()["promoted"] == 5


def test_screening_times_in_full_at_once_what_the_model_ranks_in_its_best_third():
    sc = Screening(samples=5, eta=3)
    assert sc.gate("w", 0.2) is None and sc.direct == 1           # predicted in the best third: full timing
    halving = sc.gate("w", 0.9)
    assert isinstance(halving, SuccessiveHalving) and halving.screen_samples == 5
    assert sc.gate("w", None) is halving                          # no model: screened, one halving per workload
    assert sc.gate("v", None) is not halving
    sc.full("w", 10.0)
    assert halving.best_full == 10.0 and sc.as_dict()["workloads"]["w"]["screen_samples"] == 5
    with pytest.raises(ValueError):
        Screening(samples=2)


def test_staged_ranks_a_configuration_by_its_predicted_quantile():
    space = grid_space()
    s = make_strategy("staged", space, 0)
    assert s.rank(space[0]) is None                               # no surrogate yet
    for _ in range(20):
        c = s.ask()
        s.tell(c, grid_value(c))
    best = min(space, key=grid_value)
    worst = max(space, key=grid_value)
    assert 0.0 <= s.rank(best) < 1 / 3 < s.rank(worst) <= 1.0
