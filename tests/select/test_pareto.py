"""Tests of kernelloop.tune.select.pareto on hand-made objective sets and real Trial records."""

from __future__ import annotations

import math

import pytest

from kernelloop.base.records import (
    BuildArtifact, BuildFailure, ErrorMetrics, Measurement, Stats, Status, TimingPolicy, Trial, Verdict,
)
from kernelloop.tune.select import best_per_workload, front_for_workload, pareto_front, runner_up_per_workload
from kernelloop.tune.select.pareto import OBJECTIVES

# ---------------------------------------------------------------- pareto_front on plain dicts


def names(front):
    return [name for name, _ in front]


def test_empty_items():
    assert pareto_front([], ["a"]) == []


def test_single_item_is_its_own_front():
    items = [("x", {"a": 1.0})]
    assert pareto_front(items, ["a"]) == items


def test_single_objective_keeps_only_the_minimum_and_its_ties():
    items = [("a", {"t": 3.0}), ("b", {"t": 1.0}), ("c", {"t": 2.0}), ("d", {"t": 1.0})]
    assert names(pareto_front(items, ["t"])) == ["b", "d"]


def test_dominated_item_is_dropped():
    items = [("slow_fat", {"t": 2.0, "r": 64}), ("fast_lean", {"t": 1.0, "r": 32})]
    assert names(pareto_front(items, ["t", "r"])) == ["fast_lean"]


def test_weak_domination_equal_on_one_better_on_other():
    items = [("a", {"t": 1.0, "r": 40}), ("b", {"t": 1.0, "r": 32})]
    assert names(pareto_front(items, ["t", "r"])) == ["b"]


def test_trade_offs_are_all_kept_and_sorted_by_first_objective():
    items = [
        ("c", {"t": 3.0, "r": 16}),
        ("a", {"t": 1.0, "r": 64}),
        ("dominated", {"t": 3.5, "r": 40}),   # dominated by b (2.0, 32)
        ("b", {"t": 2.0, "r": 32}),
    ]
    front = pareto_front(items, ["t", "r"])
    assert names(front) == ["a", "b", "c"]
    # The returned pairs are the input pairs themselves.
    assert front[0] is items[1]


def test_identical_vectors_are_all_kept_in_input_order():
    items = [("x2", {"t": 1.0, "r": 8}), ("y", {"t": 0.5, "r": 99}), ("x1", {"t": 1.0, "r": 8}),
             ("z", {"t": 1.0, "r": 9})]
    assert names(pareto_front(items, ["t", "r"])) == ["y", "x2", "x1"]


def test_order_among_equal_first_objective_is_stable_input_order():
    items = [("p", {"t": 1.0, "r": 3.0}), ("q", {"t": 1.0, "r": 3.0}), ("o", {"t": 1.0, "r": 3.0})]
    assert names(pareto_front(items, ["t", "r"])) == ["p", "q", "o"]


def test_objective_order_decides_sorting_only():
    items = [("a", {"t": 1.0, "r": 64}), ("b", {"t": 2.0, "r": 32})]
    assert names(pareto_front(items, ["t", "r"])) == ["a", "b"]
    assert names(pareto_front(items, ["r", "t"])) == ["b", "a"]


def test_only_named_objectives_count():
    items = [("a", {"t": 1.0, "r": 64}), ("b", {"t": 2.0, "r": 32})]
    assert names(pareto_front(items, ["t"])) == ["a"]


def test_none_ranks_worst():
    items = [("known", {"t": 1.0, "r": 32}), ("unknown", {"t": 1.0, "r": None})]
    assert names(pareto_front(items, ["t", "r"])) == ["known"]


def test_none_can_still_be_on_the_front_through_another_objective():
    items = [("fast_unknown", {"t": 1.0, "r": None}), ("slow_known", {"t": 2.0, "r": 32})]
    assert names(pareto_front(items, ["t", "r"])) == ["fast_unknown", "slow_known"]


def test_all_none_on_one_objective_is_a_tie_there():
    items = [("a", {"t": 2.0, "r": None}), ("b", {"t": 1.0, "r": None}), ("c", {"t": 1.0, "r": None})]
    assert names(pareto_front(items, ["t", "r"])) == ["b", "c"]


def test_none_in_first_objective_sorts_last():
    items = [("n", {"t": None, "r": 1}), ("a", {"t": 5.0, "r": 10})]
    assert names(pareto_front(items, ["t", "r"])) == ["a", "n"]


def test_missing_key_and_nan_rank_like_none():
    items = [("missing", {"t": 1.0}), ("nan", {"t": 1.0, "r": math.nan}), ("none", {"t": 1.0, "r": None}),
             ("known", {"t": 1.0, "r": 5})]
    assert names(pareto_front(items, ["t", "r"])) == ["known"]
    assert names(pareto_front(items[:3], ["t", "r"])) == ["missing", "nan", "none"]


