"""The default strategy: it learns (beats random on structured spaces), archives its interventions, takes a
prior, and its overhead per proposal stays small on a 18,000-configuration space."""

import itertools
import math
import time
from pathlib import Path

import numpy as np
import pytest

from kernelloop.tune.replay import RecordedSpace, load_space, replay
from kernelloop.tune.replay.metrics import evals_to_within
from kernelloop.tune.search import DEFAULT_STRATEGY, make_strategy
from kernelloop.tune.search.history import TransferPrior

SPACES = Path(__file__).resolve().parents[2] / "benchmarks" / "spaces"   # vendored: benchmarks/vendor_spaces.py


def synthetic(n_levels=(10, 10, 6, 5, 6), seed=0) -> RecordedSpace:
    """18,000 configurations; a rugged objective with interactions and one narrow basin."""
    rng = np.random.default_rng(seed)
    noise = {}
    configs, values = [], []
    for combo in itertools.product(*[range(n) for n in n_levels]):
        c = {f"p{i}": 2 ** v if i < 2 else v for i, v in enumerate(combo)}
        x = np.array(combo, float) / (np.array(n_levels) - 1)
        v = 1 + 3 * (x[0] - 0.7) ** 2 + 2 * (x[1] - 0.3) ** 2 + (x[0] - x[1]) ** 2 + 0.5 * (combo[2] % 2) \
            + 0.3 * abs(x[3] - x[4]) - 0.4 * math.exp(-40 * ((x[0] - 0.75) ** 2 + (x[1] - 0.35) ** 2))
        configs.append(c)
        values.append(float(v * math.exp(0.02 * rng.standard_normal())))
    return RecordedSpace("synthetic-18000", configs, values, ["ok"] * len(configs))


def test_default_is_staged():
    assert DEFAULT_STRATEGY == "staged"


def test_overhead_per_proposal_on_18000_configurations():
    space = synthetic()
    assert len(space) == 18000
    t = replay(space, "staged", seed=0, budget=400)
    per = t.strategy_seconds / t.evaluations
    print(f"staged: {1e3 * per:.2f} ms per proposal (ask+tell) at 400 evaluations on 18,000 configurations")
    assert per < 0.2           # generous for a loaded 2-core CI machine; the benchmark records exact figures
    opt = space.optimum
    assert evals_to_within(t.curve(), opt, 0.05) is not None, "never got within 5 % in 400 evaluations"


def test_beats_random_on_a_structured_space():
    space = synthetic(n_levels=(8, 8, 4, 3, 3))
    opt = space.optimum
    ours = [evals_to_within(replay(space, "staged", s, 150).curve(), opt) or 151 for s in range(4)]
    rand = [evals_to_within(replay(space, "random", s, 150).curve(), opt) or 151 for s in range(4)]
    assert np.median(ours) < np.median(rand) / 2, (ours, rand)


def test_supervisor_interventions_are_events():
    space = synthetic(n_levels=(6, 6, 4, 3, 3))
    t = replay(space, "staged", seed=1, budget=150)
    acts = [e for e in t.events if e["kind"] == "supervisor"]
    assert acts, "150 evaluations on a small space should stagnate at least once"
    assert all({"action", "reason", "evaluations", "best"} <= set(e) for e in acts)
    assert acts[0]["action"] == "polish"


def test_prior_from_another_shape_warm_starts_the_search():
    src = synthetic(n_levels=(6, 6, 4, 3, 3), seed=1)
    dst = synthetic(n_levels=(6, 6, 4, 3, 3), seed=2)
    prior = TransferPrior.from_space(src)
    s = make_strategy("staged", dst.configs, 0, prior=prior)
    first = s.ask()
    assert first == dst.configs[prior.warm_start(dst.configs, 1)[0]]
    assert s.events[0]["kind"] == "prior"


def test_finds_the_needle_on_a_public_space_faster_than_random():
    space = load_space(SPACES / "kt_pnpoly_RTX_3090.json.xz", valid_only=True)
    opt = space.optimum
    ours = [evals_to_within(replay(space, "staged", s, 100).curve(), opt) or 101 for s in range(3)]
    assert np.median(ours) <= 40, ours        # random search needs 111 in expectation here


def test_failure_aware_on_a_public_space_with_its_failures_kept():
    """pnpoly with its 318 failed configurations in the space: the default finds a configuration within 5 % sooner
    than random search, and spends fewer evaluations on failures than random search does (benchmark over 20 seeds:
    median 13 evaluations to within 5 %, random never within 100)."""
    space = load_space(SPACES / "kt_pnpoly_RTX_3090.json.xz")
    assert space.n_failed == 318
    opt = space.optimum
    ours, rand, fails, rand_fails = [], [], [], []
    for s in range(10):      # a few seeds are noise here: single runs range from 8 to 66 evaluations
        t = replay(space, "staged", s, 100)
        r = replay(space, "random", s, 100, exploration=1.0)
        ours.append(evals_to_within(t.curve(), opt) or 101)
        rand.append(evals_to_within(r.curve(), opt) or 101)
        fails.append(sum(v is None for v in t.values))
        rand_fails.append(sum(v is None for v in r.values))
    assert np.median(ours) < np.median(rand), (ours, rand)
    assert sum(fails) < sum(rand_fails), (fails, rand_fails)
