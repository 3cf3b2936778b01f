"""Optuna's samplers as strategies: TPE (Optuna's default sampler), CMA-ES, NSGA-II (its genetic sampler, here with
one objective) and plain random, through Optuna itself.

Optuna samples parameters independently of our space, so a proposal can be a combination the space does not
contain (pruned or invalid) or one already evaluated. Both are handled the way an Optuna user would:
- already evaluated: the trial is told the known value at once and the sampler is asked again;
- not in the space: the trial is told FAIL and the sampler is asked again;
after `max_retries` such answers the nearest configuration not yet asked (scaled-step distance to the
proposal) is evaluated instead, and reported to the study as a trial of its own when its value comes back (added
to the study; for NSGA-II enqueued and asked, so the trial belongs to a generation: on a space that is a sparse
part of its parameters' product, such as LayerNorm's, nearly every evaluation is a projection, and added trials,
which carry no generation, would leave the genetic sampler at its random first generation for good). A row the
feasibility guard puts in place of a proposal is reported the same way.

TPE, NSGA-II and random see each parameter as categorical (Optuna's usual encoding of a list of choices); CMA-ES needs
numbers, so it sees each parameter as the integer index of its (sorted) level.

Failed evaluations use Optuna's constraint handling where the sampler has it (TPE, NSGA-II): a failure is a COMPLETE trial
with a violated constraint (its kind's weight, see `feasibility.KIND_WEIGHT`; the value, which a constrained
TPE ranks after every feasible trial anyway, is the worst seen), a success a satisfied one (-1), so TPE's
"good" density is fitted to configurations that ran and its "bad" one includes those that failed. A sampler
without constraints (CMA-ES, random) gets failures as FAIL (which it ignores). On top of that every proposal
passes the strategies' shared feasibility guard; a proposal it withdraws is told FAIL (never evaluated).
"""

from __future__ import annotations

import numpy as np

from .base import EXPLORATION, SearchStrategy
from .encoding import SpaceEncoding
from .feasibility import KIND_WEIGHT


def _constraint(trial) -> tuple[float]:
    return tuple(trial.user_attrs.get("constraint", (-1.0,)))


