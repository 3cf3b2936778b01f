"""Strategy overhead: wall time inside ask()+tell() per proposal, on a synthetic 18,000-configuration space.

Protocol (written into the output):
- space: five parameters with 10 x 10 x 6 x 5 x 6 = 18,000 levels (two power-of-two sizes 1..512, three small
  integers), a deterministic rugged objective (a smooth bowl with interactions, a parity penalty, a narrow
  basin, 2 % seeded multiplicative noise) — the objective is a table look-up, so only the strategy is timed;
- per run: `--budget` (400) evaluations; the time of every ask() and of every tell() is taken with
  time.perf_counter(); a proposal's time is its ask plus the tell of its result;
- reported per strategy: mean, median, p95 and max ms per proposal over all proposals of all seeds, the mean
  over the last 100 proposals (where the model is largest), and the machine (CPU, cores, load average, BLAS
  threads), since the figure depends on it.

    python benchmarks/strategy_overhead.py [--only staged,random] [--seeds 3] [--budget 400] [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from kernelloop.tune.search import make_strategy  # noqa: E402
from kernelloop.tune.search.encoding import config_key  # noqa: E402

LEVELS = (10, 10, 6, 5, 6)


def synthetic_space(levels=LEVELS, seed: int = 0) -> tuple[list[dict], dict[str, float]]:
    """The configurations and a look-up table of their objective (lower is better)."""
    rng = np.random.default_rng(seed)
    configs, table = [], {}
    span = np.array(levels, float) - 1
    for combo in itertools.product(*[range(n) for n in levels]):
        cfg = {f"p{i}": 2 ** v if i < 2 else v for i, v in enumerate(combo)}
        x = np.array(combo, float) / span
        v = (1 + 3 * (x[0] - 0.7) ** 2 + 2 * (x[1] - 0.3) ** 2 + (x[0] - x[1]) ** 2 + 0.5 * (combo[2] % 2)
             + 0.3 * abs(x[3] - x[4]) - 0.4 * math.exp(-40 * ((x[0] - 0.75) ** 2 + (x[1] - 0.35) ** 2)))
        configs.append(cfg)
        table[config_key(cfg)] = float(v * math.exp(0.02 * rng.standard_normal()))
    return configs, table


def time_run(strategy: str, configs: list[dict], table: dict[str, float], seed: int, budget: int) -> list[float]:
    """Seconds per proposal (ask + tell) for one run."""
    strat = make_strategy(strategy, configs, seed)
    out = []
    for _ in range(budget):
        t0 = time.perf_counter()
        cfg = strat.ask()
        t1 = time.perf_counter()
        if cfg is None:
            break
        value = table[config_key(cfg)]
        t2 = time.perf_counter()
        strat.tell(cfg, value)
        out.append((t1 - t0) + (time.perf_counter() - t2))
    return out


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cpu": cpu, "cores": os.cpu_count(), "load_average_1_5_15": load, "python": platform.python_version(),
            "numpy": np.__version__, "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS")}


def summarize(per: list[list[float]]) -> dict:
    ms = 1e3 * np.concatenate([np.asarray(p) for p in per])
    tail = 1e3 * np.concatenate([np.asarray(p[-100:]) for p in per])
    return {"proposals": int(ms.size), "mean_ms": float(ms.mean()), "median_ms": float(np.median(ms)),
            "p95_ms": float(np.quantile(ms, 0.95)), "max_ms": float(ms.max()), "last100_mean_ms": float(tail.mean())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="staged,random")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budget", type=int, default=400)
    ap.add_argument("--out", type=Path, default=None, help="write overhead-<tag>.json here")
    ap.add_argument("--tag", default=time.strftime("%Y-%m-%d"))
    args = ap.parse_args(argv)
    configs, table = synthetic_space()
    assert len(configs) == 18000
    results = {}
    for name in filter(None, args.only.split(",")):
        per = [time_run(name, configs, table, s, args.budget) for s in range(args.seeds)]
        results[name] = summarize(per)
        r = results[name]
        print(f"{name:10s} mean {r['mean_ms']:.2f} ms  median {r['median_ms']:.2f}  p95 {r['p95_ms']:.2f}  "
              f"max {r['max_ms']:.1f}  last-100 mean {r['last100_mean_ms']:.2f}  ({r['proposals']} proposals)",
              flush=True)
    info = {"protocol": f"{len(configs)} configurations (levels {'x'.join(map(str, LEVELS))}), budget {args.budget}, "
                        f"seeds 0..{args.seeds - 1}; ms per proposal = ask + tell wall time",
            "machine": machine(), "results": results}
    print(json.dumps(info["machine"]))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"overhead-{args.tag}.json").write_text(json.dumps(info, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
