"""Two strategies compared seed by seed on the failure benchmark's runs: median evaluations to within 2 % of each and
a bootstrap 95 % interval of the difference of medians, the seeds resampled in pairs.

Reads the per-run records of `benchmarks/strategies_failures.py` (packs, `runs*.jsonl.xz`, see runpack.py, and/or
its --cache folder). For each pair `A B` (labels as in the tables, e.g. `staged@4c7956c staged`) and each
(space, condition) both have runs for, over the seeds both ran (below --seeds):

- median evaluations to within 2 % of A and of B (a run that never got there counts budget + 1, as in the tables);
- B - A, the difference of medians (negative: B needs fewer evaluations), and its percentile bootstrap 95 %
  interval: --resamples draws of the seeds with replacement, the same seeds for A and B (a seed's two runs share
  its initial randomness, and the spaces' difficulty varies with it), numpy's generator seeded with --rng-seed;
- the seeds where B is ahead / level / behind, and the two-sided sign test's p-value of those counts (ties left
  out; exact binomial): a check that does not lean on the median, which sits at the budget where about half the
  runs never get within 2 %;
- the fraction of runs of A and of B that got within 2 % inside the budget.

An interval that excludes 0 is marked (`*`): the difference is unlikely to be seed noise alone.

    python benchmarks/strategies_paired.py --runs R/runs.jsonl.xz --runs R/runs-40seeds.jsonl.xz \\
        --pair staged@4c7956c staged --seeds 40 --out R/paired.md
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runpack import read  # noqa: E402  (benchmarks/runpack.py)

from kernelloop.core.bench.stats import bootstrap_interval  # noqa: E402


def load(packs: list[Path], cache: Path | None, budget: int) -> dict[tuple[str, str, str], dict[int, dict]]:
    """Runs by (label, space, condition), then seed; a seed recorded twice (a pack and the cache) must agree."""
    files: dict[str, list[dict]] = {}
    for p in packs:
        for name, runs in read(p).items():
            files.setdefault(name, []).extend(runs)
    if cache is not None:
        for f in sorted(cache.glob(f"*--b{budget}.jsonl")):
            files.setdefault(f.name, []).extend(json.loads(x) for x in f.read_text().splitlines() if x.strip())
    out: dict[tuple[str, str, str], dict[int, dict]] = {}
    for name, runs in files.items():
        label, space, cond, b = name[:-len(".jsonl")].split("--")
        if b != f"b{budget}":
            continue
        by_seed = out.setdefault((label.replace("kt_", "kt:"), space, cond), {})
        for r in runs:
            old = by_seed.setdefault(r["seed"], r)
            if (old["e2"], old["e5"]) != (r["e2"], r["e5"]):
                raise ValueError(f"{name}: seed {r['seed']} recorded twice with different results")
    return out


def sign_test(ahead: int, behind: int) -> float:
    """Two-sided exact sign test of `ahead` against `behind` (ties left out): p-value under a fair coin."""
    n = ahead + behind
    if n == 0:
        return 1.0
    k = min(ahead, behind)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def paired(a: np.ndarray, b: np.ndarray, resamples: int, rng: np.random.Generator) -> dict:
    """Medians of `a` and `b` (paired by position), the difference of medians b - a, and its bootstrap 95 %
    interval with the pairs resampled together (`bootstrap_interval`, paired)."""
    _, lo, hi = bootstrap_interval([a, b], lambda ab: np.median(ab[1], axis=-1) - np.median(ab[0], axis=-1),
                                   resamples=resamples, confidence=0.95, seed=rng, paired=True, vectorised=True)
    return {"seeds": int(a.size), "median_a": float(np.median(a)), "median_b": float(np.median(b)),
            "diff": float(np.median(b) - np.median(a)), "ci95": [float(lo), float(hi)],
            "significant": bool(lo > 0 or hi < 0), "b_ahead": int((b < a).sum()), "level": int((b == a).sum()),
            "b_behind": int((b > a).sum()), "sign_p": sign_test(int((b < a).sum()), int((b > a).sum()))}


def compare(runs, pairs: list[tuple[str, str]], seeds: int, budget: int, resamples: int, rng_seed: int,
            metric: str = "e2") -> list[dict]:
    rows = []
    cens = budget + 1
    for a_label, b_label in pairs:
        for (label, space, cond), a_runs in sorted(runs.items()):
            if label != a_label or (b_label, space, cond) not in runs:
                continue
            b_runs = runs[(b_label, space, cond)]
            common = sorted(s for s in set(a_runs) & set(b_runs) if s < seeds)
            if not common:
                continue
            a = np.array([a_runs[s][metric] or cens for s in common], dtype=float)
            b = np.array([b_runs[s][metric] or cens for s in common], dtype=float)
            rng = np.random.default_rng(rng_seed)
            rows.append({"a": a_label, "b": b_label, "space": space, "condition": cond, "metric": metric,
                         **paired(a, b, resamples, rng), "reached_a": float(np.mean(a < cens)),
                         "reached_b": float(np.mean(b < cens))})
    return rows


def markdown(rows: list[dict], args) -> str:
    lines = [f"# Paired comparison by seed — evaluations to within {args.metric[1:]} %", "",
             "Generated by `benchmarks/strategies_paired.py` from the per-run records "
             f"({', '.join(p.name for p in args.runs) or 'the cache'}{', cache' if args.cache and args.runs else ''});"
             f" budget {args.budget} ({args.budget + 1} = not reached), seeds below {args.seeds}, {args.resamples} "
             f"bootstrap resamples of the seeds in pairs (rng seed {args.rng_seed}).", "",
             "B - A: difference of the medians (negative: B needs fewer evaluations); 95 % CI: percentile bootstrap "
             "interval of it; `*`: the interval excludes 0. ahead / level / behind: seeds where B needs fewer / the "
             "same / more evaluations than A; sign p: two-sided exact sign test of those (ties left out); reached: "
             "runs within the target inside the budget, A / B.", "",
             "| A | B | space (condition) | seeds | median A | median B | B - A | 95 % CI | ahead / level / behind "
             "| sign p | reached |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        star = " *" if r["significant"] else ""
        lines.append(f"| {r['a']} | {r['b']} | {r['space']} ({r['condition']}) | {r['seeds']} | "
                     f"{r['median_a']:g} | {r['median_b']:g} | {r['diff']:+g}{star} | "
                     f"[{r['ci95'][0]:+g}, {r['ci95'][1]:+g}] | {r['b_ahead']} / {r['level']} / {r['b_behind']} | "
                     f"{r['sign_p']:.2f} | {r['reached_a']:.2f} / {r['reached_b']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, action="append", default=[], help="a runs*.jsonl.xz pack (repeatable)")
    ap.add_argument("--cache", type=Path, default=None, help="a strategies_failures.py --cache folder")
    ap.add_argument("--pair", action="append", required=True, nargs=2, metavar=("A", "B"),
                    help="labels to compare, B against A (repeatable)")
    ap.add_argument("--seeds", type=int, default=40, help="use seeds 0..SEEDS-1 that both have")
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--metric", choices=["e2", "e5"], default="e2")
    ap.add_argument("--resamples", type=int, default=10000)
    ap.add_argument("--rng-seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="write the table here (.md; the rows beside as .json)")
    args = ap.parse_args(argv)
    pairs = [tuple(p) for p in args.pair]
    if not args.runs and args.cache is None:
        ap.error("give --runs and/or --cache")
    rows = compare(load(args.runs, args.cache, args.budget), pairs, args.seeds, args.budget, args.resamples,
                   args.rng_seed, args.metric)
    if not rows:
        print("no (space, condition) has runs of both labels of any pair", file=sys.stderr)
        return 1
    text = markdown(rows, args)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
