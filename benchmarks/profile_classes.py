"""Do Nsight Compute's bottleneck class and its roofline fraction agree with what the timer measured?

For each run archive given (e.g. the layernorm, rmsnorm and softmax runs of benchmarks/results/2026-11-30-h200-norms and a
gemm run), on a CUDA host with Nsight Compute:
- picks one workload: the one whose label contains --workload, by default the fp16 workload whose axes are all
  4096 ([4096, 4096], or [4096, 4096, 4096] for a GEMM);
- profiles the run's best passing trial on it and each --baseline (default: eager) with `kernelloop profile --ncu`
  (the same API: `kernelloop.tune.profile.on_demand.run_ncu_profiles`), which archives the reports;
- prints a markdown table: subject, class (of the longest launch; launches profiled), DRAM % (duration-weighted
  over the launches), the fraction of the bandwidth roof from the profile (DRAM bytes / ncu duration / roof) and
  from the timing (the spec's bytes / timed kernel median / the same roof), their relative difference and whether
  it is <= 5 %, and for matrix ops (gemm, ...) whether the class is compute-bound;
- writes every record (class, kept evidence, launches, roofline, agreement, notes) to --out as JSON.

Nsight Compute flushes and invalidates the caches before it measures (`--cache-control all`): the kernel starts on
a clean L2. The run's timer writes its flush buffer (`flush_mode = write`), so the kernel starts on an L2 full of
dirty lines that its misses must write back first. With --clean-timing (on a GPU) the trial, the baselines and a
device copy are timed again in one interleaved bench with `flush_mode = read` (an L2 of clean lines, as under
ncu), and a second agreement is computed against those times and that copy's roof: the "clean" columns.

The archives are not modified: each is copied (SQLite backup API) to --work/<name>/archive.sqlite first, where the
reports, the .ncu-rep files (profiles/) and the candidate sources (sources/) land. --in-place profiles into the
given run folders instead.

    unxz -k benchmarks/results/2026-11-30-h200-norms/*.sqlite.xz     # the archives are kept xz-compressed
    python3 benchmarks/profile_classes.py benchmarks/results/2026-11-30-h200-norms/{layernorm-rowwise,rmsnorm-persistent,softmax-chunked}.sqlite \\
        runs/gpu-gemm --out profile-classes.json [--baseline eager --baseline liger] [--timeout 600]

Exit codes: 0 every subject was profiled; 1 some subject could not be profiled; 2 bad input; 3 no ncu / no GPU.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from kernelloop.base.builtin import ops_dir  # noqa: E402
from kernelloop.core.archive import Archive  # noqa: E402
from kernelloop.tune.profile.explain import profile_summary  # noqa: E402
from kernelloop.tune.profile.on_demand import NcuUnavailable, run_ncu_profiles  # noqa: E402
from kernelloop.tune.profile.roofline import default_pipe  # noqa: E402
from kernelloop.tune.select.pareto import best_per_workload  # noqa: E402


def archive_file(path: Path) -> Path:
    return path / "archive.sqlite" if path.is_dir() else path


def work_copy(src: Path, dst_dir: Path) -> Path:
    """A consistent copy of a (possibly WAL-mode) SQLite archive, made with SQLite's backup API."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    dst = dst_dir / "archive.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(str(dst) + suffix).unlink(missing_ok=True)
    with sqlite3.connect(f"file:{src}?mode=ro", uri=True) as s, sqlite3.connect(dst) as d:
        s.backup(d)
    return dst


def pick_workload(archive: Archive, run: dict, wanted: str | None):
    """(workload, best trial) of the run's workload matching `wanted` (label substring), else all-4096 fp16."""
    best = best_per_workload(archive.trials(run["id"]))
    workloads = [archive.get_workload(wid) for wid in best]
    if wanted:
        hits = [w for w in workloads if wanted in w.label]
    else:
        hits = [w for w in workloads if w.dtype.value == "fp16" and all(v == 4096 for v in w.axes.values())]
    if not hits:
        labels = sorted(w.label for w in workloads)
        raise LookupError(f"run {run['id']} ({run['op']}): no passing workload matches "
                          f"{wanted or 'fp16 with every axis 4096'}; it has {labels}")
    w = sorted(hits, key=lambda w: w.label)[0]
    return w, best[w.id]


