"""Benchmark of search strategies on recorded spaces: ours, Kernel Tuner's and Optuna's, in the same run.

Protocol (written into the results):
- spaces: the --split set (tuning, heldout or all; default tuning) of the recorded spaces in --spaces (default:
  benchmarks/spaces, vendored in the repository, see benchmarks/vendor_spaces.py; the sets are its split.toml — the
  tuning set is the six public brute-forced spaces and our H200 recordings; a folder without split.toml: every
  space in it)
  plus every file given with --space (repeatable; a Kernel Tuner cache or a kernelloop space file), restricted
  to the configurations that did not fail — what Kernel Tuner's tune_cache searches. Kernel Tuner needs one
  fixed parameter list, so a kernelloop space whose configurations carry different parameters (per template) is
  handed to it as a cache over the union of the parameters, a parameter a configuration lacks holding a
  placeholder level (see `kt_flat_space`); the restriction Kernel Tuner infers from the cache keeps it to the
  recorded configurations;
- budget: --budget evaluations (400) per run; seeds 0..--seeds-1 (20) per strategy and space. On a space with
  fewer configurations than the budget a run stops when the space is exhausted (our replay loop runs at most
  len(space) evaluations; Kernel Tuner lowers max_fevals to the search-space size); the best-so-far curve then
  stays flat up to the budget, so P@k past the space size is the run's final best, evaluations-to-5 % is
  never censored there, and the methodology score's range (random search's 1 % -> 95 % cutoffs) lies within
  the space size anyway;
- per run: evaluations until the best found is within 5 % of the space's optimum (unreached = censored,
  counted as "more than the budget"), P@50 and P@100 (optimum / best after 50 / 100 evaluations), and the
  methodology score of Willemsen et al. (FGCS 2024; see kernelloop.tune.replay.metrics) over evaluations, capped at
  the budget; the random-search curve it standardises against is checked against the autotuning_methodology
  package's own when that package is installed;
- aggregate: median evaluations-to-5 % over all runs of all spaces, mean P@k, mean score over spaces; 95 %
  intervals by a percentile bootstrap over seeds, stratified by space (2000 replicates);
- "worse than random on a space": the mean score is below that of our `random` strategy on that space, with
  a bootstrap interval of the difference that excludes 0 (also listed: a lower point estimate at all).

Run (2 cores: about an hour for everything; results are cached per strategy and space in --cache):

    python benchmarks/strategies.py --out benchmarks/results [--only staged,random] [--jobs 2] [--space FILE ...]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # small matrices: BLAS threads only contend
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runpack import pack, unpack  # noqa: E402  (benchmarks/runpack.py: a results folder's runs)

from kernelloop.tune.replay import RecordedSpace, load_space, replay  # noqa: E402
from kernelloop.tune.replay.corpus import select_paths  # noqa: E402
from kernelloop.tune.replay.metrics import (bootstrap_ci, evals_to_within, fraction_of_optimum,  # noqa: E402
                                       methodology_score, random_curve, score_range)

ROOT = Path(__file__).resolve().parents[1]
OURS = ["staged", "evolution", "annealing", "mcts", "random", "exhaustive"]
OPTUNA = ["optuna-tpe", "optuna-cmaes", "optuna-random"]
SEEDS_OVERRIDE = {"kt:bayes_opt": 10, "optuna-cmaes": 10}   # expensive ones; stated in the results
KT_STALL = 5   # x budget: consecutive proposals of already evaluated configurations after which a Kernel Tuner
               # run on a kernelloop space is stopped (see kt_stall_stop); stated in the results


def default_spaces() -> Path:
    """The vendored public spaces (benchmarks/vendor_spaces.py), so a clean clone runs the benchmark."""
    return ROOT / "benchmarks" / "spaces"


@functools.lru_cache(maxsize=None)
def _space(path: str):
    return load_space(path, valid_only=True)


def kt_flat_space(space: RecordedSpace) -> tuple[dict, RecordedSpace]:
    """A Kernel Tuner cache document of `space` and the same space with every configuration over all parameters.

    Kernel Tuner tunes one fixed list of parameters; a kernelloop space may mix templates whose configurations
    have different parameters. A parameter a configuration lacks takes a placeholder level below every real one
    (0 when all its levels are positive, else its smallest level - 1; "n/a" for a parameter with non-numeric
    levels) — the counterpart of the "<absent>" level our own encoding gives a missing key. Values are unchanged,
    so a Kernel Tuner trajectory looked up in the flat space has the objective values of the original.
    """
    names = list(space.params) or sorted({k for c in space.configs for k in c})
    levels = {k: {c[k] for c in space.configs if k in c} for k in names}
    fill = {}
    for k, vals in levels.items():
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            lo = min(vals)
            fill[k] = 0 if lo > 0 else lo - 1
        else:
            fill[k] = "n/a"
    flat = [{k: c.get(k, fill[k]) for k in names} for c in space.configs]
    tune_params = {k: sorted(levels[k] | ({fill[k]} if any(k not in c for c in space.configs) else set()),
                             key=lambda v: (isinstance(v, str), v)) for k in names}
    cache = {}
    for c, v in zip(flat, space.values):
        if v is not None:
            cache[",".join(str(c[k]) for k in names)] = {**c, "time": float(v), "compile_time": 0.0,
                                                         "verification_time": 0.0, "benchmark_time": 0.0}
    device = space.meta.get("device")
    doc = {"device_name": device.get("name", "device") if isinstance(device, dict) else str(device or "device"),
           "kernel_name": space.name, "problem_size": 1, "tune_params_keys": names, "tune_params": tune_params,
           "objective": "time", "cache": cache}
    return doc, RecordedSpace(space.name, flat, list(space.values), list(space.statuses), space.objective, names,
                              dict(space.meta))


@contextlib.contextmanager
def kt_cache_for(path: str, space: RecordedSpace):
    """(plain Kernel Tuner cache file, space to look its trajectory up in) for a recorded space file."""
    from kernelloop.tune.replay.external import plain_cache
    if space.meta.get("format") == "kernel_tuner_cache":
        with plain_cache(path) as plain:   # a Kernel Tuner cache: replayed as recorded
            yield plain, space
        return
    doc, flat = kt_flat_space(space)
    with tempfile.TemporaryDirectory(prefix="kl-kt-") as tmp:
        out = Path(tmp) / "space.json"
        out.write_text(json.dumps(doc))
        yield out, flat


@contextlib.contextmanager
def kt_stall_stop(limit: int):
    """Stop a Kernel Tuner run once it has proposed `limit` already evaluated configurations in a row.

    Kernel Tuner serves a configuration it has already evaluated from its cache without counting it, and stops
    only when max_fevals (at most the search-space size) distinct ones are evaluated. On a kernelloop space with
    per-template parameters, flattened for it (`kt_flat_space`), the configurations differing in one parameter
    are mostly not in the space, so neighbourhood moves cannot leave a template, and some strategies (greedy_ils,
    hybrid_vndx, nsga2, nsga3) re-propose visited configurations without end once the budget reaches the space
    size. At the limit the budget is marked spent, which ends the run through Kernel Tuner's own stop path; the
    run keeps what it evaluated (its curve stays flat from there). Yields a dict: proposals (repeats included),
    whether the run was stopped so.
    """
    from kernel_tuner.runners.simulation import SimulationRunner
    orig = SimulationRunner.run
    state = {"proposals": 0, "capped": False, "_seen": set(), "_repeats": 0}

    def run(self, parameter_space, tuning_options):
        parameter_space = list(parameter_space)
        for element in parameter_space:
            state["proposals"] += 1
            key = ",".join(str(i) for i in element)   # Kernel Tuner's own cache key
            if key in state["_seen"]:
                state["_repeats"] += 1
            else:
                state["_seen"].add(key)
                state["_repeats"] = 0
        if state["_repeats"] >= limit and not state["capped"]:
            state["capped"] = True
            tuning_options.budget.max_fevals = tuning_options.budget.num_fevals
        return orig(self, parameter_space, tuning_options)

    SimulationRunner.run = run
    try:
        yield state
    finally:
        SimulationRunner.run = orig


def run_one(task: tuple) -> dict:
    """One (strategy, space, seed) run -> its per-run metrics (executed in a worker process)."""
    strategy, path, seed, budget = task
    space = _space(path)
    extra = {}
    vals = space.valid_values
    t0 = time.perf_counter()
    if strategy.startswith("kt:"):
        from kernelloop.tune.replay.external import kernel_tuner_run
        with kt_cache_for(path, space) as (plain, kt_space):
            if kt_space is space:   # a Kernel Tuner cache: its own stopping rule only
                traj = kernel_tuner_run(plain, kt_space, strategy[3:], seed, budget)
            else:
                with kt_stall_stop(KT_STALL * budget) as cap:
                    traj = kernel_tuner_run(plain, kt_space, strategy[3:], seed, budget)
                extra = {"kt_proposals": cap["proposals"], "kt_capped": cap["capped"]}
    else:
        traj = replay(space, strategy, seed, budget)
    wall = time.perf_counter() - t0
    curve = traj.curve()
    opt = float(vals[0])
    return {"strategy": strategy, "space": space.name, "seed": seed, "evaluations": traj.evaluations,
            "evals_to_5pct": evals_to_within(curve, opt, 0.05), "p50": fraction_of_optimum(curve, opt, 50),
            "p100": fraction_of_optimum(curve, opt, 100), "score": methodology_score(curve, vals),
            "strategy_s_per_eval": traj.strategy_seconds / max(traj.evaluations, 1), "wall_s": wall,
            "interventions": sum(1 for e in traj.events if e.get("kind") == "supervisor"),
            "curve_at": {str(k): float(curve[k - 1]) / opt for k in (10, 25, 50, 100, 200, 400) if k <= budget},
            **extra}


def check_random_curve(paths: list[Path], budget: int) -> str:
    """Our calculated random-search curve against autotuning_methodology's, on every space."""
    try:
        from autotuning_methodology.baseline import RandomSearchCalculatedBaseline
    except ImportError as e:
        return f"not checked: autotuning_methodology is not installed ({e})"

    class _Stats:   # the attributes RandomSearchCalculatedBaseline reads
        minimization = True

    for p in paths:
        vals = load_space(p, valid_only=True).valid_values
        st = _Stats()
        st.objective_performances_total_sorted = vals
        st.objective_performances_total_sorted_nan = vals
        fe = score_range(vals, budget)
        theirs = RandomSearchCalculatedBaseline(st)._get_random_curve(fe, smoothing=False)
        if not np.allclose(theirs, random_curve(vals, fe)):
            raise SystemExit(f"random-search curve differs from autotuning_methodology's on {p.name}")
    return "identical to autotuning_methodology's RandomSearchCalculatedBaseline on every space"


