"""kernelloop.tune.replay.heldout: medians with censored runs, ratios of median evaluations to 2 % per space with
Bonferroni-corrected paired intervals, and their geometric mean over spaces."""

import math

import pytest

from kernelloop.tune.replay.heldout import RunRecord, aggregate, cells, compare

BUDGET = 10


def _runs(e2s, p50=0.9):
    return {i: RunRecord(seed=i, e2=e, e5=e, p50=p50) for i, e in enumerate(e2s)}


def test_cells_count_a_run_that_never_got_there_as_budget_plus_one():
    runs = {("s", "A", "kept"): _runs([3, None, 5]), ("s", "B", "kept"): _runs([None, None, 2])}
    a, b = cells(runs, BUDGET)
    assert (a.space, a.median_e2, a.reached_2pct, a.seeds) == ("A", 5.0, pytest.approx(2 / 3), 3)
    assert (b.median_e2, b.reached_2pct, b.p100) == (11.0, pytest.approx(1 / 3), None)
    pooled = aggregate(runs, BUDGET)[("s", "kept")]
    assert (pooled.seeds, pooled.median_e2, pooled.space) == (6, 8.0, "all 2")     # [3,11,5,11,11,2] -> 8


def test_ratios_per_space_and_their_geometric_mean():
    runs = {("cand", "A", "dropped"): _runs([2, 4, 6, 8]), ("base", "A", "dropped"): _runs([4, 8, 12, 16]),
            ("cand", "B", "dropped"): _runs([4, 6, 8, 10]), ("base", "B", "dropped"): _runs([2, 3, 4, 5])}
    per, overall = compare(runs, "cand", "base", BUDGET, resamples=500)
    assert [(r.space, r.ratio) for r in per] == [("A", 0.5), ("B", 2.0)]
    # the candidate is exactly half / twice the baseline on every seed: every resample gives the same ratio
    assert [(r.low, r.high) for r in per] == [(0.5, 0.5), (2.0, 2.0)]
    assert all(r.confidence == pytest.approx(1 - 0.05 / 2) for r in per)       # Bonferroni over 2 spaces
    (g,) = overall
    assert g.ratio == pytest.approx(math.sqrt(0.5 * 2.0)) and g.confidence == 0.95 and g.seeds == 4


def test_only_seeds_both_ran_are_paired_and_censored_runs_count():
    runs = {("cand", "A", "kept"): _runs([None, 2, 3]), ("base", "A", "kept"): _runs([4, 4])}
    (r,), (g,) = compare(runs, "cand", "base", BUDGET, resamples=200)
    assert r.seeds == 2 and r.ratio == pytest.approx(6.5 / 4)                  # cand [11, 2] -> median 6.5
    assert r.low <= r.ratio <= r.high and g.ratio == pytest.approx(r.ratio)


def test_no_common_runs_no_ratio():
    runs = {("cand", "A", "kept"): _runs([1]), ("base", "B", "kept"): _runs([1])}
    assert compare(runs, "cand", "base", BUDGET, resamples=10) == ([], [])
