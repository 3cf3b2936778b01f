"""The rule planner against exhaustive search on one workload (default: layernorm fp16 [4096, 4096]).

Inputs: an exhaustive reference — a run archive of `--strategy exhaustive` (every configuration of the pruned
space) or a space file from `kernelloop record` — and a planner run archive started from a deliberately poor
configuration. Output (printed, and written as JSON to --out): the exhaustive best (µs and configuration), the
planner's best after at most --budget evaluations, their ratio, the evaluation at which the planner first came
within --within (5 %) of the exhaustive best, and the planner's hypothesis record (confirmed / refuted /
inconclusive, hit rate = confirmed / decided) over those evaluations, with the trajectory.

The two runs are timed in separate runs, so the ratio carries run-to-run noise (about 1 % on the H200). With a
space file as reference the planner's best configuration is also looked up in it: `ratio_same_measurement`
compares the two configurations under one measurement.

On a GPU host (H200: about 7 minutes for the exhaustive run, 2 for the planner's):

    kernelloop optimize layernorm --workloads benchmarks/workloads/layernorm-4096.toml --device cuda \\
        --strategy exhaustive --budget 1000 --no-confirm --out runs/ln4096-exhaustive
    kernelloop optimize layernorm --workloads benchmarks/workloads/layernorm-4096.toml --device cuda \\
        --strategy planner --start "BLOCK_N=1024,ROWS=1,num_warps=1,EVICT_FIRST=0" --budget 15 --no-confirm \\
        --out runs/ln4096-planner
    python benchmarks/planner_vs_exhaustive.py --exhaustive runs/ln4096-exhaustive --planner runs/ln4096-planner
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernelloop.core.archive import Archive
from kernelloop.base.records import OpSpec, Status, Workload
from kernelloop.deliver.report.summary import hypothesis_record
from kernelloop.tune.search.encoding import config_key

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_WORKLOAD = "layernorm[4096x4096]:fp16"


def _archive_path(path: Path) -> Path:
    return path / "archive.sqlite" if path.is_dir() else path


def _is_archive(path: Path) -> bool:
    p = _archive_path(path)
    if not p.is_file():
        return False
    with open(p, "rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


def _workload(run: dict, wanted: str | None) -> Workload:
    wls = [Workload.model_validate(w) for w in run["options"].get("workloads", [])]
    if wanted is None:
        if len(wls) == 1:
            return wls[0]
        wanted = DEFAULT_WORKLOAD
    for w in wls:
        if wanted in (w.id, w.label):
            return w
    raise SystemExit(f"run {run['id']} has no workload {wanted!r}; it has {[w.label for w in wls]}")


def _config(archive: Archive, trial) -> dict:
    cand = archive.get_candidate(trial.candidate_id)
    return {"template": cand.template, **cand.config} if cand is not None else {}


def exhaustive_reference(path: Path | list[Path], workload: str | None) -> dict:
    """Best µs and configuration of an exhaustive run archive or a recorded space file (or its shard files)."""
    if isinstance(path, list) and len(path) == 1:
        path = path[0]
    if not isinstance(path, list) and _is_archive(path):
        from kernelloop.base.records.device import DeviceProperties
        from kernelloop.core.device import VIRTUAL_HOPPER
        from kernelloop.core.spec.space import prune
        with Archive(_archive_path(path)) as a:
            run = a.runs()[0]
            w = _workload(run, workload)
            trials = a.trials(run["id"], w.id)
            passed = [t for t in trials if t.verdict.status is Status.PASSED and t.measurement is not None]
            if not passed:
                raise SystemExit(f"{path}: no passing trial on {w.label}")
            best = min(passed, key=lambda t: t.measurement.kernel.median_us)
            spec = OpSpec.model_validate(run["spec"])
            archived = run["environment"].get("properties")
            props = DeviceProperties.model_validate(archived) if archived else VIRTUAL_HOPPER
            size = sum(len(prune(t, w, props)[0]) for t in spec.templates)
            env = run["environment"]
            return {"source": "run archive", "path": str(path), "run": run["id"],
                    "strategy": run["options"].get("strategy"), "workload": w.label,
                    "best_us": best.measurement.kernel.median_us, "best_config": _config(a, best),
                    "evaluated": len(trials), "passed": len(passed), "space_size": size,
                    "complete": len(trials) >= size, "device": env.get("gpu") or env.get("device"),
                    "lookup": {config_key(_config(a, t)): t.measurement.kernel.median_us for t in passed}}
    from kernelloop.tune.replay import load_space, merge_spaces
    paths = path if isinstance(path, list) else [path]
    shards = [load_space(p, workload=workload or DEFAULT_WORKLOAD) for p in paths]
    space = merge_spaces(shards)
    i = min((i for i, v in enumerate(space.values) if v is not None), key=lambda i: space.values[i])
    return {"source": "space file", "path": ", ".join(str(p) for p in paths), "workload": space.meta.get("workload"),
            "best_us": space.values[i], "best_config": space.configs[i], "evaluated": len(space),
            "passed": len(space) - space.n_failed,
            "space_size": space.meta.get("planned") or len(space),
            "complete": bool(space.meta.get("complete", True)) and space.meta.get("shard") is None,
            "device": (space.meta.get("device") or {}).get("name"),
            "lookup": {config_key(c): v for c, v in zip(space.configs, space.values) if v is not None}}


def planner_record(path: Path, workload: str | None, budget: int) -> dict:
    """The planner run's first `budget` evaluations on the workload: trajectory, best, hypotheses."""
    with Archive(_archive_path(path)) as a:
        run = a.runs()[0]
        w = _workload(run, workload)
        trials = sorted(a.trials(run["id"], w.id), key=lambda t: t.index)[:budget]
        if not trials:
            raise SystemExit(f"{path}: no trial on {w.label}")
        rules = {e["payload"]["candidate"]: e["payload"] for e in a.events(run["id"], "search")
                 if e["payload"].get("kind") == "proposal" and e["payload"].get("workload") == w.id}
        steps, best = [], None
        for n, t in enumerate(trials, 1):
            us = t.measurement.kernel.median_us if t.verdict.status is Status.PASSED and t.measurement else None
            if us is not None and (best is None or us < best[0]):
                best = (us, _config(a, t), n)
            rep = a.profile(run["id"], t.id)
            prop = rules.get(t.candidate_id, {})
            outcomes = [{"metric": o.hypothesis.metric, "direction": o.hypothesis.direction.value,
                         "status": o.status, "change": o.change} for o in (rep.outcomes if rep else [])]
            steps.append({"evaluation": n, "config": _config(a, t), "status": t.verdict.status.value, "kernel_us": us,
                          "best_so_far_us": best[0] if best else None, "rule": prop.get("rule"),
                          "parent": prop.get("parent"), "hypotheses": prop.get("hypotheses", ""),
                          "bottleneck": (rep.classification.bottleneck.value
                                         if rep is not None and rep.classification is not None else None),
                          "profiled": rep is not None and rep.kernel is not None, "outcomes": outcomes})
        return {"path": str(path), "run": run["id"], "strategy": run["options"].get("strategy"),
                "start": run["options"].get("start"), "workload": w.label,
                "device": run["environment"].get("gpu") or run["environment"].get("device"),
                "evaluations": len(trials), "best_us": best[0] if best else None,
                "best_config": best[1] if best else None, "best_at": best[2] if best else None,
                "hypotheses": hypothesis_record(a, run["id"], trials).model_dump(mode="json"),
                "trajectory": steps}


