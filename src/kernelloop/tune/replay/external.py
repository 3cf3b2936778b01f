"""Public tuners replayed on the same recorded spaces: Kernel Tuner's strategies through its simulation mode.

`kernel_tuner.tune_cache(path, strategy=..., strategy_options={"max_fevals": B})` replays a Kernel Tuner cache
(its restrictions are inferred from the cache, so it searches the configurations that did not fail: compare
against our strategies on `RecordedSpace.valid_only()`). With `failures_kept`, the same simulation runs over
every configuration the cache holds, failed ones included (Kernel Tuner's `tune_kernel` in simulation mode with
a restriction to the cache's keys instead of tune_cache's restriction to its successes): a failed configuration
is then a failed evaluation Kernel Tuner's strategy sees as such, as without pruning rules. Kernel Tuner serves repeated configurations from its
cache without counting them, so the trajectory is the first occurrence of each configuration, in order, capped
at the budget. Its strategies draw from numpy's and Python's global generators, which are seeded per run.
Kernel Tuner is optional (`pip install kernelloop[search-bench]`).
"""

from __future__ import annotations

import contextlib
import io
import random
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from ...base.compressed import decompress_to, plain_name
from .runner import Trajectory
from .space import RecordedSpace

SKIPPED_KT = {"brute_force": "exhaustive enumeration in declaration order, not a search strategy"}


def kernel_tuner_strategies() -> list[str]:
    """Names of Kernel Tuner's strategies (ImportError if Kernel Tuner is not installed)."""
    from kernel_tuner.interface import strategy_map

    return [s for s in strategy_map if s not in SKIPPED_KT]


@contextlib.contextmanager
def plain_cache(path: str | Path):
    """Kernel Tuner reads only uncompressed caches: a temporary plain copy of a (maybe compressed) cache."""
    with tempfile.TemporaryDirectory(prefix="kl-kt-") as tmp:
        yield decompress_to(path, Path(tmp) / plain_name(path))


def kernel_tuner_run(cache_path: str | Path, space: RecordedSpace, strategy: str, seed: int, budget: int,
                     failures_kept: bool = False) -> Trajectory:
    """One seeded Kernel Tuner run on a plain cache file; values are looked up in `space` (same recording).
    `failures_kept`: search every configuration of the cache, failed ones included (see the module's text)."""
    import kernel_tuner

    np.random.seed(seed % 2**32)
    random.seed(seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if failures_kept:
            results = _tune_cache_with_failures(cache_path, strategy, budget)
        else:
            results, _env = kernel_tuner.tune_cache(str(cache_path), strategy=strategy,
                                                    strategy_options={"max_fevals": budget}, verbose=False,
                                                    quiet=True)
    seconds = time.perf_counter() - t0
    names = space.params or list(space.configs[0])
    seen, values, costs = set(), [], []
    for r in results:
        cfg = {k: r[k] for k in names}
        key = tuple(cfg[k] for k in names)
        if key in seen:
            continue
        seen.add(key)
        values.append(space.lookup(cfg))
        costs.append(space.cost(cfg))
        if len(values) >= budget:
            break
    return Trajectory(space.name, f"kt:{strategy}", seed, budget, values, strategy_seconds=seconds,
                      costs=costs if space.costs else [])


def _tune_cache_with_failures(cache_path: str | Path, strategy: str, budget: int) -> list[dict]:
    """Kernel Tuner's `tune_cache` without its restriction to the cache's successes: every configuration the cache
    holds is in the search space, a failed one is served from the cache as the failure it was."""
    from constraint import FunctionConstraint
    from kernel_tuner import tune_kernel
    from kernel_tuner.util import infer_args_from_cache, read_cache

    cache = read_cache(str(cache_path), open_cache=False)
    names = cache["tune_params_keys"]
    recorded = {tuple(r[k] for k in names) for r in cache["cache"].values()}
    results, _env = tune_kernel(**infer_args_from_cache(cache), cache=str(cache_path), simulation_mode=True,
                                restrictions=[FunctionConstraint(lambda *values: values in recorded)],
                                strategy=strategy, strategy_options={"max_fevals": budget}, verbose=False,
                                quiet=True)
    return results