def summarize(runs: list[dict], spaces: list[str], budget: int, n_boot: int = 2000) -> dict:
    """Aggregate metrics with stratified bootstrap intervals; per-space figures; comparison with random."""
    by = {}
    for r in runs:
        by.setdefault(r["strategy"], {}).setdefault(r["space"], []).append(r)
    out = {}
    rand = by.get("random", {})
    for strat, per_space in by.items():
        if set(per_space) != set(spaces):
            continue
        cens = budget + 1   # unreached: beyond the budget (censored); the median is still well defined
        ev = [np.array([r["evals_to_5pct"] or cens for r in sorted(per_space[s], key=lambda r: r["seed"])], float)
              for s in spaces]
        p50 = [np.array([r["p50"] for r in per_space[s]]) for s in spaces]
        p100 = [np.array([r["p100"] for r in per_space[s]]) for s in spaces]
        sc = [np.array([r["score"] for r in per_space[s]]) for s in spaces]
        med = bootstrap_ci(ev, lambda xs: float(np.median(np.concatenate(xs))), n_boot)
        row = {
            "seeds": len(per_space[spaces[0]]),
            "median_evals_to_5pct": med,
            "median_evals_to_5pct_per_space": {s: float(np.median(e)) for s, e in zip(spaces, ev)},
            "reached_5pct_fraction": float(np.mean(np.concatenate(ev) <= budget)),
            "p50": bootstrap_ci(p50, lambda xs: float(np.mean([x.mean() for x in xs])), n_boot),
            "p100": bootstrap_ci(p100, lambda xs: float(np.mean([x.mean() for x in xs])), n_boot),
            "score": bootstrap_ci(sc, lambda xs: float(np.mean([x.mean() for x in xs])), n_boot),
            "score_per_space": {s: float(x.mean()) for s, x in zip(spaces, sc)},
            "strategy_ms_per_eval": 1e3 * float(np.mean([r["strategy_s_per_eval"] for s in spaces for r in per_space[s]])),
            "wall_s_per_run": float(np.mean([r["wall_s"] for s in spaces for r in per_space[s]])),
        }
        worse, lower = [], []
        if rand and strat != "random":
            for s, x in zip(spaces, sc):
                rx = np.array([r["score"] for r in rand[s]])
                d = bootstrap_ci([x, rx], lambda xs: float(xs[0].mean() - xs[1].mean()), n_boot)
                if d[0] < 0:
                    lower.append(s)
                if d[2] < 0:
                    worse.append(s)
        row["worse_than_random_on"] = worse
        row["below_random_point_estimate_on"] = lower
        out[strat] = row
    return out


