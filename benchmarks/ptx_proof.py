"""The differential proof on a GPU, against wrong edits and for the rule-based ones, and the best PTX-level
candidate timed against its source-level parent.

For each recorded H200 winner (the norms suite's archives: LayerNorm rowwise, RMSNorm persistent, softmax chunked on
fp16 [4096, 4096]): recover its kernel for sm_90, round-trip it, then
1. the mutation generator's wrong edits (dropped store, negated store predicate, a bounds test off by one, a store
   and a load moved by their width: `kernelloop.tune.ptx.mutate.wrong_edits`), each through the static checks (which
   they pass) and the differential proof (each must be rejected, or crash its own process);
2. every rule-based edit whose SASS differs from the original's: the proof (seeded cases over the value
   distributions and the verifier's held-out shapes, bit for bit), the verifier, timing beside the original in the
   same process (cold L2, interleaved, bootstrap interval, 2 % band).
Each edit runs in a process of its own. Writes results.json (every report) and summary.json under --out.

    python3 benchmarks/ptx_proof.py --out DIR [--budget-s 420] [--dry-run]

`--dry-run` (no GPU) does everything up to the static checks and lists the proofs it would run.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kernelloop.base.compressed import decompress_to

ROOT = Path(__file__).resolve().parents[1]
NORMS = ROOT / "benchmarks" / "results" / "2026-11-30-h200-norms"
RUNS = ("rmsnorm-persistent", "layernorm-rowwise", "softmax-chunked")


def _runs(out: Path, names: list[str]) -> list[Path]:
    dirs = []
    for name in names:
        d = out / "runs" / name
        d.mkdir(parents=True, exist_ok=True)
        decompress_to(NORMS / f"{name}.sqlite.xz", d / "archive.sqlite")
        dirs.append(d)
    return dirs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--runs", default=",".join(RUNS), help="which recorded winners (comma-separated)")
    ap.add_argument("--budget-s", type=float, default=420.0, help="no new proof starts after this many seconds")
    ap.add_argument("--max-edits", type=int, default=4, help="rule-based edits proved per kernel")
    ap.add_argument("--checks", type=int, default=6, help="seeded cases per proof (held-out shapes come on top)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    from kernelloop.tune.ptx.checks import check_edit
    from kernelloop.tune.ptx.mutate import wrong_edits
    from kernelloop.tune.ptx.patch import hunks
    from kernelloop.tune.ptx.pipeline import Options, prove_target, targets, work
    from kernelloop.tune.ptx.records import PtxCandidate
    from kernelloop.base.records.base import sha256_hex
    t0 = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    results = {"wrong_edits": [], "rule_edits": [], "targets": [], "skipped": []}
    opts = Options(prove=True, executor="gpu", checks=args.checks, time_it=True, seed=args.seed)

    def left() -> float:
        return args.budget_s - (time.perf_counter() - t0)
    for run_dir in _runs(args.out, [r for r in args.runs.split(",") if r]):
        for target in targets(run_dir):
            report, accepted = work(target, opts)
            results["targets"].append(report.model_dump(mode="json", exclude={"kernels": {"__all__": {"edits": {
                "__all__": {"diff"}}}}}))
            print(f"{target.label}: {len(accepted)} edits accepted with other SASS "
                  f"({sum(len(k.edits) for k in report.kernels)} proposed)", flush=True)
            kernels = {k.name: k for k, _ in accepted}
            from kernelloop.tune.ptx.pipeline import recover_target
            for k in recover_target(target):
                if not k.recoverable:
                    continue
                kernels.setdefault(k.name, k)
                wrong = []
                for m in wrong_edits(k.ptx, seed=args.seed):
                    static = check_edit(k.ptx, m.ptx, metadata=k.metadata)
                    cand = PtxCandidate(op=target.candidate.op, parent_candidate_id=target.candidate.id,
                                        kernel=k.name, original_ptx_sha256=sha256_hex(k.ptx),
                                        hunks=hunks(k.ptx, m.ptx), rule=f"wrong:{m.kind}",
                                        hypothesis=f"a wrong edit ({m.description}): the proof must reject it",
                                        proposer="mutation")
                    wrong.append((k, cand, m, static))
                for k2, cand, m, static in wrong:
                    row = {"target": target.label, "kind": m.kind, "description": m.description,
                           "static": [v.model_dump() for v in static]}
                    if args.dry_run or left() < 0:
                        row["proof"] = None
                        row["why"] = "dry run" if args.dry_run else "time budget spent"
                    else:
                        from kernelloop.tune.ptx.gpu import prove_isolated
                        from kernelloop.tune.ptx.prove import proof_cases
                        from kernelloop.core.spec import load_op
                        from kernelloop.base.builtin import resolve_op
                        bundle = load_op(resolve_op(target.candidate.op))
                        cases = proof_cases(bundle, target.candidate, target.workload, cand.id, f"s{args.seed}",
                                            args.checks)
                        import base64
                        r = prove_isolated(cand, k2.ptx, op_dir=bundle.folder, template_source=target.candidate.source,
                                           config=target.candidate.config, cases=cases, metadata=k2.metadata,
                                           original_cubin=base64.b64decode(k2.cubin_b64), time_it=False)
                        row["proof"] = r.model_dump(mode="json")
                        row["rejected"] = not r.passed
                        print(f"  wrong {m.kind}: {r.verdict} ({r.message[:160]})", flush=True)
                    results["wrong_edits"].append(row)
            if args.dry_run:
                results["rule_edits"] += [{"target": target.label, "edit": e.candidate.id, "rule": e.candidate.rule,
                                           "proof": None, "why": "dry run"} for _, e in accepted]
                continue
            todo = accepted[:args.max_edits]
            results["skipped"] += [f"{target.label}: {e.candidate.id} {e.candidate.rule} (over --max-edits)"
                                   for _, e in accepted[args.max_edits:]]
            for k, e in todo:
                if left() < 0:
                    results["skipped"].append(f"{target.label}: {e.candidate.id} {e.candidate.rule} (time budget)")
                    continue
                (r,) = prove_target(target, [(k, e)], opts)
                t = r.timing
                print(f"  {e.candidate.rule}: {r.verdict}" + (f" {t.speedup:.3f}x [{t.ci_low:.3f}, {t.ci_high:.3f}]"
                                                              if t else f" {r.message[:160]}"), flush=True)
                results["rule_edits"].append({"target": target.label, "edit": e.candidate.id,
                                              "rule": e.candidate.rule, "proof": r.model_dump(mode="json")})
    proved = [x for x in results["rule_edits"] if x["proof"] and x["proof"]["verdict"] in
              ("proved", "faster", "same", "slower")]
    best = max(proved, key=lambda x: x["proof"]["timing"]["speedup"] if x["proof"]["timing"] else 0, default=None)
    summary = {
        "wrong_edits": len(results["wrong_edits"]),
        "wrong_edits_rejected": sum(bool(x.get("rejected")) for x in results["wrong_edits"]),
        "wrong_edits_passing_static_checks": sum(not x["static"] for x in results["wrong_edits"]),
        "wrong_edits_accepted_by_proof": [f"{x['target']} {x['kind']}" for x in results["wrong_edits"]
                                          if x.get("proof") and not x.get("rejected")],
        "rule_edits_proved": len(proved), "rule_edits_tried": len(results["rule_edits"]),
        "rule_edits_by_verdict": {v: sum(1 for x in results["rule_edits"] if x["proof"] and
                                         x["proof"]["verdict"] == v) for v in
                                  sorted({x["proof"]["verdict"] for x in results["rule_edits"] if x["proof"]})},
        "best": None if best is None else {"target": best["target"], "edit": best["edit"], "rule": best["rule"],
                                           **{k: best["proof"]["timing"][k] for k in
                                              ("original_us", "edited_us", "speedup", "ci_low", "ci_high",
                                               "verdict")}},
        "seconds": round(time.perf_counter() - t0, 1), "dry_run": args.dry_run, "skipped": results["skipped"]}
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0 if args.dry_run or not summary["wrong_edits_accepted_by_proof"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
