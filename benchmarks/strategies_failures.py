"""Strategies on every recorded space of benchmarks/spaces/, with infeasible configurations dropped and kept.

Protocol (written into the results):
- spaces: the --split set (tuning, heldout or all; default tuning) of --spaces (default benchmarks/spaces/, vendored
  in the repository by benchmarks/vendor_spaces.py; the sets are its split.toml; a folder without one: every *.json,
  *.json.xz and *.json.gz in it); conditions: "dropped"
  (failed configurations removed: what pruning achieves, and what Kernel Tuner's tune_cache searches) and "kept"
  (the whole recorded space, failures included: what happens without rules). A space without failures has one
  condition (both are the same space);
- per run (seeds 0..--seeds-1, --budget evaluations): evaluations until the best found is within 2 % and 5 % of
  the optimum of the configurations that ran (censored at budget + 1), P@50 and P@100 (optimum / best after 50 /
  100; the final best when the budget is smaller), the number
  of failed evaluations, and, where the recording has costs, the GPU seconds spent until within 2 % (compile,
  verification and timing as recorded, failures included; censored runs count their whole spend and are marked);
- Kernel Tuner's strategies (`kt:NAME`) replay the same spaces in its simulation mode; in the "kept" condition
  every recorded configuration is in its search space and a failed one is a failed evaluation it sees as such
  (kernelloop.tune.replay.external, failures_kept);
- our strategies are told each failure's recorded status (so they see its kind) and each evaluation's cost;
- aggregate per space and condition: medians over seeds.

Runs are sequential (no process pool) and cached per (strategy, space, condition) in --cache, so a later call
with other strategies, or with --label/PYTHONPATH pointing at another commit's code, adds to the same table:

    python benchmarks/strategies_failures.py --only staged,optuna-tpe,random
    PYTHONPATH=/tmp/kl-base/src python benchmarks/strategies_failures.py --only staged --label staged@BASE
    python benchmarks/strategies_failures.py --only staged --option candidate_threshold=0.65 --label staged@ct0.65
    python benchmarks/strategies_failures.py --only "" --out DIR      # the tables from the cached runs

--conditions limits a run to one condition; --option KEY=VALUE (a JSON value, repeatable) goes to the strategy's
constructor, so a setting of it is run under its own --label.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runpack import PACK_NAME, pack, unpack  # noqa: E402  (benchmarks/runpack.py: a results folder's runs)

from kernelloop.base.compressed import plain_name, read_text, suffix_of  # noqa: E402
from kernelloop.tune.replay import RecordedSpace, load_space  # noqa: E402
from kernelloop.tune.replay.corpus import select_paths  # noqa: E402
from kernelloop.tune.replay.metrics import best_so_far, evals_to_within, fraction_of_optimum  # noqa: E402
from kernelloop.tune.search import make_strategy  # noqa: E402
from kernelloop.tune.search.encoding import config_key  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def kt_doc(space: RecordedSpace, kept: bool) -> tuple[dict, RecordedSpace]:
    """A Kernel Tuner cache of `space` over the union of its parameters (a parameter a configuration lacks at a
    placeholder level) and the same space flattened so; failures stay in it as "RuntimeFailedConfig" when kept."""
    names = list(space.params) or sorted({k for c in space.configs for k in c})
    levels = {k: {c[k] for c in space.configs if k in c} for k in names}
    fill = {k: ((0 if min(v) > 0 else min(v) - 1) if all(isinstance(x, (int, float)) for x in v) else "n/a")
            for k, v in levels.items()}
    flat = [{k: c.get(k, fill[k]) for k in names} for c in space.configs]
    tune_params = {k: sorted({c[k] for c in flat}, key=lambda v: (isinstance(v, str), v)) for k in names}
    cache = {}
    for i, (c, v) in enumerate(zip(flat, space.values)):
        if v is None and not kept:
            continue
        cost = 1000.0 * space.costs[i] if space.costs else 0.0
        cache[",".join(str(c[k]) for k in names)] = {**c, "time": float(v) if v is not None else "RuntimeFailedConfig",
                                                     "compile_time": cost, "verification_time": 0.0,
                                                     "benchmark_time": 0.0}
    doc = {"device_name": "recorded", "kernel_name": space.name, "problem_size": 1, "tune_params_keys": names,
           "tune_params": tune_params, "objective": "time", "cache": cache}
    return doc, RecordedSpace(space.name, flat, list(space.values), list(space.statuses), space.objective, names,
                              dict(space.meta), list(space.costs))


# the default strategy, Optuna's default sampler, random, and the three Kernel Tuner strategies that scored best
# on these spaces (benchmarks/results/2026-11-30-strategies/strategies-full.md: bayes_opt, pso, adaptive_tabu_greywolf)
DEFAULT = ["staged", "optuna-tpe", "random", "kt:bayes_opt", "kt:pso", "kt:adaptive_tabu_greywolf"]
COSTS: dict[str, float] = {}   # configuration key -> GPU seconds, when the loaded space has no costs itself


def space_key(path: Path) -> str:
    """The name a space's runs and table rows go under: its file name, a compressed one as `NAME.json.gz` whatever
    it is compressed with (the spaces were first kept gzipped; the committed tables and run packs use those names)."""
    return plain_name(path) + ".gz" if suffix_of(path) else path.name


def file_costs(path: Path) -> dict[str, float]:
    """GPU seconds per configuration read from the file directly (for a baseline commit whose loader has none)."""
    data = json.loads(read_text(path))
    out = {}
    if "cache" in data:
        for rec in data["cache"].values():
            parts = [rec.get(k) for k in ("compile_time", "verification_time", "benchmark_time")]
            if all(isinstance(x, (int, float)) for x in parts):
                out[config_key({k: rec[k] for k in data["tune_params_keys"]})] = sum(parts) / 1000.0
    else:
        for rec in data["records"]:
            res = next(iter(rec["results"].values()))
            if isinstance(res.get("cost_s"), (int, float)):
                out[config_key(rec["config"])] = res["cost_s"]
    return out


def trajectory(strategy: str, space: RecordedSpace, seed: int, budget: int, kept: bool,
               options: dict | None = None) -> tuple[list, list, float]:
    """(values, costs, strategy seconds) of one run; `options` go to our strategy's constructor."""
    t0 = time.perf_counter()
    if strategy.startswith("kt:"):
        from kernelloop.tune.replay.external import kernel_tuner_run
        doc, flat = kt_doc(space, kept)
        with tempfile.TemporaryDirectory(prefix="kl-kt-") as tmp:
            path = Path(tmp) / "cache.json"
            path.write_text(json.dumps(doc))
            with contextlib.redirect_stderr(open(os.devnull, "w")):
                traj = kernel_tuner_run(path, flat, strategy[3:], seed, budget, failures_kept=kept)
        return traj.values, traj.costs, time.perf_counter() - t0
    s = make_strategy(strategy, space.configs, seed, **(options or {}))
    values, costs, asked = [], [], set()
    for _ in range(min(budget, len(space))):
        cfg = s.ask()
        if cfg is None:
            break
        key = config_key(cfg)
        assert key not in asked, f"{strategy} asked {key} twice"
        asked.add(key)
        i = space.index(cfg)
        v = space.values[i]
        c = space.costs[i] if getattr(space, "costs", None) else COSTS.get(key)
        try:
            s.tell(cfg, v, status=None if v is not None else space.statuses[i], costs=c)
        except TypeError:   # a strategy from before tell took status= and costs= (the baseline commit)
            s.tell(cfg, v)
        values.append(v)
        costs.append(c)
    return values, costs, time.perf_counter() - t0


