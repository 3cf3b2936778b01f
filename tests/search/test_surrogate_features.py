"""The power-of-two feature of the surrogate and the lazy expected-improvement search."""

import numpy as np

from kernelloop.tune.search.encoding import SpaceEncoding
from kernelloop.tune.search.surrogate import (GaussianProcess, best_by_expected_improvement, expected_improvement,
                                         gp_features, power_of_two_levels)


def test_power_of_two_flag_only_where_it_separates_levels():
    space = [{"bx": bx, "ty": ty, "flag": f, "kind": k} for bx in (16, 32, 48, 64, 96, 128)
             for ty in (1, 2, 4) for f in (0, 1) for k in ("a", "b", "c")]
    enc = SpaceEncoding(space)
    by = {p.name: p for p in enc.params}
    assert power_of_two_levels(by["bx"]).tolist() == [1, 1, 0, 1, 0, 1]
    assert power_of_two_levels(by["ty"]) is None        # all powers of two: says nothing
    assert power_of_two_levels(by["flag"]) is None      # two levels
    assert power_of_two_levels(by["kind"]) is None      # categorical
    F, groups, names = gp_features(enc)
    assert ("bx", "pow2") in names and ("ty", "pow2") not in names
    g = names.index(("bx", "pow2"))
    col = F[:, groups == g][:, 0]
    assert col.tolist() == [float(c["bx"] & (c["bx"] - 1) == 0) for c in space]


def test_lazy_expected_improvement_matches_the_full_argmax():
    rng = np.random.default_rng(0)
    for trial in range(5):
        X = rng.random((300, 4))
        y = np.sin(6 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.standard_normal(300)
        gp = GaussianProcess(np.arange(4), np.full(4, 0.4))
        tr = rng.choice(300, 60, replace=False)
        gp.fit_hyper(X[tr], y[tr], steps=10)
        gp.condition(X[tr], y[tr])
        cand = np.setdiff1d(np.arange(300), tr)
        best = (y[tr].min() - gp.y_mean) / gp.y_std
        mu, sd = gp.predict(X[cand])
        ei = expected_improvement(mu, sd, best)
        k, top = best_by_expected_improvement(gp, X[cand], best, chunk=16)
        assert np.isclose(top, ei.max(), rtol=1e-9, atol=1e-15)
        assert np.isclose(ei[k], ei.max(), rtol=1e-9, atol=1e-15)
