"""Optuna's samplers as strategies: NSGA-II (the genetic sampler) breeds generations from the trials it was told and
ranks failed ones through Optuna's constraints; its population size is checked. (The contract every strategy
passes, Optuna's included, is tests/search/test_contract.py and test_feasibility.py.)"""

import pytest

from kernelloop.tune.search import OptunaNSGAII, make_strategy

from search_spaces import resource_space, resource_value


def drive(s, n):
    for _ in range(n):
        cfg = s.ask()
        v = resource_value(cfg)
        s.tell(cfg, v, status=None if v is not None else "OUT_OF_RESOURCES")


def test_nsga2_breeds_later_generations_from_told_trials():
    s = make_strategy("optuna-nsga2", resource_space(), seed=0, population=8)
    drive(s, 40)
    sampler = s.study.sampler
    key = sampler._get_generation_key()      # set on the trials the sampler asked (not on projected ones)
    generations = {t.system_attrs[key] for t in s.study.trials if t.values is not None and key in t.system_attrs}
    assert min(generations) == 0 and max(generations) >= 2, generations   # past the random first generation
    parents = sampler.get_parent_population(s.study, max(generations))
    assert 0 < len(parents) <= 8


def test_nsga2_breeds_from_projected_rows_on_a_sparse_space():
    """Where most of the parameters' product is outside the space, nearly every evaluation is a projection; those
    trials still belong to a generation, so the GA gets past its random first one."""
    sparse = resource_space()[::13]                       # 60 of 768 configurations
    s = make_strategy("optuna-nsga2", sparse, seed=0, population=8)
    for _ in range(40):
        cfg = s.ask()
        s.tell(cfg, resource_value(cfg), status=None if resource_value(cfg) is not None else "OUT_OF_RESOURCES")
    key = s.study.sampler._get_generation_key()
    evaluated = [t for t in s.study.trials if t.state.is_finished() and t.values is not None]
    assert all(key in t.system_attrs for t in evaluated)
    assert max(t.system_attrs[key] for t in evaluated) >= 2


def test_nsga2_tells_failures_as_violated_constraints():
    from optuna.study._constrained_optimization import _CONSTRAINTS_KEY

    s = make_strategy("optuna-nsga2", resource_space(), seed=1, population=8, exploration=1.0)
    drive(s, 30)
    told = [t for t in s.study.trials if _CONSTRAINTS_KEY in t.system_attrs]
    violated = [t for t in told if t.system_attrs[_CONSTRAINTS_KEY][0] > 0]
    assert violated and len(violated) < len(told)          # failures ranked behind every configuration that ran
    unconstrained = make_strategy("optuna-nsga2", resource_space(), seed=1, population=8, constraints=False)
    drive(unconstrained, 10)
    assert not any(_CONSTRAINTS_KEY in t.system_attrs for t in unconstrained.study.trials)


def test_nsga2_population_must_be_at_least_two():
    with pytest.raises(ValueError, match="population"):
        OptunaNSGAII(resource_space(), seed=0, population=1)
