"""Optuna's samplers as strategies: TPE (Optuna's default sampler), CMA-ES and plain random, through Optuna itself.

Optuna samples parameters independently of our space, so a proposal can be a combination the space does not
contain (pruned or invalid) or one already evaluated. Both are handled the way an Optuna user would:
- already evaluated: the trial is told the known value at once and the sampler is asked again;
- not in the space: the trial is told FAIL and the sampler is asked again;
after `max_retries` such answers the nearest configuration not yet asked (scaled-step distance to the
proposal) is evaluated instead, and reported to the study as a trial of its own when its value comes back.

TPE and random see each parameter as categorical (Optuna's usual encoding of a list of choices); CMA-ES needs
numbers, so it sees each parameter as the integer index of its (sorted) level. Failed evaluations are told as
FAIL, which Optuna's samplers ignore.
"""

from __future__ import annotations

import numpy as np

from .base import SearchStrategy
from .encoding import SpaceEncoding


class OptunaStrategy(SearchStrategy):
    """Base: a study driven through ask/tell with fixed distributions over the space's parameters."""

    name = "optuna"
    categorical = True
    max_retries = 16

    def __init__(self, space: list[dict], seed: int = 0, encoding: SpaceEncoding | None = None):
        super().__init__(space, seed, encoding)
        import optuna
        from optuna.distributions import CategoricalDistribution, IntDistribution

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self.study = optuna.create_study(direction="minimize", sampler=self._sampler(seed))
        self._names = self.enc.names
        if self.categorical:
            self.dists = {p.name: CategoricalDistribution(list(range(len(p.levels)))) for p in self.enc.params}
        else:
            self.dists = {p.name: IntDistribution(0, max(len(p.levels) - 1, 0)) for p in self.enc.params}
        self._pending: dict[int, object] = {}   # row -> open trial (None: a projected row, added when told)

    def _sampler(self, seed: int):
        raise NotImplementedError

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
                self.study.tell(trial, float(self.values[row]))
            else:
                self.study.tell(trial, state=TrialState.FAIL)
        free = self.unasked()
        d = self.enc.distances_to(self.enc.point(levels), free)
        row = int(free[np.argmin(d)])
        self._pending[row] = None
        return row

    def _observe(self, row: int, value: float | None) -> None:
        from optuna.trial import TrialState, create_trial

        trial = self._pending.pop(row, None)
        if trial is not None:
            if value is None:
                self.study.tell(trial, state=TrialState.FAIL)
            else:
                self.study.tell(trial, value)
            return
        params = {n: int(self.enc.X[row, j]) for j, n in enumerate(self._names)}
        if value is None:
            self.study.add_trial(create_trial(params=params, distributions=self.dists, state=TrialState.FAIL))
        else:
            self.study.add_trial(create_trial(params=params, distributions=self.dists, value=value))


class OptunaTPE(OptunaStrategy):
    """Optuna's default sampler (TPE, default settings), seeded."""

    name = "optuna-tpe"

    def _sampler(self, seed: int):
        return self._optuna.samplers.TPESampler(seed=seed)


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