def render_md(summary: dict, meta: dict, spaces: list[str]) -> str:
    def ci(t, fmt="{:.3f}"):
        return f"{fmt.format(t[0])} [{fmt.format(t[1])}, {fmt.format(t[2])}]"

    lines = [f"# Search strategies on recorded spaces — {meta['date']}", "",
             "Generated by `benchmarks/strategies.py`; numbers are measured by that script on this commit's code.", "",
             "## Protocol", ""]
    lines += [f"- {k}: {v}" for k, v in meta["protocol"].items()]
    lines += ["", "## Aggregate (95 % bootstrap intervals over seeds, stratified by space)", "",
              "| strategy | seeds | score | median evals to 5 % | reached 5 % | P@50 | P@100 | worse than random on | "
              "ms per proposal |", "|---|---|---|---|---|---|---|---|---|"]
    order = sorted(summary, key=lambda s: -summary[s]["score"][0])
    for s in order:
        r = summary[s]
        lines.append(f"| {s} | {r['seeds']} | {ci(r['score'])} | {ci(r['median_evals_to_5pct'], '{:.0f}')} | "
                     f"{r['reached_5pct_fraction']:.0%} | {ci(r['p50'])} | {ci(r['p100'])} | "
                     f"{', '.join(r['worse_than_random_on']) or '—'} | {r['strategy_ms_per_eval']:.2f} |")
    lines += ["", "Evaluations to within 5 % are censored at budget+1 when a run never got there; "
              "'ms per proposal' is wall time inside ask+tell (for `kt:*`: the whole tune_cache call per "
              "evaluation, Kernel Tuner's own overhead included).", "",
              "## Median evaluations to within 5 % per space", "",
              "| strategy | " + " | ".join(spaces) + " |", "|---|" + "---|" * len(spaces)]
    for s in order:
        r = summary[s]["median_evals_to_5pct_per_space"]
        lines.append(f"| {s} | " + " | ".join("—" if r[x] > meta["budget"] else f"{r[x]:.0f}" for x in spaces) + " |")
    lines += ["", "## Methodology score per space (0 = calculated random search, 1 = optimum at once)", "",
              "| strategy | " + " | ".join(spaces) + " |", "|---|" + "---|" * len(spaces)]
    for s in order:
        r = summary[s]["score_per_space"]
        lines.append(f"| {s} | " + " | ".join(f"{r[x]:.3f}" for x in spaces) + " |")
    if meta.get("not_run"):
        lines += ["", "## Not run", ""] + [f"- {k}: {v}" for k, v in meta["not_run"].items()]
    if meta.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in meta["notes"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spaces", type=Path, default=default_spaces(),
                    help="a folder of recorded spaces (every *.json / *.json.xz / *.json.gz in it)")
    ap.add_argument("--split", choices=["tuning", "heldout", "all"], default=None,
                    help="which set of --spaces/split.toml (default: tuning; every space of a folder without one)")
    ap.add_argument("--space", type=Path, action="append", default=[],
                    help="a recorded space file to add to the folder's (repeatable)")
    ap.add_argument("--budget", type=int, default=400)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--only", default="", help="comma-separated strategies (default: all)")
    ap.add_argument("--seeds-for", default="", help="per-strategy seed counts, e.g. 'optuna-tpe=10,kt:bayes_opt=5' "
                                                    "(a deviation from the protocol, recorded in the results)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache", type=Path, default=ROOT / "runs" / "strategies-bench-cache")
    ap.add_argument("--runs", type=Path, action="append", default=[],
                    help="a results folder's runs pack (.jsonl.xz, .gz) to seed --cache from (repeatable; runpack.py)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--tag", default=time.strftime("%Y-%m-%d"))
    ap.add_argument("--note", action="append", default=[], help="a note to add to the results (repeatable)")
    ap.add_argument("--summarize-only", action="store_true",
                    help="write the results from the cached runs only (strategies with every space present)")
    args = ap.parse_args(argv)

    try:
        dir_paths = select_paths(args.spaces, args.split)
    except ValueError as e:
        ap.error(str(e))
    paths = dir_paths + [p for p in args.space if p.resolve() not in {d.resolve() for d in dir_paths}]
    loaded = [load_space(p, valid_only=True) for p in paths]
    spaces = [s.name for s in loaded]
    if len(set(spaces)) != len(spaces):
        raise SystemExit(f"two spaces with the same name: {spaces}")
    sizes = {s.name: len(s) for s in loaded}
    flat_spaces = [s.name for s in loaded if s.meta.get("format") != "kernel_tuner_cache"]
    not_run: dict[str, str] = {}
    strategies = OURS + OPTUNA
    try:
        from kernelloop.tune.replay.external import SKIPPED_KT, kernel_tuner_strategies
        strategies += [f"kt:{s}" for s in kernel_tuner_strategies()]
        not_run.update({f"kt:{k}": v for k, v in SKIPPED_KT.items()})
    except ImportError as e:
        not_run["Kernel Tuner"] = f"not installed ({e}); pip install 'kernelloop[search-bench]'"
    if args.only:
        strategies = [s for s in args.only.split(",") if s]
    args.cache.mkdir(parents=True, exist_ok=True)
    for packed in args.runs:
        unpack(packed, args.cache)
    seeds_for = dict(SEEDS_OVERRIDE)
    for item in filter(None, args.seeds_for.split(",")):
        k, v = item.rsplit("=", 1)
        seeds_for[k] = int(v)

    runs: list[dict] = []
    for strat in strategies:
        seeds = min(args.seeds, seeds_for.get(strat, args.seeds))
        tasks, cached = [], []
        for p, name in zip(paths, spaces):
            f = args.cache / f"{strat.replace(':', '_')}--{name}--b{args.budget}.jsonl"
            have = [json.loads(l) for l in f.read_text().splitlines()] if f.is_file() else []
            have = [r for r in have if r["seed"] < seeds]
            cached += have
            done = {r["seed"] for r in have}
            tasks += [(strat, str(p), s, args.budget) for s in range(seeds) if s not in done]
        if args.summarize_only:
            tasks = []
            if not cached:
                not_run.setdefault(strat, "not run (time); rerun the script for it")
                continue
        t0 = time.time()
        new, failed = [], None
        try:
            with ProcessPoolExecutor(args.jobs) as pool:
                for r in pool.map(run_one, tasks):
                    new.append(r)
                    f = args.cache / f"{strat.replace(':', '_')}--{r['space']}--b{args.budget}.jsonl"
                    with f.open("a") as fh:
                        fh.write(json.dumps(r) + "\n")
        except Exception as e:  # a public strategy that cannot run here is reported, not hidden
            failed = f"{type(e).__name__}: {e}"
        if failed:
            not_run[strat] = failed
            print(f"{strat}: not run ({failed})", file=sys.stderr, flush=True)
            continue
        runs += cached + new
        print(f"{strat}: {len(new)} new runs, {len(cached)} cached, {time.time() - t0:.0f} s", file=sys.stderr,
              flush=True)

    summary = summarize(runs, spaces, args.budget)
    capped: dict[str, list] = {}
    for r in runs:
        if r.get("kt_capped"):
            capped.setdefault(f"{r['strategy']} on {r['space']}", []).append(r["evaluations"])
    import kernelloop
    meta = {
        "date": args.tag, "budget": args.budget, "spaces": spaces,
        "protocol": {
            "spaces": f"{len(spaces)} recorded spaces: {len(dir_paths)} from {args.spaces.name}/ "
                      f"({', '.join(spaces[:len(dir_paths)])})"
                      + (f" and {len(paths) - len(dir_paths)} given with --space ("
                         + ", ".join(f"{n} from {p}" for n, p in zip(spaces[len(dir_paths):], paths[len(dir_paths):]))
                         + ")" if len(paths) > len(dir_paths) else "")
                      + "; failed configurations removed (as Kernel Tuner's tune_cache does); valid configurations "
                      "per space: " + ", ".join(f"{n} {sizes[n]}" for n in spaces)
                      + ("; a kernelloop space is given to Kernel Tuner as a cache over the union of its parameters, "
                         "a parameter a configuration lacks (per-template parameters) at a placeholder level (0, or "
                         "its smallest level - 1; 'n/a' for text), restricted to the recorded configurations"
                         if flat_spaces else ""),
            "budget": f"{args.budget} evaluations per run"
                      + (f"; on the spaces smaller than that ({', '.join(n for n in spaces if sizes[n] < args.budget)})"
                         " "
                         "a run stops when the space is exhausted (our replay stops at len(space); Kernel Tuner "
                         "lowers max_fevals to the search-space size): its best-so-far curve stays flat up to the "
                         "budget, so P@k past the space size is the run's final best and evaluations-to-5 % is never "
                         "censored there; the methodology score's range (random search's 1 % -> 95 % cutoffs) lies "
                         "within the space size, so the budget does not change it"
                         if any(sizes[n] < args.budget for n in spaces) else ""),
            "seeds": f"{args.seeds} per strategy and space (fewer where stated: "
                     + ", ".join(f"{k}: {v}" for k, v in seeds_for.items()) + "; see the seeds column)",
            "score": "Willemsen et al. methodology score over evaluations "
                     "(cutoffs 1 % -> 95 % of median-to-optimum for calculated random search), capped at the budget",
            **({"Kernel Tuner on kernelloop spaces":
                f"on {', '.join(flat_spaces)} a Kernel Tuner run is also stopped once it has proposed {KT_STALL} x "
                f"budget = {KT_STALL * args.budget} already evaluated configurations in a row (Kernel Tuner serves "
                "a repeat from its cache without counting it; on a flattened per-template space some of its "
                "strategies re-propose visited configurations without end once the budget reaches the space "
                "size); the run keeps what it evaluated and its curve stays flat from there. Runs stopped so "
                "(count, distinct evaluations min-max): "
                + ("; ".join(f"{k}: {len(v)} of their runs, {min(v)}-{max(v)}" for k, v in sorted(capped.items()))
                   or "none")} if flat_spaces else {}),
            "random curve": check_random_curve(paths, args.budget),
            "intervals": "95 % percentile bootstrap, 2000 replicates, seeds resampled within each space",
            "worse than random": "mean score below our `random` strategy's on a space with the bootstrap "
                                 "interval of the difference excluding 0",
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
                       f"kernelloop {kernelloop.__version__}",
        },
        "not_run": not_run,
        "notes": [
            "The methodology's calculated random curve is the value at the expected rank of the best of M draws; "
            "an actual random search differs from it run by run, so `random` itself scores near 0, not exactly 0 "
            "(above it on some spaces, below on others).",
            *args.note,
        ],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"strategies-{args.tag}.json").write_text(json.dumps({"meta": meta, "summary": summary}, indent=1))
    (args.out / f"strategies-{args.tag}.md").write_text(render_md(summary, meta, spaces))
    used = {args.cache / f"{r['strategy'].replace(':', '_')}--{r['space']}--b{args.budget}.jsonl" for r in runs}
    pack([f for f in used if f.is_file()], args.out / f"strategies-{args.tag}-runs.jsonl.xz")   # the runs, one a line
    print(render_md(summary, meta, spaces))
    return 0


if __name__ == "__main__":
    sys.exit(main())
