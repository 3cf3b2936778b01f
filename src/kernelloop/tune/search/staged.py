"""The default strategy: staged search, coarse -> fine -> polish, with a stagnation supervisor.

- coarse: a space-filling design (greedy max-min distance over a random sample of the space) of `n_init`
  configurations: d + 2 for d varying parameters, between 5 and 12, and at most 2 % of the space (at least 5), so
  a space of a few hundred configurations is not spent on points the model did not choose;
- fine: a Gaussian-process surrogate of log(objective) ranks the candidates by expected improvement; the
  candidates are the whole neighbourhoods (one or two parameters changed, up to `near_cap` each) of the two
  best configurations so far plus a random sample of the rest of the space, so the model both refines good
  regions (including two-parameter moves such as swapping tile sizes) and looks elsewhere. Every
  `thompson_every`-th proposal is instead a Thompson draw (a joint posterior sample over the `thompson_k`
  most promising candidates), which keeps the search moving between basins where EI alone settles on a
  plateau. The surrogate's length scales have a log-normal prior (`ls_prior_sd`), its prior mean is a low
  quantile of the observations (`mean_quantile`) and its sd is widened by `sd_scale` for EI: with under 50 points
  of a rugged space, the maximum-likelihood model was confidently wrong about unexplored basins. Besides each
  parameter's rank and one-hot levels, the surrogate sees whether a numeric size is a power of two (where a
  parameter mixes both: 16, 32, 48, ...), which hardware often cares about. EI is maximised lazily (an upper
  bound of each candidate's EI skips most posterior variances), and beyond `max_model_points` the model keeps
  the best half and a spread of the rest, so a proposal stays within a few ms at 400 evaluations;
- polish: when the supervisor sees no improvement beyond noise for `patience` evaluations, the incumbent's
  one-step neighbourhood is swept; if that also stalls, the search jumps to the most promising region far
  from everything tried (the surrogate's best among distant configurations). Each intervention is an event.

Failures (failure-aware search): the surrogate models only configurations that ran (a failure given the worst
value, as before, put a cliff into the regression right where the best configurations often are: at the resource
limit), and where kernels fail is the feasibility model's job (`feasibility.py`): the candidates are those it
does not predict to fail with a probability above `candidate_threshold` (0.8: the fastest configurations sit next
to the resource limit, where the smooth model of failure is least sure, and excluding everything above 0.5 kept
the search from them: 94 -> 44 median evaluations to within 2 % on the full H200 GEMM space with its failures kept,
40 seeds), expected improvement is weighted by the predicted probability of running (constrained EI), and the
shared guard keeps every proposal (space filling, polish, far region, and a model pick predicted to fail more likely
than not) out of the predicted-infeasible region, except at the recorded exploration rate. A timeout is modelled as a very slow value (twice the worst
seen) as well as a weak infeasibility signal. `failures="worst"` restores the old handling. History pruning: parameter values that only gave failures or poor results in this run are avoided in the
random part of the candidates (`BadRegions`), and an optional `prior` (a `TransferPrior` learnt from another
shape or GPU of the same kernel) supplies half of the coarse design.

Numerical work runs with one BLAS thread: the matrices are small, and extra threads only contend.
"""

from __future__ import annotations

import math

import numpy as np

from .base import EXPLORATION, SearchStrategy
from .encoding import SpaceEncoding
from .history import BadRegions, TransferPrior
from .supervisor import Supervisor
from .surrogate import GaussianProcess, best_by_expected_improvement, gp_features, thompson_index