def compare(exhaustive: Path, planner: Path, workload: str | None = None, budget: int = 15,
            within: float = 0.05) -> dict:
    """The comparison document (see the module docstring)."""
    ref = exhaustive_reference(exhaustive, workload)
    plan = planner_record(planner, workload or ref.get("workload"), budget)
    lookup = ref.pop("lookup")
    target = ref["best_us"] * (1 + within)
    reached = next((s["evaluation"] for s in plan["trajectory"]
                    if s["best_so_far_us"] is not None and s["best_so_far_us"] <= target), None)
    same = lookup.get(config_key(plan["best_config"])) if plan["best_config"] else None
    return {"workload": plan["workload"], "budget": budget, "within": within, "exhaustive": ref, "planner": plan,
            "ratio": plan["best_us"] / ref["best_us"] if plan["best_us"] else None,
            "ratio_same_measurement": same / ref["best_us"] if same else None,
            "within_at_evaluation": reached,
            "hit_rate": plan["hypotheses"]["hit_rate"],
            "notes": [n for n in (
                None if ref["complete"] else f"the reference evaluated {ref['evaluated']} of {ref['space_size']} "
                                             f"configurations: not exhaustive",
                None if plan["strategy"] == "planner" else f"the planner archive's strategy is {plan['strategy']!r}",
            ) if n]}


