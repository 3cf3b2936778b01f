"""Tests of kernelloop.core.bench.stats: summaries, paired speed-ups, verdict rule, speed, errors."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from kernelloop.core.bench import stats as st
from kernelloop.core.bench.stats import _bootstrap_medians, paired_speedup, summarize, verdict_for
from kernelloop.base.records import Comparison, Ratio, Stats

BOOT = dict(bootstrap=1000, confidence=0.95)


# ---------------------------------------------------------------- summarize


def test_summarize_known_values_odd():
    s = summarize([5.0, 1.0, 3.0, 2.0, 4.0], seed=0, **BOOT)
    assert isinstance(s, Stats)
    assert s.median_us == 3.0
    assert s.iqr_us == pytest.approx(2.0)  # linear quantiles: q75 = 4, q25 = 2
    assert s.n == 5
    assert 1.0 <= s.ci_low_us <= s.median_us <= s.ci_high_us <= 5.0


def test_summarize_known_values_even():
    s = summarize([1.0, 2.0, 3.0, 10.0], seed=0, **BOOT)
    assert s.median_us == 2.5
    assert s.iqr_us == pytest.approx(4.75 - 1.75)
    assert s.n == 4
    assert 1.0 <= s.ci_low_us <= s.ci_high_us <= 10.0


def test_summarize_constant_samples_have_zero_width():
    s = summarize([7.0] * 10, seed=1, **BOOT)
    assert (s.median_us, s.ci_low_us, s.ci_high_us, s.iqr_us, s.n) == (7.0, 7.0, 7.0, 0.0, 10)


def test_summarize_accepts_numpy_and_tuples_and_returns_plain_floats():
    s = summarize(np.array([1.0, 2.0, 3.0]), seed=0, **BOOT)
    t = summarize((1.0, 2.0, 3.0), seed=0, **BOOT)
    assert s == t
    assert type(s.median_us) is float and type(s.ci_low_us) is float and type(s.n) is int
    assert Stats.from_json(s.to_json()) == s


def test_ci_contains_true_median_large_normal_sample():
    x = np.random.default_rng(42).normal(100.0, 5.0, 5000)
    s = summarize(x, bootstrap=2000, confidence=0.95, seed=7)
    assert s.ci_low_us < 100.0 < s.ci_high_us
    assert s.ci_high_us - s.ci_low_us < 1.0  # ~ 2 * 1.96 * 1.2533 * 5 / sqrt(5000) = 0.35
    assert s.iqr_us == pytest.approx(2 * 0.6745 * 5.0, rel=0.05)


def test_ci_coverage_is_roughly_nominal():
    true_median, hits, reps = 100.0, 0, 200
    for rep in range(reps):
        x = np.random.default_rng(rep).normal(true_median, 5.0, 200)
        s = summarize(x, seed=rep, **BOOT)
        hits += s.ci_low_us <= true_median <= s.ci_high_us
    assert hits / reps >= 0.88


def test_higher_confidence_gives_wider_interval():
    x = np.random.default_rng(0).lognormal(0.0, 0.3, 300)
    narrow = summarize(x, bootstrap=2000, confidence=0.8, seed=3)
    wide = summarize(x, bootstrap=2000, confidence=0.99, seed=3)
    assert wide.ci_low_us <= narrow.ci_low_us <= narrow.ci_high_us <= wide.ci_high_us
    assert wide.ci_high_us - wide.ci_low_us > narrow.ci_high_us - narrow.ci_low_us


def test_summarize_reproducible_given_seed():
    x = np.random.default_rng(5).lognormal(0.0, 0.5, 101)
    a = summarize(x, seed=11, **BOOT)
    b = summarize(list(x), seed=11, **BOOT)
    c = summarize(x, seed=12, **BOOT)
    assert a == b
    assert a.median_us == c.median_us
    assert (a.ci_low_us, a.ci_high_us) != (c.ci_low_us, c.ci_high_us)


@pytest.mark.parametrize("samples", [[], [1.0], [1.0, 2.0]])
def test_summarize_rejects_fewer_than_three_samples(samples):
    with pytest.raises(ValueError, match="at least 3"):
        summarize(samples, seed=0, **BOOT)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_summarize_rejects_non_finite(bad):
    with pytest.raises(ValueError, match="finite"):
        summarize([1.0, 2.0, bad, 3.0], seed=0, **BOOT)


@pytest.mark.parametrize("kwargs", [
    dict(bootstrap=0, confidence=0.95), dict(bootstrap=-5, confidence=0.95), dict(bootstrap=10.5, confidence=0.95),
    dict(bootstrap=100, confidence=0.0), dict(bootstrap=100, confidence=1.0), dict(bootstrap=100, confidence=95),
])
def test_summarize_rejects_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        summarize([1.0, 2.0, 3.0], seed=0, **kwargs)


def test_summarize_rejects_nested_or_non_numeric():
    with pytest.raises(ValueError):
        summarize([[1.0, 2.0], [3.0, 4.0]], seed=0, **BOOT)
    with pytest.raises(ValueError):
        summarize(["a", "b", "c"], seed=0, **BOOT)


# ---------------------------------------------------------------- bootstrap engine


@pytest.mark.parametrize("n", [3, 4, 7, 200, 501])
def test_bootstrap_medians_equal_naive_gather_median(n):
    """The count-based engine reproduces np.median over the same (jointly drawn) resample indices."""
    rng = np.random.default_rng(n)
    a, b = rng.normal(size=n), rng.lognormal(size=n)
    a[: n // 3] = a[0]  # ties in the data
    ma, mb = _bootstrap_medians([a, b], 300, seed=9)
    idx = np.random.default_rng(9).integers(0, n, size=(300, n))
    np.testing.assert_array_equal(ma, np.median(a[idx], axis=1))
    np.testing.assert_array_equal(mb, np.median(b[idx], axis=1))


def test_bootstrap_chunking_does_not_change_results(monkeypatch):
    import kernelloop.core.bench.stats as st

    x = np.random.default_rng(0).normal(size=50)
    whole = st._bootstrap_medians([x], 333, seed=4)[0]
    monkeypatch.setattr(st, "_CHUNK_ELEMENTS", 50 * 7)  # 7 resamples per chunk
    chunked = st._bootstrap_medians([x], 333, seed=4)[0]
    # Chunks draw from the same generator in sequence, so the index stream is identical.
    np.testing.assert_array_equal(whole, chunked)


def _python_calls(fn) -> int:
    """Python and C function calls made while `fn` runs (sys.setprofile): a count, not a clock."""
    n = 0

    def count(frame, event, arg):
        nonlocal n
        n += event in ("call", "c_call")

    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n


@pytest.mark.parametrize("stat", ["summarize", "paired_speedup"])
def test_the_bootstrap_is_vectorised(stat):
    """The resamples are numpy work, not a Python loop: 100x more resamples make about as many calls."""
    rng = np.random.default_rng(0)
    x, y = rng.lognormal(0, 0.1, 500), rng.lognormal(0, 0.1, 500)
    run = {"summarize": lambda b: summarize(x, bootstrap=b, confidence=0.95, seed=1),
           "paired_speedup": lambda b: paired_speedup(x, y, name="b", bootstrap=b, confidence=0.95, margin=0.02,
                                                      seed=1)}[stat]
    run(200)   # first-call imports and caches
    few, many = _python_calls(lambda: run(200)), _python_calls(lambda: run(20_000))
    assert many < 2 * few, (few, many)


# ---------------------------------------------------------------- paired_speedup


def test_paired_exact_scaling_gives_degenerate_interval():
    """Every round is exactly 2x: joint round resampling keeps every bootstrap ratio at 2."""
    base = np.random.default_rng(0).lognormal(2.0, 0.5, 101)
    r = paired_speedup(base, base / 2.0, name="eager", bootstrap=500, confidence=0.95, margin=0.02, seed=0)
    assert isinstance(r, Ratio)
    assert r.baseline == "eager"
    assert r.speedup == pytest.approx(2.0)
    assert r.ci_low == pytest.approx(2.0) and r.ci_high == pytest.approx(2.0)
    assert r.verdict is Comparison.FASTER
    assert Ratio.from_json(r.to_json()) == r


def test_paired_known_speedup_value():
    r = paired_speedup([10.0, 12.0, 14.0], [5.0, 6.0, 8.0], name="b", bootstrap=200, confidence=0.9,
                       margin=0.0, seed=0)
    assert r.speedup == pytest.approx(12.0 / 6.0)
    assert r.ci_low <= r.speedup <= r.ci_high


def test_pairing_cancels_shared_round_drift():
    """A 3% gain hidden under 30% round-to-round drift is detected only because rounds are paired."""
    rng = np.random.default_rng(3)
    drift = rng.lognormal(0.0, 0.3, 100)
    base = 10.0 * drift * rng.lognormal(0.0, 0.005, 100)
    subj = 10.0 / 1.03 * drift * rng.lognormal(0.0, 0.005, 100)
    kw = dict(name="b", bootstrap=2000, confidence=0.95, margin=0.01, seed=0)
    paired = paired_speedup(base, subj, **kw)
    assert paired.verdict is Comparison.FASTER
    assert 1.01 < paired.ci_low <= paired.speedup <= paired.ci_high < 1.05
    shuffled = paired_speedup(base, rng.permutation(subj), **kw)  # pairing broken
    assert shuffled.verdict is Comparison.SAME
    assert shuffled.ci_high - shuffled.ci_low > 5 * (paired.ci_high - paired.ci_low)


def test_clear_ten_percent_difference_faster_and_swapped_slower():
    rng = np.random.default_rng(1)
    base = 100.0 * rng.lognormal(0.0, 0.02, 200)
    subj = 100.0 / 1.1 * rng.lognormal(0.0, 0.02, 200)
    kw = dict(bootstrap=2000, confidence=0.95, margin=0.02, seed=5)
    fwd = paired_speedup(base, subj, name="eager", **kw)
    assert fwd.verdict is Comparison.FASTER
    assert fwd.speedup == pytest.approx(1.1, rel=0.01)
    assert fwd.ci_low > 1.02 and fwd.ci_low <= fwd.speedup <= fwd.ci_high
    rev = paired_speedup(subj, base, name="eager", **kw)
    assert rev.verdict is Comparison.SLOWER
    assert rev.speedup == pytest.approx(1 / fwd.speedup)
    assert rev.ci_high < 1 / 1.02
    # Swapping inverts the bootstrap ratios, hence the interval (same seed, same resamples).
    assert rev.ci_low == pytest.approx(1 / fwd.ci_high, rel=1e-2)
    assert rev.ci_high == pytest.approx(1 / fwd.ci_low, rel=1e-2)


def test_a_a_test_says_same():
    """Two independent samples of one lognormal: SAME in >= 97% of 200 repetitions (margin 0.02)."""
    verdicts = []
    for rep in range(200):
        rng = np.random.default_rng(10_000 + rep)
        a = 50.0 * rng.lognormal(0.0, 0.2, 200)
        b = 50.0 * rng.lognormal(0.0, 0.2, 200)
        verdicts.append(paired_speedup(a, b, name="aa", bootstrap=1000, confidence=0.95, margin=0.02,
                                       seed=rep).verdict)
    assert verdicts.count(Comparison.SAME) / len(verdicts) >= 0.97


def test_a_a_test_without_margin_is_near_nominal():
    """With margin 0 the false-verdict rate is governed by the CI alone: about 5% at 95%."""
    verdicts = []
    for rep in range(200):
        rng = np.random.default_rng(20_000 + rep)
        a, b = rng.lognormal(0.0, 0.5, 200), rng.lognormal(0.0, 0.5, 200)
        verdicts.append(paired_speedup(a, b, name="aa", bootstrap=1000, confidence=0.95, margin=0.0,
                                       seed=rep).verdict)
    assert verdicts.count(Comparison.SAME) / len(verdicts) >= 0.90
    assert verdicts.count(Comparison.FASTER) > 0 or verdicts.count(Comparison.SLOWER) > 0


def test_paired_reproducible_given_seed():
    rng = np.random.default_rng(8)
    a, b = rng.lognormal(0, 0.3, 150), rng.lognormal(0, 0.3, 150)
    kw = dict(name="b", bootstrap=1000, confidence=0.95, margin=0.02)
    assert paired_speedup(a, b, seed=3, **kw) == paired_speedup(list(a), list(b), seed=3, **kw)
    other = paired_speedup(a, b, seed=4, **kw)
    assert other.speedup == paired_speedup(a, b, seed=3, **kw).speedup
    assert (other.ci_low, other.ci_high) != (paired_speedup(a, b, seed=3, **kw).ci_low,
                                             paired_speedup(a, b, seed=3, **kw).ci_high)


def test_paired_errors():
    kw = dict(name="b", bootstrap=100, confidence=0.95, margin=0.02, seed=0)
    with pytest.raises(ValueError, match="equal lengths"):
        paired_speedup([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0], **kw)
    with pytest.raises(ValueError, match="at least 3"):
        paired_speedup([1.0, 2.0], [1.0, 2.0], **kw)
    with pytest.raises(ValueError, match="finite"):
        paired_speedup([1.0, 2.0, math.nan], [1.0, 2.0, 3.0], **kw)
    with pytest.raises(ValueError, match="finite"):
        paired_speedup([1.0, 2.0, 3.0], [1.0, math.inf, 3.0], **kw)
    with pytest.raises(ValueError, match="positive"):
        paired_speedup([1.0, 2.0, 3.0], [1.0, 0.0, 3.0], **kw)
    with pytest.raises(ValueError, match="positive"):
        paired_speedup([-1.0, 2.0, 3.0], [1.0, 2.0, 3.0], **kw)
    with pytest.raises(ValueError, match="margin"):
        paired_speedup([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], **{**kw, "margin": -0.1})
    with pytest.raises(ValueError, match="confidence"):
        paired_speedup([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], **{**kw, "confidence": 1.5})
    with pytest.raises(ValueError, match="bootstrap"):
        paired_speedup([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], **{**kw, "bootstrap": 0})


# ---------------------------------------------------------------- verdict rule


@pytest.mark.parametrize("lo,hi,margin,expected", [
    (1.05, 1.20, 0.02, Comparison.FASTER),
    (1.02, 1.20, 0.02, Comparison.SAME),      # touches 1+margin: not strictly above
    (1.01, 1.20, 0.02, Comparison.SAME),
    (0.80, 0.95, 0.02, Comparison.SLOWER),
    (0.80, 1 / 1.02, 0.02, Comparison.SAME),  # touches 1/(1+margin)
    (0.90, 1.10, 0.02, Comparison.SAME),
    (1.0001, 1.1, 0.0, Comparison.FASTER),
    (0.9, 0.9999, 0.0, Comparison.SLOWER),
    (1.0, 1.1, 0.0, Comparison.SAME),
])
def test_verdict_rule(lo, hi, margin, expected):
    assert verdict_for(lo, hi, margin) is expected


def test_verdict_rule_is_symmetric_under_inversion():
    for lo, hi in [(1.03, 1.2), (1.021, 1.05), (0.5, 2.0), (0.97, 0.99)]:
        v = verdict_for(lo, hi, 0.02)
        inv = verdict_for(1 / hi, 1 / lo, 0.02)
        swap = {Comparison.FASTER: Comparison.SLOWER, Comparison.SLOWER: Comparison.FASTER,
                Comparison.SAME: Comparison.SAME}
        assert inv is swap[v]


# -- bootstrap_interval: the one general bootstrap (replay metrics, strategy benchmarks) --------------------------
def _mean_of_means(xs):
    return float(np.mean([x.mean() for x in xs]))


def test_bootstrap_interval_stratified_is_the_plain_resampling_loop():
    rng = np.random.default_rng(3)
    groups = [rng.normal(1, 1, 7), rng.normal(2, 1, 12)]
    point, lo, hi = st.bootstrap_interval(groups, _mean_of_means, resamples=400, confidence=0.9, seed=5)
    ref = np.random.default_rng(5)
    reps = [_mean_of_means([g[ref.integers(0, g.size, g.size)] for g in groups]) for _ in range(400)]
    assert point == _mean_of_means(groups)
    assert (lo, hi) == pytest.approx(tuple(np.quantile(reps, [0.05, 0.95])), rel=1e-12)
    assert lo < point < hi


def test_bootstrap_interval_paired_keeps_pairs_and_vectorised_draws_the_same():
    rng = np.random.default_rng(4)
    a = rng.normal(100, 30, 50)
    b = a + 1.0                                    # b is a shifted by exactly 1, pair by pair
    diff = lambda ab: np.mean(ab[1], axis=-1) - np.mean(ab[0], axis=-1)  # noqa: E731
    paired = st.bootstrap_interval([a, b], diff, resamples=500, confidence=0.95, seed=1, paired=True)
    assert paired == pytest.approx((1.0, 1.0, 1.0))
    loop = st.bootstrap_interval([a, b], lambda ab: float(diff(ab)), resamples=500, confidence=0.95, seed=1,
                                 paired=True)
    assert loop == pytest.approx(paired)
    strat = st.bootstrap_interval([a, b], diff, resamples=500, confidence=0.95, seed=1, vectorised=True)
    assert strat[2] - strat[1] > 5                # resampled apart, the pairs' shared noise is back


def test_bootstrap_interval_rejects_bad_input():
    x = np.arange(5.0)
    with pytest.raises(ValueError, match="equal lengths"):
        st.bootstrap_interval([x, x[:4]], _mean_of_means, resamples=10, confidence=0.9, seed=0, paired=True)
    with pytest.raises(ValueError, match="empty"):
        st.bootstrap_interval([x, x[:0]], _mean_of_means, resamples=10, confidence=0.9, seed=0)
    with pytest.raises(ValueError, match="confidence"):
        st.bootstrap_interval([x], _mean_of_means, resamples=10, confidence=1.0, seed=0)
    with pytest.raises(ValueError, match="bootstrap"):
        st.bootstrap_interval([x], _mean_of_means, resamples=0, confidence=0.9, seed=0)