def run_one(strategy, space, seed, budget, kept, options=None):
    values, costs, secs = trajectory(strategy, space, seed, budget, kept, options)
    curve = best_so_far(values, budget)
    opt = space.optimum
    e2 = evals_to_within(curve, opt, 0.02)
    gpu2 = None
    if costs and all(c is not None for c in costs):
        n = e2 if e2 is not None else len(costs)
        gpu2 = float(sum(costs[:n]))
    return {"seed": seed, "e2": e2, "e5": evals_to_within(curve, opt, 0.05), "p50": fraction_of_optimum(curve, opt, 50),
            "p100": fraction_of_optimum(curve, opt, 100),
            "fails": sum(v is None for v in values), "gpu_s_to_2pct": gpu2, "gpu_censored": e2 is None,
            "evaluations": len(values), "seconds": secs}


def summarize(rows: list[dict], budget: int) -> dict:
    cens = budget + 1
    g = [r["gpu_s_to_2pct"] for r in rows if r["gpu_s_to_2pct"] is not None]
    return {"seeds": len(rows), "median_e2": float(np.median([r["e2"] or cens for r in rows])),
            "median_e5": float(np.median([r["e5"] or cens for r in rows])),
            "reached_2pct": float(np.mean([r["e2"] is not None for r in rows])),
            "p50": float(np.mean([r["p50"] for r in rows])), "mean_fails": float(np.mean([r["fails"] for r in rows])),
            "median_gpu_s_to_2pct": float(np.median(g)) if len(g) == len(rows) else None,
            "gpu_censored_runs": int(sum(r["gpu_censored"] for r in rows if r["gpu_s_to_2pct"] is not None)),
            "seconds_per_run": float(np.mean([r["seconds"] for r in rows]))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spaces", type=Path, default=ROOT / "benchmarks" / "spaces")
    ap.add_argument("--split", choices=["tuning", "heldout", "all"], default=None,
                    help="which set of --spaces/split.toml to run (default: tuning; every space of a folder "
                         "without split.toml)")
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--only", default=",".join(DEFAULT))
    ap.add_argument("--label", default="", help="name the (single) strategy so in the results, e.g. staged@<commit>")
    ap.add_argument("--conditions", default="dropped,kept", help="comma-separated: dropped, kept")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a constructor option of our strategies (VALUE as JSON; repeatable; needs --label)")
    ap.add_argument("--cache", type=Path, default=ROOT / "runs" / "strategies-failures-cache")
    ap.add_argument("--runs", type=Path, action="append", default=[],
                    help="a results folder's runs.jsonl.xz (or .gz) to seed --cache from (repeatable; see runpack.py)")
    ap.add_argument("--out", type=Path, default=None, help="write results here (default: only cache the runs)")
    ap.add_argument("--tag", default=time.strftime("%Y-%m-%d"))
    ap.add_argument("--command", default="", help="the commands that produced the cached runs, for the results")
    args = ap.parse_args(argv)
    conditions = [c for c in args.conditions.split(",") if c]
    if not conditions or set(conditions) - {"dropped", "kept"}:
        ap.error(f"--conditions: dropped and/or kept, got {args.conditions!r}")
    options = {}
    for opt in args.option:
        key, eq, value = opt.partition("=")
        if not eq or not key:
            ap.error(f"--option takes KEY=VALUE, got {opt!r}")
        try:
            options[key] = json.loads(value)
        except ValueError:
            ap.error(f"--option {key}: {value!r} is not a JSON value")
    if options and not args.label:
        ap.error("--option needs --label (the runs of a setting are cached and tabled under its label)")
    args.cache.mkdir(parents=True, exist_ok=True)
    for packed in args.runs:
        unpack(packed, args.cache)
    try:
        paths = select_paths(args.spaces, args.split)
    except ValueError as e:
        ap.error(str(e))
    strategies = [s for s in args.only.split(",") if s]
    for p in paths:
        full = load_space(p)
        COSTS.clear()
        if not getattr(full, "costs", None):
            COSTS.update(file_costs(p))
        for cond in [c for c in (["dropped", "kept"] if full.n_failed else ["dropped"]) if c in conditions]:
            space = full if cond == "kept" else full.valid_only()
            for strat in strategies:
                label = args.label or strat
                f = args.cache / f"{label.replace(':', '_')}--{space_key(p)}--{cond}--b{args.budget}.jsonl"
                have = [json.loads(x) for x in f.read_text().splitlines()] if f.is_file() else []
                done = {r["seed"] for r in have}
                t0 = time.time()
                for seed in range(args.seeds):
                    if seed in done:
                        continue
                    r = run_one(strat, space, seed, args.budget, cond == "kept", options)
                    with f.open("a") as fh:
                        fh.write(json.dumps(r) + "\n")
                print(f"{label} {space_key(p)} {cond}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    if args.out:
        write_results(args, paths)
    return 0


def write_results(args, paths) -> None:
    import kernelloop
    table, used = {}, []
    for f in sorted(args.cache.glob(f"*--b{args.budget}.jsonl")):
        label, space, cond, _ = f.name[:-len(".jsonl")].split("--")
        rows = [json.loads(x) for x in f.read_text().splitlines()]
        rows = [r for r in rows if r["seed"] < args.seeds]
        if space in {space_key(p) for p in paths}:
            table.setdefault(f"{space} ({cond})", {})[label.replace("kt_", "kt:")] = summarize(rows, args.budget)
            used.append(f)
    versions = {}
    for mod in ("numpy", "optuna", "kernel_tuner"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:
            versions[mod] = "not installed"
    meta = {"date": args.tag, "budget": args.budget, "seeds": args.seeds,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "versions": {"kernelloop": kernelloop.__version__, **versions},
            "command": args.command or "python benchmarks/strategies_failures.py " + " ".join(sys.argv[1:]),
            "spaces": [space_key(p) for p in paths]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "failures.json").write_text(json.dumps({"meta": meta, "table": table}, indent=1))
    pack(used, args.out / PACK_NAME)   # every run the table is computed from, one line each
    labels = sorted({s for v in table.values() for s in v}, key=lambda s: (not s.startswith("staged"), s))
    lines = [f"# Strategies with infeasible configurations dropped and kept — {args.tag}", "",
             f"Generated by `benchmarks/strategies_failures.py`; {args.seeds} seeds, budget {args.budget}; machine "
             f"{meta['machine']}; versions {meta['versions']}.", "", f"Command: `{meta['command']}`", "",
             "Cells: median evaluations to within 2 % / 5 % of the optimum (101 = not reached in 100), P@50, "
             "mean failed evaluations, median GPU seconds to 2 % (runs that never got there count their whole "
             "spend; — where the recording has no costs).", ""]
    lines += ["| space (condition) | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for key in sorted(table):
        cells = []
        for s in labels:
            r = table[key].get(s)
            if r is None:
                cells.append("")
                continue
            gpu = "—" if r["median_gpu_s_to_2pct"] is None else f"{r['median_gpu_s_to_2pct']:.0f} s"
            cells.append(f"{r['median_e2']:.0f} / {r['median_e5']:.0f}, {r['p50']:.3f}, f{r['mean_fails']:.1f}, {gpu}")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    (args.out / "failures.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
