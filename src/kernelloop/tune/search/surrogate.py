"""A small Gaussian-process surrogate in numpy, for ranking configurations not measured yet.

Features: for every varying parameter, its scaled level position (when the parameter is numeric, so "nearby
values behave alike" can be learnt) and its one-hot level (so "this particular value is special" can be
learnt too: on an AMD GPU a block of 64 or 128 threads is good, 48 and 80 are not, which no smooth function
of the block size says). Each of these groups of columns has its own length scale (ARD): a group with a long
length scale is a parameter the model found irrelevant in that sense. The kernel is Matérn-5/2 on the
scaled Euclidean distance over all groups; outputs are standardised log(objective).

Hyperparameters (length scales, noise) are fitted by Adam steps on the log marginal likelihood, warm-started
from the previous fit; between refits a new observation is added to the Cholesky factor in O(n^2). With
`prior_sd`, the length scales get a log-normal prior centred on their initial values (a MAP fit): with a few
dozen points of a rugged space, maximum likelihood otherwise drives them to the bounds (every parameter either
irrelevant or so short that no two configurations correlate), and the model becomes confidently wrong away
from the data. `mean_quantile` sets the constant prior mean to that quantile of the observations instead of
their mean, so configurations the data say nothing about are predicted like a good, not an average, one;
`sd_scale` widens the posterior standard deviation that `predict` and expected improvement see (the
Thompson draws use the unscaled posterior).
Expected improvement is the acquisition, alternating (in `Staged`) with Thompson sampling from the joint
posterior of the most promising candidates; `norm_cdf` avoids a scipy dependency.
"""

from __future__ import annotations

import math

import numpy as np

from .encoding import SpaceEncoding

_SQRT5 = math.sqrt(5.0)


def norm_pdf(z: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def norm_cdf(z: np.ndarray) -> np.ndarray:
    """Standard normal CDF via erf (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7)."""
    x = np.abs(z) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-x * x)
    return 0.5 * (1.0 + np.sign(z) * erf)


def expected_improvement(mu: np.ndarray, sigma: np.ndarray, best: float, xi: float = 0.0) -> np.ndarray:
    """EI for minimisation below `best` (same units as mu)."""
    sigma = np.maximum(sigma, 1e-12)
    z = (best - mu - xi) / sigma
    return sigma * (z * norm_cdf(z) + norm_pdf(z))


def power_of_two_levels(p) -> np.ndarray | None:
    """For a numeric parameter whose levels mix powers of two with other positive integers (block sizes such as
    16, 32, 48, ...), 1.0 per power-of-two level and 0.0 otherwise; None when that says nothing (all or none).
    Hardware favours power-of-two sizes (warps, wavefronts, vector widths), so this is a feature worth a scale."""
    if not p.ordinal or len(p.levels) < 3:
        return None
    if not all(float(v).is_integer() and v > 0 for v in p.levels):
        return None
    flag = np.array([float(int(v) & (int(v) - 1) == 0) for v in p.levels])
    return flag if 0 < flag.sum() < flag.size else None


def gp_features(enc: SpaceEncoding) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str]]]:
    """Feature matrix of every row, the group of each column, and (parameter, 'ordinal'|'level') per group."""
    cols, groups, names = [], [], []
    for j, p in enumerate(enc.params):
        if not enc.varying[j]:
            continue
        if p.ordinal and len(p.levels) > 2:
            cols.append(enc.pos[:, j:j + 1])
            groups.append(len(names))
            names.append((p.name, "ordinal"))
        pow2 = power_of_two_levels(p)
        if pow2 is not None:
            cols.append(pow2[enc.X[:, j]][:, None])
            groups.append(len(names))
            names.append((p.name, "pow2"))
        onehot = (enc.X[:, j:j + 1] == np.arange(len(p.levels))[None, :]).astype(np.float64) / math.sqrt(2.0)
        cols.append(onehot)
        groups.extend([len(names)] * onehot.shape[1])
        names.append((p.name, "level"))
    if not cols:
        return np.zeros((len(enc), 0)), np.zeros(0, dtype=np.int64), []
    return np.hstack(cols), np.array(groups, dtype=np.int64), names