class Staged(SearchStrategy):
    name = "staged"
    guard_threshold = 0.5      # the guard replaces a proposal predicted to fail more likely than not ...
    candidate_threshold = 0.8  # candidates predicted to fail more likely than this are not ranked (constrained EI
                               # weighs the rest)

    def __init__(self, space: list[dict], seed: int = 0, encoding: SpaceEncoding | None = None,
                 n_init: int | None = None, pool: int = 500, elites: int = 2, near_cap: int = 1000, patience: int = 20,
                 max_model_points: int = 250, prior=None, xi: float = 0.0,
                 level_scale: float = 1.5, pow2_scale: float = 1.0, thompson_every: int = 2, thompson_k: int = 200,
                 ls_prior_sd: float = 1.0, mean_quantile: float | None = 0.3, sd_scale: float = 1.25,
                 exploration: float = EXPLORATION, failures: str = "model", guard_threshold: float | None = None,
                 candidate_threshold: float | None = None):
        if guard_threshold is not None:
            self.guard_threshold = guard_threshold
        if candidate_threshold is not None:
            self.candidate_threshold = candidate_threshold
        super().__init__(space, seed, encoding, exploration)
        if failures not in ("model", "worst"):
            raise ValueError(f"failures must be 'model' or 'worst', got {failures!r}")
        self.failures = failures
        self.cols = np.flatnonzero(self.enc.varying)
        self.Z = self.enc.pos[:, self.cols]
        d = max(1, self.cols.size)
        self.n_init = n_init if n_init is not None else int(min(max(5, d + 2), 12,
                                                                max(5, math.ceil(0.02 * len(self.space)))))
        self.pool = pool
        self.near_cap = near_cap
        self.elites = elites
        self.max_model_points = max_model_points
        self.F, groups, self.groups = gp_features(self.enc)
        init = np.array([{"ordinal": 0.5, "pow2": pow2_scale}.get(kind, level_scale) for _, kind in self.groups])
        self.xi = xi
        self.gp = GaussianProcess(groups, init, prior_sd=ls_prior_sd, mean_quantile=mean_quantile, sd_scale=sd_scale)
        self.thompson_every = thompson_every
        self.thompson_k = thompson_k
        self._gp_rows: list[int] = []
        self._hyper_at = 0
        self.supervisor = Supervisor(patience=patience)
        self.queue: list[int] = []
        self.phase = "coarse"
        self._fitted_at = -1
        self.prior = prior
        self.bad = BadRegions(self.enc)
        self._bad_mask: np.ndarray | None = None
        self._warm: list[int] = []
        if prior is not None:
            if not isinstance(prior, TransferPrior):
                prior = TransferPrior.from_space(prior)
            self._warm = prior.warm_start(self.space, max(1, self.n_init // 2))
            self.log_event("prior", action="warm start", rows=len(self._warm),
                           source=getattr(prior, "source", "pooled"))
        try:
            from threadpoolctl import ThreadpoolController
            self._threads = ThreadpoolController()
        except ImportError:  # optional: without it BLAS uses its default threads
            self._threads = None

    def ask(self) -> dict | None:
        if self._threads is None:
            return super().ask()
        with self._threads.limit(limits=1, user_api="blas"):
            return super().ask()

    # -- stages -------------------------------------------------------------------------------------------
    def _propose(self) -> int | None:
        while self.queue:
            row = self.queue.pop(0)
            if not self.asked[row]:
                return row
        while self._warm:
            row = self._warm.pop(0)
            if not self.asked[row]:
                return row
        if len(self.order) < self.n_init or not np.isfinite(self.values).any() or self.cols.size == 0:
            return self._space_filling()
        if self.supervisor.stagnating:
            self._intervene()
            while self.queue:
                row = self.queue.pop(0)
                if not self.asked[row]:
                    return row
        self.phase = "fine"
        return self._by_surrogate(self._candidates())

    def _feasible(self, rows: np.ndarray, threshold: float = 0.5) -> np.ndarray:
        """`rows` whose predicted probability of failure is at most `threshold` (all of them when none is, or the
        model is not active)."""
        if self.failures != "model" or not self.guard.active:
            return rows
        ok = rows[self.guard.p_fail()[rows] <= threshold]
        return ok if ok.size else rows

    def _space_filling(self) -> int:
        free = self._feasible(self.unasked())
        sample = free if free.size <= 256 else self.rng.choice(free, 256, replace=False)
        done = np.flatnonzero(self.asked)
        if done.size == 0:
            return int(sample[self.rng.integers(sample.size)])
        Zs, Zd = self.Z[sample], self.Z[done]
        dmin = np.min(np.abs(Zs[:, None, :] - Zd[None, :, :]).sum(-1), axis=1)
        return int(sample[np.argmax(dmin)])

    def _candidates(self) -> np.ndarray:
        return self._feasible(self._all_candidates(), self.candidate_threshold)

    def _all_candidates(self) -> np.ndarray:
        free = self.unasked()
        if free.size <= self.pool * 2:
            return free
        told = np.array(self.order)
        ok = told[~self.failed[told]]
        top = ok[np.argsort(self.values[ok], kind="stable")[: self.elites]]
        near = []
        for r in top:                      # the nearest unasked neighbours of each elite, at most `near_cap`
            nb = self.enc.neighbours(int(r), radius=2)
            near.append(nb[~self.asked[nb]][: self.near_cap])
        near = np.unique(np.concatenate(near)) if near else np.array([], dtype=np.int64)
        if self._bad_mask is not None:
            good = free[self._bad_mask[free]]
            if good.size >= self.pool:
                free = good
        far = self.rng.choice(free, self.pool, replace=False)
        return np.unique(np.concatenate([near, far]))

    def _targets(self, rows: np.ndarray) -> np.ndarray:
        """log(objective) of modelled rows; a failure ("worst") or a timeout gets the worst log value seen (a
        timeout twice the worst value)."""
        vals = self.values[rows]
        ok = np.isfinite(vals)
        logv = np.log(np.where(ok, vals, 1.0))
        if (~ok).any():
            worst = logv[ok].max() if ok.any() else 0.0
            slow = np.array([self.kinds.get(int(r)) == "timeout" for r in rows]) & ~ok
            logv[~ok] = worst
            logv[slow] = worst + math.log(2.0)
        return logv

    def _modelled(self) -> np.ndarray:
        """The told rows the surrogate regresses on: all of them ("worst"), or those that ran and timeouts."""
        told = np.array(self.order)
        if self.failures == "worst" or told.size == 0:
            return told
        keep = ~self.failed[told] | np.array([self.kinds.get(int(r)) == "timeout" for r in told])
        return told[keep]

    def _fit(self) -> None:
        n = len(self.order)
        if self._fitted_at == n:
            return
        told = self._modelled()
        if (not self._gp_rows or n - self._hyper_at >= max(4, n // 6)
                or len(self._gp_rows) >= self.max_model_points + max(4, self.max_model_points // 6)):
            rows = told
            if rows.size > self.max_model_points:    # the best half and a spread of the rest
                logv = self._targets(rows)
                keep = np.argsort(logv, kind="stable")
                half = self.max_model_points // 2
                rest = keep[half:]
                rows = rows[np.concatenate([keep[:half],
                                            rest[np.linspace(0, rest.size - 1, self.max_model_points - half).astype(int)]])]
            y = self._targets(rows)
            self.gp.fit_hyper(self.F[rows], y, steps=20 if self._hyper_at == 0 else 6)
            self.gp.condition(self.F[rows], y)
            self._gp_rows = rows.tolist()
            self._hyper_at = n
        else:
            new = self.order[max(self._fitted_at, 0):]   # told since the last fit (the model may hold a subset)
            modelled = set(told.tolist())
            for r in (r for r in new if r in modelled):
                self._gp_rows.append(r)
                self.gp.add(self.F[r], self._targets(np.array(self._gp_rows)))
        self._fitted_at = n

    def _predict(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Predicted log(objective) and its standard deviation at `rows`."""
        mu, sd = self.gp.predict(self.F[rows])
        return self.gp.y_mean + self.gp.y_std * mu, self.gp.y_std * sd

    def _by_surrogate(self, cands: np.ndarray) -> int:
        self._fit()
        if self.thompson_every and len(self.order) % self.thompson_every == 0:
            if self.failures == "model" and self.guard.active:   # a draw of feasibility too: keep a candidate
                p = self.guard.p_fail()[cands]                    # with its predicted probability of running
                keep = self.rng.random(cands.size) >= p
                if keep.any():
                    cands = cands[keep]
            return int(cands[thompson_index(self.gp, self.F[cands], self.rng, self.thompson_k)])
        best = (math.log(self.best_value) - self.gp.y_mean) / self.gp.y_std
        w = None
        if self.failures == "model" and self.guard.active:
            w = 1.0 - self.guard.p_fail()[cands]
        k, _ = best_by_expected_improvement(self.gp, self.F[cands], best, self.xi / self.gp.y_std, weights=w)
        return int(cands[k])

    def rank(self, config: dict) -> float | None:
        """The surrogate's predicted quantile of `config` among the values that ran so far (0: predicted better than
        every one of them); None before the surrogate is in use. The controller times a candidate ranked outside
        the best third with a screen first (tune/search/budget.py)."""
        row = self.enc.row_of(config)
        if row is None or len(self.order) < self.n_init or self.cols.size == 0 or not np.isfinite(self.values).any():
            return None
        self._fit()
        mu, _ = self._predict(np.array([row]))
        ran = np.log(self.values[np.isfinite(self.values)])
        return float((ran < mu[0]).mean())

    # -- the supervisor's interventions ---------------------------------------------------------------------
    def _observe(self, row: int, value: float | None) -> None:
        self.supervisor.observe(value)
        if len(self.order) >= self.n_init and len(self.order) % 5 == 0:
            told = np.array(self.order)
            newly = self.bad.update(told, np.where(self.failed[told], np.inf, self.values[told]))
            if newly:
                self._bad_mask = self.bad.mask()
                self.log_event("history", action="avoid", values=[
                    {"param": self.enc.params[j].name, "value": self.enc.params[j].levels[lv]} for j, lv in sorted(newly)])

    def _intervene(self) -> None:
        inc = self.best_row
        steps = self.enc.step_neighbours(inc) if inc is not None else np.array([], dtype=np.int64)
        steps = steps[~self.asked[steps]] if steps.size else steps
        if self.phase != "polish" and steps.size:
            self.phase = "polish"
            self.queue = [int(r) for r in steps]
            self.log_event("supervisor", action="polish", reason=f"no gain > {self.supervisor.min_improvement:.0%} "
                           f"in {self.supervisor.patience} evaluations", incumbent=int(inc),
                           best=self.best_value, queued=len(self.queue))
        else:
            self.phase = "explore"
            row = self._far_region()
            self.queue = [row]
            self.log_event("supervisor", action="explore", reason="polish did not help", incumbent=int(inc),
                           best=self.best_value, target=row)
        self.supervisor.intervened()

    def _far_region(self) -> int:
        free = self._feasible(self.unasked())
        told = np.array(self.order)
        sample = free if free.size <= 1000 else self.rng.choice(free, 1000, replace=False)
        Zs, Zt = self.Z[sample], self.Z[told]
        dmin = np.min(np.abs(Zs[:, None, :] - Zt[None, :, :]).sum(-1), axis=1) if told.size else np.ones(sample.size)
        far = sample[dmin >= np.quantile(dmin, 0.75)]
        self._fit()
        mu, sd = self._predict(far)
        return int(far[np.argmin(mu - 2.0 * sd)])
