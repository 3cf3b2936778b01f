"""The GPU's busy share and trials per GPU-minute of a search, beside the recorded baseline run.

    python3 benchmarks/pipeline_gpu.py RUN_ARCHIVE [RUN_ARCHIVE ...] --baseline BASELINE_ARCHIVE --out FILE.json

Each archive (a run folder, archive.sqlite, .sqlite.xz or .sqlite.gz) is read with the same code `kernelloop show` uses
(kernelloop.tune.loop.throughput): trials, the search's wall time, trials per minute and per GPU-minute (per minute
divided by the devices that worked), each device's busy share (verifying and timing over the wall time; target
>= 0.9), the time the devices waited for builds, and where compilation happened (the build stage's compile seconds,
the workers' first calls, whether the workers ran the build stage's binaries), the trials' verdicts and how each
device's tensors came back (transports, and why a GPU fell back to the host arena). A throughput figure means
something only beside its verdicts: a run whose trials all failed is fast for that reason. The baseline archive (a run made
before the build stage, e.g. benchmarks/results/2026-12-01-h200-gemm/gemm-4096.sqlite.xz: 14 trials in 55 s) is
read the same way; the ratio of trials per GPU-minute is printed. Writes FILE.json and FILE.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def figures(path: Path) -> dict:
    from kernelloop.deliver.api import archive_file
    from kernelloop.core.archive import Archive
    from kernelloop.base.records import BuildArtifact
    from kernelloop.tune.loop.throughput import throughput
    with Archive(archive_file(path), readonly=True) as a:
        run = a.runs()[0]
        tp = throughput(a, run["id"])
        trials = a.trials(run["id"])
        fallbacks = [e["payload"] for e in a.events(run["id"], "transport")]
    builds = [t.build for t in trials if isinstance(t.build, BuildArtifact)]
    devices = max(1, len([d for d in tp.devices if d.trials or d.verify_s or d.bench_s]))
    per_gpu = tp.trials_per_minute / devices if tp.trials_per_minute else None
    return {"archive": str(path), "trials": tp.trials, "wall_s": round(tp.wall_s, 2),
            "trials_per_minute": tp.trials_per_minute, "devices": devices, "trials_per_gpu_minute": per_gpu,
            "busy": {d.device: d.busy_fraction for d in tp.devices},
            "verify_s": {d.device: round(d.verify_s, 2) for d in tp.devices},
            "bench_s": {d.device: round(d.bench_s, 2) for d in tp.devices},
            "build_wait_s": round(tp.build_wait_s, 2),
            "compiled_by": {k: sum(1 for b in builds if b.compiled_by == k)
                            for k in ("build stage", "first call", "interpreter")},
            "build_stage_compile_s": round(sum(b.compile_s for b in builds if b.compiled_by == "build stage"), 2),
            "first_call_s": round(sum(b.first_call_s or 0.0 for b in builds), 2),
            "workers_ran_build_stage_binaries": sum(1 for b in builds if b.ahead_used),
            "transports": {d.device: d.transports for d in tp.devices},
            "host_arena_reasons": sorted({f"{e.get('device')}: {e.get('reason')}" for e in fallbacks}),
            "statuses": {s: sum(1 for t in trials if t.verdict.status.value == s)
                         for s in sorted({t.verdict.status.value for t in trials})}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archives", nargs="+", type=Path)
    ap.add_argument("--baseline", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    base = figures(args.baseline)
    runs = [figures(p) for p in args.archives]
    for r in runs:
        r["vs_baseline_trials_per_gpu_minute"] = (r["trials_per_gpu_minute"] / base["trials_per_gpu_minute"]
                                                  if r["trials_per_gpu_minute"] and base["trials_per_gpu_minute"]
                                                  else None)
        r["busy_at_least_0_9"] = all((b or 0) >= 0.9 for b in r["busy"].values())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"baseline": base, "runs": runs}, indent=1) + "\n")
    rows = ["| archive | trials | verdicts | wall s | trials/GPU-min | x baseline | busy | build wait s | compiled by "
            "| ran build-stage binaries | transports |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in [base, *runs]:
        ratio = r.get("vs_baseline_trials_per_gpu_minute")
        busy = ", ".join(f"{d}: {b:.2f}" for d, b in r["busy"].items() if b is not None)
        rows.append(f"| {Path(r['archive']).name} | {r['trials']} | {r['statuses']} | {r['wall_s']} | "
                    f"{(r['trials_per_gpu_minute'] or 0):.1f} | {f'{ratio:.2f}' if ratio else '-'} | {busy} | "
                    f"{r['build_wait_s']} | {r['compiled_by']} | {r['workers_ran_build_stage_binaries']} | "
                    f"{r['transports']} |")
    rows += [f"host arena: {why}" for r in runs for why in r["host_arena_reasons"]]
    args.out.with_suffix(".md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