def _cfg(c: dict | None) -> str:
    return ",".join(f"{k}={v}" for k, v in (c or {}).items() if k != "template") or "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exhaustive", type=Path, required=True, action="append",
                    help="exhaustive run folder/archive, or a space file; repeat for the shards of one recording")
    ap.add_argument("--planner", type=Path, required=True, help="planner run folder/archive")
    ap.add_argument("--workload", default=None, help=f"workload label or id (default: the run's only one, else "
                                                     f"{DEFAULT_WORKLOAD})")
    ap.add_argument("--budget", type=int, default=15, help="planner evaluations considered (15)")
    ap.add_argument("--within", type=float, default=0.05, help="relative distance counted as reached (0.05)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "planner-vs-exhaustive.json")
    args = ap.parse_args(argv)
    doc = compare(args.exhaustive, args.planner, args.workload, args.budget, args.within)
    ref, plan = doc["exhaustive"], doc["planner"]
    h = plan["hypotheses"]
    print(f"workload {doc['workload']} on {plan['device']}")
    print(f"exhaustive ({ref['source']}, {ref['evaluated']}/{ref['space_size']} configurations): "
          f"{ref['best_us']:.2f} us  {_cfg(ref['best_config'])}")
    if plan["best_us"] is None:
        print(f"planner: no passing candidate in {plan['evaluations']} evaluations")
    else:
        print(f"planner (start {plan['start']}): {plan['best_us']:.2f} us after {plan['evaluations']} evaluations "
              f"(best at evaluation {plan['best_at']})  {_cfg(plan['best_config'])}")
        print(f"ratio planner/exhaustive: {doc['ratio']:.3f}"
              + (f" (same measurement: {doc['ratio_same_measurement']:.3f})" if doc["ratio_same_measurement"] else ""))
    print(f"within {doc['within']:.0%} at evaluation: {doc['within_at_evaluation'] or 'not reached'}")
    rate = f"{h['hit_rate']:.0%}" if h["hit_rate"] is not None else "n/a"
    print(f"hypotheses: {h['confirmed']} confirmed, {h['refuted']} refuted, {h['inconclusive']} inconclusive "
          f"(hit rate {rate}; {h['profiled']}/{h['reports']} reports with an Nsight Compute profile)")
    for s in plan["trajectory"]:
        us = f"{s['kernel_us']:.2f}" if s["kernel_us"] is not None else s["status"]
        why = f"{s['rule']}" if s["rule"] else "start/explore"
        out = ", ".join(f"{o['metric']} {o['direction']}: {o['status']}" for o in s["outcomes"])
        print(f"  {s['evaluation']:>2} {us:>10}  {_cfg(s['config'])}  [{why}; {s['bottleneck'] or 'no class'}]"
              + (f"  {out}" if out else ""))
    for n in doc["notes"]:
        print(f"note: {n}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