def clean_timing(archive: Archive, op_dir: Path, trial, workload, baselines: tuple[str, ...], work: Path,
                 samples: int = 100) -> dict[str, float]:
    """Kernel medians (µs) of the trial, the baselines and a device copy, timed in one interleaved bench with a
    clean L2 (read flush), like Nsight Compute's cache control."""
    from kernelloop.core.bench.policy import COLD_L2_EVENTS
    from kernelloop.core.execute.evaluate import Evaluator
    from kernelloop.core.execute.pool import Worker
    from kernelloop.core.spec import load_op
    bundle = load_op(op_dir)
    cand = archive.get_candidate(trial.candidate_id)
    policy = COLD_L2_EVENTS.model_copy(update={"name": "cold-l2-events-read", "flush_mode": "read",
                                               "samples": samples})
    worker = Worker("cuda", work / "clean-timing")
    try:
        ev = Evaluator(bundle, "cuda", worker, policy, secret=f"clean-{time.time()}")
        err = ev.load(cand)
        if err is not None:
            raise RuntimeError(f"the trial's candidate does not load: {err}")
        subjects = list(dict.fromkeys(["candidate", *baselines, "copy"]))
        ms, notes, reply = ev.bench(cand, workload, subjects, policy)
    finally:
        worker.close()
    if reply.status != "ok":
        raise RuntimeError(f"clean-L2 bench failed: {reply.status} {reply.error}")
    return {name: m.kernel.median_us for name, m in ms.items()}


def clean_agreement(archive: Archive, op_dir: Path, workload, rec: dict, subject_us: float | None,
                    copy_us: float | None) -> dict:
    """The profile-vs-timing agreement of one profiled record against its clean-L2 time and copy roof."""
    from kernelloop.tune.profile.aggregate import agreement
    from kernelloop.tune.profile.roofline import roofline_from_copy
    from kernelloop.core.spec import load_op
    agg = rec.get("aggregate") or {}
    if subject_us is None or copy_us is None or not agg:
        return {}
    spec = load_op(op_dir).spec
    roof = roofline_from_copy(spec, workload, subject_us, copy_us, dram_bytes=agg.get("dram_bytes"))
    a = agreement(spec, workload, roof, profile_bytes=agg.get("dram_bytes"), profile_ns=agg.get("duration_ns"),
                  timing_us=subject_us, timing_source="clean-L2 bench (read flush)")
    return a.model_dump(mode="json")


def same_instrument(rec: dict, copy_ncu_ns: float | None, subject_us: float | None, copy_us: float | None,
                    tolerance: float = 0.05) -> dict:
    """Fractions of the copy roof with each instrument against itself: Nsight Compute's copy duration over the
    subject's, and the timer's copy median over the subject's. Events bracket a launch's fixed device-side costs
    (about 3 µs on the H200) that Nsight Compute's duration does not include, so a profile duration divided into a
    roof timed by events mixes two instruments."""
    agg = rec.get("aggregate") or {}
    dur = agg.get("duration_ns")
    if not (dur and copy_ncu_ns and subject_us and copy_us):
        return {}
    p, t = copy_ncu_ns / dur, copy_us / subject_us
    diff = abs(p - t) / t
    return {"profile_fraction": p, "timing_fraction": t, "difference": diff, "agrees": diff <= tolerance,
            "copy_ncu_us": copy_ncu_ns / 1e3, "copy_timed_us": copy_us}


def _f(v, fmt="{:.3f}") -> str:
    return fmt.format(v) if v is not None else "n/a"


def row_of(op: str, rec: dict, subject: str) -> dict:
    c, agg, a = rec["classification"], rec["aggregate"], rec["agreement"] or {}
    clean = rec.get("clean_agreement") or {}
    inst = rec.get("same_instrument") or {}
    matrix = default_pipe(op) == "matrix"
    klass = c["bottleneck"] if c is not None else None
    return {
        "op": op, "workload": rec["workload"], "subject": subject, "profiled": rec["profiled"], "class": klass,
        "launches": agg["launches"] if agg else 0, "dram_pct": agg["dram_pct"] if agg else None,
        "compute_pct": c["compute_pct"] if c else None, "memory_pct": c["memory_pct"] if c else None,
        "profile_fraction": a.get("profile_fraction"), "timing_fraction": a.get("timing_fraction"),
        "difference": a.get("difference"), "agrees": a.get("agrees"),
        "dram_ratio": (rec["roofline"] or {}).get("dram_ratio"), "timing_us": a.get("timing_us"),
        "profile_us": a.get("profile_us"), "matrix_op": matrix,
        "compute_bound": (klass == "compute-bound") if matrix and klass is not None else None,
        "clean_timing_us": clean.get("timing_us"), "clean_profile_fraction": clean.get("profile_fraction"),
        "clean_timing_fraction": clean.get("timing_fraction"), "clean_difference": clean.get("difference"),
        "clean_agrees": clean.get("agrees"),
        "inst_profile_fraction": inst.get("profile_fraction"), "inst_timing_fraction": inst.get("timing_fraction"),
        "inst_difference": inst.get("difference"), "inst_agrees": inst.get("agrees"),
    }