def test_three_objectives():
    items = [
        ("a", {"t": 1, "r": 3, "s": 3}),
        ("b", {"t": 3, "r": 1, "s": 3}),
        ("c", {"t": 3, "r": 3, "s": 1}),
        ("d", {"t": 2, "r": 2, "s": 2}),
        ("e", {"t": 3, "r": 3, "s": 3}),   # dominated by all of a..d
        ("f", {"t": 2, "r": 2, "s": 3}),   # dominated by d
    ]
    assert names(pareto_front(items, ["t", "r", "s"])) == ["a", "d", "b", "c"]


def test_front_members_are_mutually_non_dominated_on_random_sets():
    import random

    rng = random.Random(0)
    for _ in range(50):
        items = [(f"i{k}", {"a": rng.randint(0, 5), "b": rng.choice([None, *range(6)]), "c": rng.randint(0, 3)})
                 for k in range(rng.randint(1, 25))]
        front = pareto_front(items, ["a", "b", "c"])

        def vec(o):
            return [math.inf if o[k] is None else o[k] for k in ("a", "b", "c")]

        def dominates(x, y):
            return all(p <= q for p, q in zip(x, y)) and any(p < q for p, q in zip(x, y))

        kept = {id(p) for p in front}
        for p in items:
            is_dominated = any(dominates(vec(q[1]), vec(p[1])) for q in items)
            assert (id(p) in kept) == (not is_dominated)
        firsts = [vec(o)[0] for _, o in front]
        assert firsts == sorted(firsts)


def test_bad_objective_lists():
    with pytest.raises(ValueError):
        pareto_front([("a", {"t": 1})], [])
    with pytest.raises(ValueError):
        pareto_front([("a", {"t": 1})], ["t", "t"])


# ---------------------------------------------------------------- real Trial records

POLICY = TimingPolicy(name="interpreter-wallclock", clock="wallclock", warmup=1, samples=3, flush_bytes=0,
                      sleep_cycles=0, bootstrap=100)


def stats(median: float) -> Stats:
    return Stats(median_us=median, ci_low_us=median * 0.99, ci_high_us=median * 1.01, iqr_us=0.1, n=3)


def measurement(subject: str, workload: str, median: float) -> Measurement:
    return Measurement(subject=subject, workload_id=workload, policy=POLICY,
                       kernel_samples_us=[median] * 3, call_samples_us=[median + 5] * 3,
                       kernel=stats(median), call=stats(median + 5), bytes_moved=1e6, gbps=1e6 / median / 1e3)


def artifact(registers=32, shared=1024, compile_s=1.0) -> BuildArtifact:
    return BuildArtifact(kernel_names=["k"], registers=registers, spills=0 if registers is not None else None,
                         shared_bytes=shared, compile_s=compile_s, toolchain="triton 3.6.0 / sm_90")


def trial(index: int, candidate: str, workload: str = "w-1", median: float | None = 10.0, *,
          status: Status = Status.PASSED, build=None, run: str = "r-1") -> Trial:
    if status is Status.PASSED:
        verdict = Verdict(status=status)
    elif status is Status.WRONG_VALUES:
        verdict = Verdict(status=status, case="w-1 seed=0",
                          metrics=[ErrorMetrics(output="y", max_abs=1.0, max_rel=1.0, mismatched=1, total=4)])
    else:
        verdict = Verdict(status=status, message="boom")
    return Trial(run_id=run, index=index, candidate_id=candidate, workload_id=workload, manifest_hash="m" * 16,
                 build=artifact() if build is None else build, verdict=verdict,
                 measurement=None if median is None else measurement(candidate, workload, median),
                 started=float(index), finished=float(index) + 0.5)


def test_trial_helper_round_trips():
    t = trial(0, "c-a")
    assert Trial.from_json(t.to_json()) == t


def test_best_per_workload_picks_smallest_kernel_median():
    trials = [
        trial(0, "c-a", "w-1", 10.0),
        trial(1, "c-b", "w-1", 8.0),
        trial(2, "c-c", "w-1", 9.0),
        trial(3, "c-a", "w-2", 5.0),
        trial(4, "c-b", "w-2", 6.0),
    ]
    best = best_per_workload(trials)
    assert set(best) == {"w-1", "w-2"}
    assert best["w-1"].candidate_id == "c-b" and best["w-1"] is trials[1]
    assert best["w-2"].candidate_id == "c-a"


def test_best_per_workload_ignores_failures_and_unmeasured():
    trials = [
        trial(0, "c-wrong", median=1.0, status=Status.WRONG_VALUES),   # measured but wrong: never selected
        trial(1, "c-crash", median=None, status=Status.RUNTIME_ERROR),
        trial(2, "c-unmeasured", median=None),                           # passed but not timed
        trial(3, "c-ok", median=20.0),
        trial(4, "c-timeout", median=None, status=Status.TIMEOUT),
        trial(5, "c-only-failed", "w-2", median=None,
              status=Status.COMPILE_ERROR, build=BuildFailure(stage="compile", log="err", toolchain="triton")),
    ]
    best = best_per_workload(trials)
    assert list(best) == ["w-1"]
    assert best["w-1"].candidate_id == "c-ok"