class OptunaStrategy(SearchStrategy):
    """Base: a study driven through ask/tell with fixed distributions over the space's parameters."""

    name = "optuna"
    categorical = True
    constrained = False      # whether the sampler takes Optuna's constraints_func
    enqueue_projections = False   # a row the sampler did not propose is told as an enqueued trial, not added
    max_retries = 16

    def __init__(self, space: list[dict], seed: int = 0, encoding: SpaceEncoding | None = None,
                 exploration: float = EXPLORATION, constraints: bool = True):
        super().__init__(space, seed, encoding, exploration)
        self.use_constraints = constraints and self.constrained
        import optuna
        from optuna.distributions import CategoricalDistribution, IntDistribution

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        import warnings

        with warnings.catch_warnings():      # constraints_func is marked experimental
            warnings.simplefilter("ignore")
            sampler = self._sampler(seed % 2**32)   # numpy's legacy generator under the samplers: 32 bits
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self._names = self.enc.names
        if self.categorical:
            self.dists = {p.name: CategoricalDistribution(list(range(len(p.levels)))) for p in self.enc.params}
        else:
            self.dists = {p.name: IntDistribution(0, max(len(p.levels) - 1, 0)) for p in self.enc.params}
        self._pending: dict[int, object] = {}   # row -> open trial (None: a projected row, added when told)

    def _sampler(self, seed: int):
        raise NotImplementedError

    def _adopt(self, trial) -> None:
        """Make an enqueued trial (every parameter fixed, so the sampler drew none) the sampler's own."""

    def _levels(self, trial) -> tuple[int, ...]:
        return tuple(int(trial.params[n]) for n in self._names)

    def _propose(self) -> int | None:
        from optuna.trial import TrialState

        levels = None
        for _ in range(self.max_retries):
            trial = self.study.ask(self.dists)
            levels = self._levels(trial)
            row = self.enc.row_of_levels(levels)
            if row is not None and not self.asked[row]:
                self._pending[row] = trial
                return row
            if row is not None and self.told[row] and not self.failed[row]:
                self._tell(trial, float(self.values[row]))
            elif row is not None and self.told[row] and self.use_constraints:
                self._tell(trial, None, self.kinds.get(row))
            else:
                self.study.tell(trial, state=TrialState.FAIL)
        free = self.unasked()
        d = self.enc.distances_to(self.enc.point(levels), free)
        row = int(free[np.argmin(d)])
        self._pending[row] = None
        return row

    def _worst(self) -> float:
        ok = np.isfinite(self.values)
        return float(self.values[ok].max()) if ok.any() else 1.0

    def _tell(self, trial, value: float | None, kind: str | None = None) -> None:
        """Tell an open trial its outcome: a value, or a failure (constrained or FAIL)."""
        from optuna.trial import TrialState

        if value is not None:
            if self.use_constraints:
                trial.set_user_attr("constraint", (-1.0,))
            self.study.tell(trial, value)
        elif self.use_constraints:
            trial.set_user_attr("constraint", (KIND_WEIGHT.get(kind or "failed", 1.0),))
            self.study.tell(trial, self._worst())
        else:
            self.study.tell(trial, state=TrialState.FAIL)

    def _withdrawn(self, row: int) -> None:
        from optuna.trial import TrialState

        trial = self._pending.pop(row, None)
        if trial is not None:
            self.study.tell(trial, state=TrialState.FAIL)

    def _observe(self, row: int, value: float | None) -> None:
        from optuna.trial import TrialState, create_trial

        trial = self._pending.pop(row, None)
        params = {n: int(self.enc.X[row, j]) for j, n in enumerate(self._names)}
        if trial is None and self.enqueue_projections:
            self.study.enqueue_trial(params)
            trial = self.study.ask(self.dists)
            self._adopt(trial)
        if trial is not None:
            self._tell(trial, value, self.kinds.get(row))
            return
        if value is not None:
            attrs = {"constraint": (-1.0,)} if self.use_constraints else {}
            self.study.add_trial(create_trial(params=params, distributions=self.dists, value=value, user_attrs=attrs))
        elif self.use_constraints:
            attrs = {"constraint": (KIND_WEIGHT.get(self.kinds.get(row, "failed"), 1.0),)}
            self.study.add_trial(create_trial(params=params, distributions=self.dists, value=self._worst(),
                                              user_attrs=attrs))
        else:
            self.study.add_trial(create_trial(params=params, distributions=self.dists, state=TrialState.FAIL))


class OptunaTPE(OptunaStrategy):
    """Optuna's default sampler (TPE, default settings), seeded."""

    name = "optuna-tpe"
    constrained = True

    def _sampler(self, seed: int):
        if self.use_constraints:
            return self._optuna.samplers.TPESampler(seed=seed, constraints_func=_constraint)
        return self._optuna.samplers.TPESampler(seed=seed)


class OptunaNSGAII(OptunaStrategy):
    """Optuna's genetic sampler (NSGA-II; with one objective, elitist selection by value, constraints first), with
    Optuna's defaults (uniform crossover, a population of 50) unless `population` is given; seeded."""

    name = "optuna-nsga2"
    constrained = True
    enqueue_projections = True   # an added trial has no generation: the GA would never breed from it

    def __init__(self, space: list[dict], seed: int = 0, encoding: SpaceEncoding | None = None,
                 exploration: float = EXPLORATION, constraints: bool = True, population: int = 50):
        if population < 2:
            raise ValueError(f"population must be at least 2, got {population}")
        self.population = population
        super().__init__(space, seed, encoding, exploration, constraints)

    def _sampler(self, seed: int):
        kw = {"constraints_func": _constraint} if self.use_constraints else {}
        return self._optuna.samplers.NSGAIISampler(seed=seed, population_size=self.population, **kw)

    def _adopt(self, trial) -> None:
        # a trial gets its generation when the sampler draws for it; with every parameter fixed it never does
        frozen = self.study.get_trials(deepcopy=False)[trial.number]
        self.study.sampler.get_trial_generation(self.study, frozen)


class OptunaCmaEs(OptunaStrategy):
    """Optuna's CMA-ES over level indices (integers), seeded."""

    name = "optuna-cmaes"
    categorical = False

    def _sampler(self, seed: int):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self._optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)


class OptunaRandom(OptunaStrategy):
    """Optuna's RandomSampler: a control that shows what the ask/tell adaptation itself costs."""

    name = "optuna-random"

    def _sampler(self, seed: int):
        return self._optuna.samplers.RandomSampler(seed=seed)