def markdown(rows: list[dict]) -> str:
    out = ["| subject | class (launches) | DRAM % | profile fraction | timing fraction | diff | <= 5 % | "
           "ncu us / timed us | clean: timed us | clean: diff | clean: <= 5 % | copy roof per instrument: "
           "ncu / timer | diff | <= 5 % | gemm: compute-bound? |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        yes = {True: "yes", False: "**no**", None: "n/a"}
        out.append(
            f"| {r['op']} {r['workload']} {r['subject']} | {r['class'] or 'not profiled'} ({r['launches']}) | "
            f"{_f(r['dram_pct'], '{:.1f}')} | {_f(r['profile_fraction'])} | {_f(r['timing_fraction'])} | "
            f"{_f(r['difference'], '{:.1%}')} | {yes[r['agrees']]} | "
            f"{_f(r['profile_us'], '{:.2f}')} / {_f(r['timing_us'], '{:.2f}')} | "
            f"{_f(r.get('clean_timing_us'), '{:.2f}')} | {_f(r.get('clean_difference'), '{:.1%}')} | "
            f"{yes[r.get('clean_agrees')]} | "
            f"{_f(r.get('inst_profile_fraction'))} / {_f(r.get('inst_timing_fraction'))} | "
            f"{_f(r.get('inst_difference'), '{:.1%}')} | {yes[r.get('inst_agrees')]} | "
            f"{yes[r['compute_bound']] if r['matrix_op'] else ''} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("archives", nargs="+", type=Path, help="run folders or archive.sqlite files")
    ap.add_argument("--out", type=Path, required=True, help="JSON file for every record and row")
    ap.add_argument("--workload", help="label substring of the workload to profile (default: fp16, all axes 4096)")
    ap.add_argument("--baseline", action="append", help="baseline(s) to profile too (default: eager)")
    ap.add_argument("--work", type=Path, default=Path("runs/profile-classes"), help="where the archive copies go")
    ap.add_argument("--in-place", action="store_true", help="profile into the given run folders, no copies")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per Nsight Compute run")
    ap.add_argument("--clean-timing", action="store_true",
                    help="also time trial, baselines and a copy with a clean L2 (read flush) and compare (GPU)")
    args = ap.parse_args(argv)
    baselines = tuple(dict.fromkeys(args.baseline or ["eager"]))
    rows, records, failed = [], [], []
    for src in args.archives:
        db = archive_file(src)
        if not db.is_file():
            print(f"no archive at {db}", file=sys.stderr)
            return 2
        if not args.in_place:
            db = work_copy(db, args.work / src.name.removesuffix(".sqlite"))
        t0 = time.monotonic()
        try:
            with Archive(db) as archive:
                run = archive.runs()[0]
                w, best = pick_workload(archive, run, args.workload)
                print(f"{run['op']} {w.label}: trial {best.index} and {', '.join(baselines)} ...", file=sys.stderr)
                op_dir = ops_dir() / run["op"]
                done = run_ncu_profiles(archive, db.parent, best.id, baselines, timeout_s=args.timeout,
                                        op_dir=op_dir if op_dir.is_dir() else None,
                                        say=lambda m: print(m, file=sys.stderr))
                summary = profile_summary(archive, best.id, baselines)
                if args.clean_timing and op_dir.is_dir():
                    try:
                        clean = clean_timing(archive, op_dir, best, w, baselines, db.parent)
                    except Exception as e:  # noqa: BLE001 - reported, the profiles still count
                        clean = {}
                        summary.setdefault("clean_error", f"{type(e).__name__}: {e}")
                    summary["clean_timing_us"] = clean
                    for t in summary["trials"]:
                        t["clean_agreement"] = clean_agreement(archive, op_dir, w, t, clean.get("candidate"),
                                                               clean.get("copy"))
                    for b in summary["baselines"]:
                        b["clean_agreement"] = clean_agreement(archive, op_dir, w, b, clean.get(b["baseline"]),
                                                               clean.get("copy"))
                    # The per-instrument roof is a copy kernel (ncu cannot see copy_'s cudaMemcpy).
                    copy_rec = next((b for b in summary["baselines"] if b["baseline"] == "copy-kernel"), None)
                    copy_ns = ((copy_rec or {}).get("aggregate") or {}).get("duration_ns")
                    for t in summary["trials"]:
                        t["same_instrument"] = same_instrument(t, copy_ns, clean.get("candidate"),
                                                               clean.get("copy-kernel"))
                    for b in summary["baselines"]:
                        if b["baseline"] not in ("copy", "copy-kernel"):
                            b["same_instrument"] = same_instrument(b, copy_ns, clean.get(b["baseline"]),
                                                                   clean.get("copy-kernel"))
        except NcuUnavailable as e:
            print(f"cannot profile here: {e}", file=sys.stderr)
            return 3
        except LookupError as e:
            print(str(e), file=sys.stderr)
            return 2
        failed += done["failed"]
        summary["notes"], summary["archive"], summary["seconds"] = done["notes"], str(db), time.monotonic() - t0
        records.append(summary)
        for t in summary["trials"]:
            rows.append(row_of(run["op"], t, f"trial {t['index']}"))
        for b in summary["baselines"]:
            rows.append(row_of(run["op"], b, b["baseline"]))
    table = markdown(rows)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "table": table, "runs": records, "failed": failed}, indent=2))
    if failed:
        print(f"not profiled: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