def test_best_per_workload_ties_broken_by_trial_index():
    later_first = [trial(7, "c-late", median=5.0), trial(2, "c-early", median=5.0), trial(9, "c-slow", median=6.0)]
    assert best_per_workload(later_first)["w-1"].candidate_id == "c-early"
    assert best_per_workload(list(reversed(later_first)))["w-1"].candidate_id == "c-early"


def test_best_per_workload_empty():
    assert best_per_workload([]) == {}
    assert best_per_workload(iter([trial(0, "c-x", median=None)])) == {}


def test_front_for_workload_objectives_and_domination():
    trials = [
        trial(0, "c-fast-fat", median=5.0, build=artifact(registers=128, shared=8192, compile_s=2.0)),
        trial(1, "c-slow-lean", median=9.0, build=artifact(registers=32, shared=0, compile_s=0.5)),
        trial(2, "c-dominated", median=9.5, build=artifact(registers=64, shared=4096, compile_s=2.5)),
        trial(3, "c-mid", median=7.0, build=artifact(registers=64, shared=4096, compile_s=1.0)),
        trial(4, "c-other-workload", "w-2", median=1.0, build=artifact(registers=8, shared=0, compile_s=0.1)),
        trial(5, "c-wrong", median=0.5, status=Status.WRONG_VALUES),
    ]
    front = front_for_workload(trials, "w-1")
    assert names(front) == ["c-fast-fat", "c-mid", "c-slow-lean"]
    assert dict(front)["c-mid"] == {"latency_us": 7.0, "registers": 64, "shared_bytes": 4096, "compile_s": 1.0}
    assert tuple(front[0][1]) == OBJECTIVES
    assert names(front_for_workload(trials, "w-2")) == ["c-other-workload"]
    assert front_for_workload(trials, "w-missing") == []


def test_front_for_workload_interpreter_builds_with_none_registers():
    """In the interpreter registers are None for everyone: a tie there, so latency/shared/compile decide."""
    interp = dict(registers=None, shared=None)
    trials = [
        trial(0, "c-a", median=10.0, build=artifact(compile_s=0.2, **interp)),
        trial(1, "c-b", median=12.0, build=artifact(compile_s=0.1, **interp)),
        trial(2, "c-c", median=12.0, build=artifact(compile_s=0.3, **interp)),   # dominated by c-b
    ]
    front = front_for_workload(trials, "w-1")
    assert names(front) == ["c-a", "c-b"]
    assert front[0][1] == {"latency_us": 10.0, "registers": None, "shared_bytes": None, "compile_s": 0.2}


def test_front_for_workload_none_registers_lose_against_known_on_equal_rest():
    trials = [
        trial(0, "c-unknown", median=10.0, build=artifact(registers=None, shared=0, compile_s=1.0)),
        trial(1, "c-known", median=10.0, build=artifact(registers=40, shared=0, compile_s=1.0)),
    ]
    assert names(front_for_workload(trials, "w-1")) == ["c-known"]


def test_front_for_workload_keeps_exact_ties_in_index_order():
    b = artifact(registers=32, shared=0, compile_s=1.0)
    trials = [trial(5, "c-y", median=4.0, build=b), trial(3, "c-x", median=4.0, build=b)]
    assert names(front_for_workload(trials, "w-1")) == ["c-x", "c-y"]


def test_front_for_workload_one_entry_per_candidate():
    """A candidate timed twice (e.g. in two runs) enters once, with its fastest trial."""
    b = artifact(registers=32, shared=0, compile_s=1.0)
    trials = [trial(0, "c-a", median=9.0, build=b, run="r-1"), trial(1, "c-a", median=8.0, build=b, run="r-2"),
              trial(2, "c-b", median=8.5, build=artifact(registers=16, shared=0, compile_s=1.0))]
    front = front_for_workload(trials, "w-1")
    assert names(front) == ["c-a", "c-b"]
    assert dict(front)["c-a"]["latency_us"] == 8.0


def test_front_for_workload_without_build_artifact_ranks_build_objectives_worst():
    no_build = trial(0, "c-nobuild", median=10.0).model_copy(update={"build": None})
    known = trial(1, "c-built", median=10.0, build=artifact(registers=32, shared=0, compile_s=1.0))
    assert front_for_workload([no_build], "w-1") == [
        ("c-nobuild", {"latency_us": 10.0, "registers": None, "shared_bytes": None, "compile_s": None})]
    assert names(front_for_workload([no_build, known], "w-1")) == ["c-built"]


def test_runner_up_is_the_fastest_other_candidate():
    trials = [
        trial(0, "c-a", "w-1", 10.0),
        trial(1, "c-b", "w-1", 8.0),
        trial(2, "c-b", "w-1", 8.5),          # the winner again: not its own runner-up
        trial(3, "c-c", "w-1", 9.0),
        trial(4, "c-d", "w-1", 1.0, status=Status.WRONG_VALUES),   # failed: never selected
        trial(5, "c-a", "w-2", 5.0),          # one candidate only: no runner-up
    ]
    second = runner_up_per_workload(trials)
    assert set(second) == {"w-1"} and second["w-1"] is trials[3]
    assert runner_up_per_workload([]) == {}
