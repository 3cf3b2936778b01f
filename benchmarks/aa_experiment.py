"""A/A experiment: the same kernel as candidate and baseline, many times; how often does the timer call a
difference that is not there? Also the spread of repeated medians per duration class.

    python benchmarks/aa_experiment.py --device cuda --comparisons 240 --out aa.json

Kernels of different durations come from the library's own templates on shapes chosen to span ~5 µs to
~2 ms (on an H200). Each comparison is one `Evaluator.bench` call with subjects candidate and candidate-twin
(the same source and config, separate output buffers), sampled in random interleaved rounds under the
run's timing policy; the verdict is the paired ratio's (FASTER/SAME/SLOWER, margin from the policy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from kernelloop.base.builtin import ops_dir
from kernelloop.core.bench.policy import policies_for
from kernelloop.core.device import environment
from kernelloop.core.execute.evaluate import Evaluator
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Workload
from kernelloop.core.spec import load_op

# (op, axes, config): ~5 µs, ~20 µs, ~70 µs, ~0.5 ms, ~2 ms of kernel time on an H200 (fp16).
KERNELS = [
    ("layernorm", {"M": 256, "N": 4096}, {"BLOCK_N": 4096, "ROWS": 1, "num_warps": 8, "EVICT_FIRST": 0}),
    ("softmax", {"M": 4096, "N": 4096}, {"BLOCK_N": 4096, "ROWS": 1, "num_warps": 8, "EVICT_FIRST": 0}),
    ("rmsnorm", {"M": 8192, "N": 8192}, {"BLOCK_N": 8192, "ROWS": 1, "num_warps": 16, "EVICT_FIRST": 0}),
    ("layernorm", {"M": 65536, "N": 8192}, {"BLOCK_N": 8192, "ROWS": 1, "num_warps": 16, "EVICT_FIRST": 0}),
    ("softmax", {"M": 262144, "N": 8192}, {"BLOCK_N": 8192, "ROWS": 1, "num_warps": 16, "EVICT_FIRST": 0}),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--comparisons", type=int, default=240)
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--out", default="aa.json")
    ap.add_argument("--twin", default="candidate-twin", choices=["candidate-twin", "candidate-same"],
                    help="candidate-twin: own output buffers; candidate-same: the candidate's very buffers "
                         "(both only with --output-sets 1: with rotating sets, the CUDA default, the candidate and "
                         "either twin write the same shared sets)")
    ap.add_argument("--kernels", default="",
                    help="comma-separated indices into KERNELS (0 = the ~7 µs one ... 4 = the ~2 ms one); default all")
    ap.add_argument("--output-sets", type=int, default=None,
                    help="the timing policy's output_sets (default: the policy's own)")
    args = ap.parse_args()
    update = {"samples": args.samples}
    if args.output_sets is not None:
        update["output_sets"] = args.output_sets
    policy = policies_for(args.device)[0].model_copy(update=update)
    kernels = [KERNELS[int(i)] for i in args.kernels.split(",")] if args.kernels else KERNELS
    per_kernel = max(1, args.comparisons // len(kernels))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for op, axes, config in kernels:
            bundle = load_op(ops_dir() / op)
            w = Workload(op=op, axes=axes, dtype="fp16")
            cand = Candidate(op=op, template="rowwise", source=bundle.template_sources["rowwise"], config=config)
            worker = Worker(args.device, Path(tmp) / op)
            ev = Evaluator(bundle, args.device, worker, policy, secret=f"aa-{time.time()}")
            assert ev.load(cand) is None, "the library template failed to load"
            medians, verdicts, ratios = [], [], []
            for i in range(per_kernel):
                ev.secret = f"aa-{i}"
                # Odd comparisons list the twin first: its output buffers are then allocated (and it is warmed up)
                # before the candidate's, so a bias that follows the position flips sign, one that follows the
                # name does not.
                subjects = ["candidate", args.twin] if i % 2 == 0 else [args.twin, "candidate"]
                ms, _, reply = ev.bench(cand, w, subjects, policy)
                if reply.status != "ok":
                    raise SystemExit(f"bench failed: {reply.status} {reply.error}")
                r = next(x for x in ms["candidate"].ratios if x.baseline == args.twin)
                verdicts.append(r.verdict.value)
                ratios.append({"order": subjects, "speedup": r.speedup, "ci": [r.ci_low, r.ci_high],
                               "verdict": r.verdict.value, "candidate_us": ms["candidate"].kernel.median_us,
                               "twin_us": ms[args.twin].kernel.median_us,
                               "launch_retakes": {n: (ms[n].environment.get("launch") or {}).get("exposed_retakes")
                                                  for n in ("candidate", args.twin)}})
                medians.append(ms["candidate"].kernel.median_us)
            worker.close()
            med = statistics.median(medians)
            results.append({"op": op, "axes": axes, "config": config, "comparisons": per_kernel,
                            "median_of_medians_us": med,
                            "spread_of_medians_pct": 100 * (max(medians) - min(medians)) / med,
                            "stdev_of_medians_pct": 100 * statistics.pstdev(medians) / med,
                            "non_same": sum(v != "SAME" for v in verdicts), "verdicts": verdicts,
                            "ratios": ratios})
            speedups = sorted(x["speedup"] for x in ratios)
            results[-1]["median_speedup"] = statistics.median(speedups)
            retakes = sum(v or 0 for x in ratios for v in x["launch_retakes"].values())
            results[-1]["launch_retakes"] = retakes
            print(f"{op} {axes}: median {med:.2f} µs, spread {results[-1]['spread_of_medians_pct']:.2f} %, "
                  f"non-SAME {results[-1]['non_same']}/{per_kernel}, candidate/twin speed-up median "
                  f"{results[-1]['median_speedup']:.4f} (min {speedups[0]:.4f}, max {speedups[-1]:.4f}), "
                  f"kernel samples re-taken for an exposed launch: {retakes}", flush=True)
    total = sum(r["comparisons"] for r in results)
    non_same = sum(r["non_same"] for r in results)
    summary = {"twin": args.twin, "output_sets": policy.output_sets, "environment": environment(args.device).model_dump(mode="json"), "policy": policy.model_dump(mode="json"),
               "date": time.strftime("%Y-%m-%d"), "comparisons": total, "non_same": non_same,
               "non_same_rate": non_same / total, "kernels": results}
    Path(args.out).write_text(json.dumps(summary, indent=2))
    print(f"A/A: {non_same}/{total} non-SAME verdicts ({100 * non_same / total:.2f} %)")


if __name__ == "__main__":
    main()