def _sqdist(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    d2 = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
    return np.maximum(d2, 0.0)


class GaussianProcess:
    """GP regression with a grouped-ARD Matérn-5/2 kernel, constant mean and fitted noise.

    `init_scales` sets each group's starting length scale (a one-hot group starts long: a parameter's
    individual values are assumed alike until the data say otherwise), and the centre of the length scales'
    log-normal prior when `prior_sd` > 0 (its standard deviation in log units; 0 = maximum likelihood).
    `mean_quantile` (None = the mean) is the quantile of the observations used as the constant prior mean;
    `sd_scale` multiplies every posterior standard deviation `predict`/`sd_from_cross` return.
    """

    def __init__(self, groups: np.ndarray, init_scales: np.ndarray, noise: float = 1e-2, prior_sd: float = 0.0,
                 mean_quantile: float | None = None, sd_scale: float = 1.0):
        self.groups = np.asarray(groups)
        self.n_groups = int(self.groups.max()) + 1 if self.groups.size else 0
        self.log_ls = np.log(np.asarray(init_scales, dtype=np.float64))
        self.prior_mu = self.log_ls.copy()     # the log-normal prior's centre (used when prior_sd > 0)
        self.prior_sd = prior_sd
        self.mean_quantile = mean_quantile
        self.sd_scale = sd_scale
        self.log_noise = math.log(noise)
        self._m = np.zeros(self.n_groups + 1)
        self._v = np.zeros(self.n_groups + 1)
        self._t = 0
        self.F: np.ndarray | None = None

    def _scaled(self, F: np.ndarray) -> np.ndarray:
        return F / np.exp(self.log_ls)[self.groups]

    @staticmethod
    def _matern(r2: np.ndarray) -> np.ndarray:
        s = _SQRT5 * np.sqrt(r2)
        return (1.0 + s + s * s / 3.0) * np.exp(-s)

    # -- hyperparameters ----------------------------------------------------------------------------------
    def fit_hyper(self, F: np.ndarray, y: np.ndarray, steps: int = 8, lr: float = 0.1) -> None:
        """Adam ascent on the log marginal likelihood of standardised y."""
        if len(y) < 4 or self.n_groups == 0:
            return
        yn = (y - y.mean()) / (y.std() or 1.0)
        n = len(y)
        D = np.stack([_sqdist(F[:, self.groups == g], F[:, self.groups == g]) for g in range(self.n_groups)])
        eye = np.eye(n)
        for _ in range(steps):
            ls2 = np.exp(2 * self.log_ls)
            r2 = np.tensordot(1.0 / ls2, D, axes=1)
            s = _SQRT5 * np.sqrt(r2)
            e = np.exp(-s)
            K = (1.0 + s + s * s / 3.0) * e
            noise = math.exp(self.log_noise)
            try:
                L = np.linalg.cholesky(K + (noise + 1e-8) * eye)
            except np.linalg.LinAlgError:
                self.log_noise = min(self.log_noise + 1.0, math.log(0.5))
                continue
            Linv = np.linalg.inv(L)
            Kinv = Linv.T @ Linv
            alpha = Kinv @ yn
            W = np.outer(alpha, alpha) - Kinv                   # dLML/dK = W / 2
            common = W * ((5.0 / 6.0) * (1.0 + s) * e)          # 0.5 * dk/d(log ls_g) / (D_g / ls_g^2)
            g_ls = np.tensordot(D, common, axes=([1, 2], [0, 1])) / ls2
            if self.prior_sd > 0:                               # log-normal prior on each length scale
                g_ls = g_ls - (self.log_ls - self.prior_mu) / self.prior_sd ** 2
            grad = np.append(g_ls, 0.5 * np.trace(W) * noise)
            self._t += 1
            self._m = 0.9 * self._m + 0.1 * grad
            self._v = 0.999 * self._v + 0.001 * grad * grad
            step = lr * (self._m / (1 - 0.9 ** self._t)) / (np.sqrt(self._v / (1 - 0.999 ** self._t)) + 1e-8)
            self.log_ls = np.clip(self.log_ls + step[:-1], math.log(0.02), math.log(50.0))
            self.log_noise = float(np.clip(self.log_noise + step[-1], math.log(1e-6), math.log(0.5)))

    # -- conditioning -------------------------------------------------------------------------------------
    def condition(self, F: np.ndarray, y: np.ndarray) -> None:
        """Condition on all of (F, y) from scratch (after a hyperparameter change)."""
        self.F = np.asarray(F, dtype=np.float64)
        self._Fs = self._scaled(self.F)
        n = len(self.F)
        K = self._matern(_sqdist(self._Fs, self._Fs)) + (math.exp(self.log_noise) + 1e-8) * np.eye(n)
        jitter = 0.0
        for _ in range(8):
            try:
                L = np.linalg.cholesky(K + jitter * np.eye(n))
                break
            except np.linalg.LinAlgError:
                jitter = max(jitter * 10, 1e-6)
        self.Linv = np.linalg.inv(L)
        self._set_y(y)

    def add(self, f: np.ndarray, y: np.ndarray) -> None:
        """Append one observation (its features `f`), keeping the hyperparameters: an O(n^2) update."""
        fs = self._scaled(f[None, :])
        k = self._matern(_sqdist(fs, self._Fs))[0]
        l = self.Linv @ k
        d2 = 1.0 + math.exp(self.log_noise) + 1e-8 - float(l @ l)
        if d2 <= 1e-10:
            self.condition(np.vstack([self.F, f]), y)
            return
        d = math.sqrt(d2)
        n = self.Linv.shape[0]
        Linv = np.zeros((n + 1, n + 1))
        Linv[:n, :n] = self.Linv
        Linv[n, :n] = -(l @ self.Linv) / d
        Linv[n, n] = 1.0 / d
        self.Linv = Linv
        self.F = np.vstack([self.F, f])
        self._Fs = np.vstack([self._Fs, fs])
        self._set_y(y)

    def _set_y(self, y: np.ndarray) -> None:
        y = np.asarray(y, dtype=np.float64)
        self.y_mean = float(y.mean()) if self.mean_quantile is None else float(np.quantile(y, self.mean_quantile))
        self.y_std = float(y.std()) or 1.0
        yn = (y - self.y_mean) / self.y_std
        self.alpha = self.Linv.T @ (self.Linv @ yn)

    # -- prediction ---------------------------------------------------------------------------------------
    def predict(self, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation in standardised units (see `y_mean`, `y_std`)."""
        Ks = self.cross(F)
        return Ks @ self.alpha, self.sd_from_cross(Ks)

    @property
    def noise(self) -> float:
        return math.exp(self.log_noise)

    def prior_cov(self, F: np.ndarray) -> np.ndarray:
        """Prior kernel matrix between the rows of F."""
        Fs = self._scaled(F)
        return self._matern(_sqdist(Fs, Fs))

    def cross(self, F: np.ndarray) -> np.ndarray:
        """Kernel between the rows of F and the conditioning points; `Ks @ alpha` is the mean."""
        return self._matern(_sqdist(self._scaled(F), self._Fs))

    def sd_from_cross(self, Ks: np.ndarray) -> np.ndarray:
        """Standard deviation (standardised units, at most 1: the prior's) from `cross(F)`; the costly part."""
        v = Ks @ self.Linv.T
        return self.sd_scale * np.sqrt(np.maximum(1.0 - (v * v).sum(1), 1e-12))


def best_by_expected_improvement(gp: GaussianProcess, F: np.ndarray, best: float, xi: float = 0.0,
                                 chunk: int = 128, weights: np.ndarray | None = None) -> tuple[int, float]:
    """Index of the row of F with the largest EI below `best` (standardised units) and that EI.

    Exact, but lazy: EI grows with sd, so EI(mu, an upper bound of sd) bounds each row's EI from above; rows are visited in decreasing bound and their sd computed in chunks until no remaining bound can
    beat the best EI found. The bound uses the variance left by the single most correlated observation, which
    the full posterior variance never exceeds. Only the promising rows pay the O(n^2) variance.
    """
    Ks = gp.cross(F)
    mu = Ks @ gp.alpha
    # Conditioning on more points never raises the variance, so the variance given the single most correlated
    # observation (1 - k^2 / (1 + noise)) bounds it from above; a little slack covers rounding.
    near = Ks.max(axis=1) if Ks.shape[1] else np.zeros(len(F))
    sd_max = gp.sd_scale * np.sqrt(np.clip(1.0 - near * near / (1.0 + gp.noise + 1e-8), 1e-12, 1.0)) * (1 + 1e-6) + 1e-9
    bound = expected_improvement(mu, sd_max, best, xi)
    if weights is not None:
        bound = bound * weights
    order = np.argsort(-bound, kind="stable")
    top, top_ei = -1, -np.inf
    for start in range(0, order.size, chunk):
        if bound[order[start]] <= top_ei:
            break
        idx = order[start:start + chunk]
        ei = expected_improvement(mu[idx], gp.sd_from_cross(Ks[idx]), best, xi)
        if weights is not None:
            ei = ei * weights[idx]
        k = int(np.argmax(ei))
        if ei[k] > top_ei:
            top, top_ei = int(idx[k]), float(ei[k])
    return top, top_ei


def thompson_index(gp: GaussianProcess, F: np.ndarray, rng: np.random.Generator, k: int = 200) -> int:
    """Index of the row of F that minimises one joint draw from the posterior (standardised units).

    The draw covers the `k` rows with the lowest optimistic bound (mean - 2 x the single-observation upper bound
    of the sd, without `sd_scale`), so its cost is O(k^3) whatever the size of F. The draw itself uses the
    unscaled posterior covariance. A joint
    draw (not independent per-row draws) keeps correlated rows consistent, so it picks a region the model
    finds plausible, not the row with the luckiest noise.
    """
    Ks = gp.cross(F)
    mu = Ks @ gp.alpha
    near = Ks.max(axis=1) if Ks.shape[1] else np.zeros(len(F))
    sd_max = np.sqrt(np.clip(1.0 - near * near / (1.0 + gp.noise), 1e-12, 1.0))
    top = np.argsort(mu - 2.0 * sd_max, kind="stable")[:k]
    V = Ks[top] @ gp.Linv.T
    C = gp.prior_cov(F[top]) - V @ V.T
    C = 0.5 * (C + C.T) + 1e-6 * np.eye(top.size)
    w, U = np.linalg.eigh(C)
    z = rng.standard_normal(top.size)
    draw = mu[top] + U @ (np.sqrt(np.maximum(w, 0.0)) * z)
    return int(top[int(np.argmin(draw))])
