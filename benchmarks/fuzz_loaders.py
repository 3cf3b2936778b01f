"""Fuzz every loader that reads outside input, longer than CI does, and print the inputs tried per loader.

    python benchmarks/fuzz_loaders.py --examples 20000 [--loader load_op ...] [--seed S] [--json out.json]

The properties and input strategies are tests/fuzz's (fuzzkit.py, loader_cases.py): any input ends in the loader's
error type with a message, or loads into records that can be used. A loader that lets another exception escape stops
the run with hypothesis's minimal failing input (exit 1).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")   # the package's kernels were verified in the interpreter
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

from hypothesis import HealthCheck, given, seed as hyp_seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import fuzzkit  # noqa: E402
from loader_cases import CASES, export_small_package, make_bases  # noqa: E402


def run(name: str, bases, examples: int, seed: int | None) -> dict:
    case = CASES[name]

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=True)
    @given(st.data())
    def prop(data):
        case(data, bases)

    if seed is not None:
        prop = hyp_seed(seed)(prop)
    before = dict(fuzzkit.TRIED)
    t0 = time.perf_counter()
    prop()
    tried = {k: v - before.get(k, 0) for k, v in fuzzkit.TRIED.items() if v - before.get(k, 0)}
    return {"case": name, "examples": examples, "seconds": round(time.perf_counter() - t0, 1), "tried": tried}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=2000, help="hypothesis examples per loader")
    ap.add_argument("--loader", action="append", choices=sorted(CASES), help="only these (repeatable)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()
    import hypothesis
    import pydantic
    import torch
    import triton
    rows = []
    with tempfile.TemporaryDirectory(prefix="kl-fuzz-") as tmp:
        names = args.loader or list(CASES)
        pkg = export_small_package(Path(tmp) / "package") if any(n in ("load_package", "workloads_from_counts")
                                                                   for n in names) else None
        bases = make_bases(Path(tmp) / "scratch", pkg)
        for name in names:
            r = run(name, bases, args.examples, args.seed)
            rows.append(r)
            print(f"{name:28s} {r['examples']:>7d} examples {r['seconds']:>8.1f} s   inputs tried: "
                  + ", ".join(f"{k} {v}" for k, v in r["tried"].items()), flush=True)
            # keep the scratch folder small across a long run
            for p in (Path(tmp) / "scratch").iterdir():
                __import__("shutil").rmtree(p, ignore_errors=True)
    outcomes = {}
    for (loader, kind), n in sorted(fuzzkit.OUTCOMES.items()):
        outcomes.setdefault(loader, {})[kind] = n
    print("\noutcomes per loader (ok = accepted):")
    for loader, kinds in outcomes.items():
        print(f"  {loader:24s} " + ", ".join(f"{k} {v}" for k, v in kinds.items()))
    if args.json:
        args.json.write_text(json.dumps({
            "examples_per_loader": args.examples, "results": rows, "outcomes": outcomes,
            "versions": {"python": platform.python_version(), "hypothesis": hypothesis.__version__,
                         "pydantic": pydantic.__version__, "torch": torch.__version__, "triton": triton.__version__},
            "machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores".strip()},
            indent=1))


if __name__ == "__main__":
    main()
