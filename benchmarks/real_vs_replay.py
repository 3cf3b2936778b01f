"""A real search run against its replay on a recorded space of the same (pinned) configuration space.

Inputs: a run archive of `kernelloop optimize` (any ask/tell strategy, e.g. the default) and the space file(s)
of `kernelloop record` over the same op, workload and `--template` / `--fix` selection. The controller asks,
evaluates and tells one configuration at a time, so with the recording's measurements in place of the real
ones the replay executor runs the very same strategy object and seed (`derive_seed(run seed, workload id)`)
over the same space in the same order (rebuilt here from the spec, the run's device properties and its
selection, and checked against the recording's configuration set).

Reported (printed, and as JSON in --out):
- agreement of the two measurements on the configurations the real run evaluated (real / recorded ratios);
- the trajectories: the first evaluation at which the real run and the same-seed replay asked different
  configurations (before it they are identical by construction; after it, measurement noise has changed a
  decision of the strategy);
- best-so-far as a fraction of the recorded optimum after each evaluation, for the real run (its
  configurations valued by the recording, i.e. one measurement for both) and for the replay, the same seed and
  --seeds other seeds (median and 10-90 % range);
- evaluations to within 5 % of the recorded optimum and the final fraction; the verdict "same behaviour" holds
  when the real run's evaluations-to-5 % and final fraction fall inside the replays' 10-90 % ranges.

    python benchmarks/real_vs_replay.py --real runs/gemm-real --space shard0.json.gz --space shard1.json.gz
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from kernelloop.core.archive import Archive
from kernelloop.core.execute.evaluate import derive_seed
from kernelloop.base.records import OpSpec, Status, Workload
from kernelloop.tune.replay import load_space, merge_spaces
from kernelloop.tune.replay.metrics import best_so_far, evals_to_within
from kernelloop.tune.replay.runner import replay
from kernelloop.tune.replay.space import RecordedSpace
from kernelloop.tune.search.encoding import config_key
from kernelloop.core.spec.space import selected_space

ROOT = Path(__file__).resolve().parents[1]


def _archive_path(path: Path) -> Path:
    return path / "archive.sqlite" if path.is_dir() else path


def real_run(path: Path) -> dict:
    """The run's options, its only workload and its search trials in order (configuration, status, µs)."""
    with Archive(_archive_path(path), readonly=True) as a:
        runs = a.runs()
        if len(runs) != 1:
            raise SystemExit(f"{path}: expected one run, found {len(runs)}")
        run = runs[0]
        wls = [Workload.model_validate(w) for w in run["options"].get("workloads", [])]
        if len(wls) != 1:
            raise SystemExit(f"{path}: expected a run of one workload, found {len(wls)}")
        w = wls[0]
        steps = []
        for t in sorted(a.trials(run["id"], w.id), key=lambda t: t.index):
            cand = a.get_candidate(t.candidate_id)
            ok = t.verdict.status is Status.PASSED and t.measurement is not None
            steps.append({"config": {"template": cand.template, **cand.config},
                          "status": t.verdict.status.value, "us": t.measurement.kernel.median_us if ok else None})
        return {"run": run, "workload": w, "spec": OpSpec.model_validate(run["spec"]), "steps": steps}


def ordered_space(recorded: RecordedSpace, spec: OpSpec, workload: Workload, props: dict,
                  templates: list[str] | None, fixed: dict | None) -> RecordedSpace:
    """The recording in the order the controller builds the run's space (pruned per template, pinned)."""
    order = [c for _, kept, _ in selected_space(spec.templates, workload, props, templates, fixed) for c in kept]
    want = {config_key(c) for c in order}
    have = {config_key(c) for c in recorded.configs}
    if want != have:
        raise SystemExit(f"the recording does not hold the run's space: {len(want - have)} of the run's {len(want)} "
                         f"configurations missing, {len(have - want)} extra")
    idx = [recorded.index(c) for c in order]
    return RecordedSpace(recorded.name, [recorded.configs[i] for i in idx], [recorded.values[i] for i in idx],
                         [recorded.statuses[i] for i in idx], recorded.objective, list(recorded.params),
                         dict(recorded.meta))


def compare(real_path: Path, space_paths: list[Path], seeds: int = 20, within: float = 0.05) -> dict:
    real = real_run(real_path)
    run, w = real["run"], real["workload"]
    opts = run["options"]
    shards = [load_space(p, workload=w.id) for p in space_paths]
    recorded = merge_spaces(shards)
    from kernelloop.base.records.device import DeviceProperties
    from kernelloop.core.device import VIRTUAL_HOPPER
    archived = run["environment"].get("properties")   # what the controller pruned with
    props = DeviceProperties.model_validate(archived) if archived else VIRTUAL_HOPPER
    space = ordered_space(recorded, real["spec"], w, props, opts.get("templates"), opts.get("fixed"))
    strategy, seed = opts["strategy"], derive_seed(opts.get("seed", 0), w.id)
    steps = real["steps"]
    n = len(steps)
    opt = space.optimum
    lookup = {config_key(c): v for c, v in zip(space.configs, space.values)}
    real_keys = [config_key(s["config"]) for s in steps]
    missing = [k for k in real_keys if k not in lookup]
    if missing:
        raise SystemExit(f"the real run evaluated {len(missing)} configurations the recording lacks, e.g. {missing[0]}")
    ratios = [s["us"] / lookup[k] for s, k in zip(steps, real_keys) if s["us"] is not None and lookup[k]]
    same = replay(space, strategy, seed, n, record_keys=True)
    diverge = next((i + 1 for i, (a, b) in enumerate(zip(real_keys, same.keys)) if a != b), None)
    as_recorded = [lookup[k] for k in real_keys]
    curve_real = best_so_far(as_recorded, n)
    curve_real_own = best_so_far([s["us"] for s in steps], n)
    others = [replay(space, strategy, derive_seed(k, w.id, "replay"), n) for k in range(seeds)]
    curves = np.array([t.curve() for t in others])
    frac = lambda c: np.where(np.isfinite(c), opt / c, 0.0)  # noqa: E731
    fr = np.array([frac(c) for c in curves])
    e5 = [evals_to_within(c, opt, within) or n + 1 for c in curves]
    real_e5 = evals_to_within(curve_real, opt, within) or n + 1
    lo_e, hi_e = np.percentile(e5, [10, 90])
    lo_f, hi_f = np.percentile(fr[:, -1], [10, 90])
    real_final = float(frac(curve_real)[-1])
    checkpoints = sorted({k for k in (5, 10, 15, 20, 25, 30, 40, 50, n) if k <= n})
    return {
        "real": {"path": str(real_path), "run": run["id"], "strategy": strategy, "seed": opts.get("seed", 0),
                 "workload": w.label, "evaluations": n, "fixed": opts.get("fixed"), "templates": opts.get("templates"),
                 "device": run["environment"].get("gpu"), "trajectory": steps},
        "space": {"paths": [str(p) for p in space_paths], "configurations": len(space), "failed": space.n_failed,
                  "optimum_us": opt, "best_config": space.configs[int(np.nanargmin(
                      [v if v is not None else np.inf for v in space.values]))],
                  "device": (recorded.meta.get("device") or {}).get("name"), "complete": bool(recorded.meta.get("complete", True))},
        "measurement_agreement": {"n": len(ratios), "median_ratio": float(np.median(ratios)) if ratios else None,
                                  "min_ratio": float(min(ratios)) if ratios else None,
                                  "max_ratio": float(max(ratios)) if ratios else None},
        "same_seed_replay": {"keys_identical_until": (diverge - 1) if diverge else n, "first_divergence": diverge,
                             "evals_to_5pct": evals_to_within(same.curve(), opt, within),
                             "final_fraction": float(frac(same.curve())[-1])},
        "real_curve_fraction": {str(k): float(frac(curve_real)[k - 1]) for k in checkpoints},
        "real_curve_fraction_own_measurement": {str(k): float(frac(curve_real_own)[k - 1]) for k in checkpoints},
        "replay_curve_fraction": {str(k): {"median": float(np.median(fr[:, k - 1])),
                                           "p10": float(np.percentile(fr[:, k - 1], 10)),
                                           "p90": float(np.percentile(fr[:, k - 1], 90))} for k in checkpoints},
        "evals_to_5pct": {"real": real_e5 if real_e5 <= n else None, "replay_median": float(np.median(e5)),
                          "replay_p10": float(lo_e), "replay_p90": float(hi_e), "censored_at": n + 1},
        "final_fraction": {"real": real_final, "replay_median": float(np.median(fr[:, -1])),
                           "replay_p10": float(lo_f), "replay_p90": float(hi_f)},
        "same_behaviour": bool(lo_e <= real_e5 <= hi_e and lo_f - 1e-12 <= real_final <= hi_f + 1e-12),
        "seeds": seeds, "within": within,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--real", type=Path, required=True, help="run folder or archive of the real search")
    ap.add_argument("--space", type=Path, required=True, action="append",
                    help="space file of the recording; repeat for its shards")
    ap.add_argument("--seeds", type=int, default=20, help="replay seeds besides the run's own (20)")
    ap.add_argument("--within", type=float, default=0.05)
    ap.add_argument("--out", type=Path, default=None, help="write the comparison as JSON here")
    args = ap.parse_args(argv)
    doc = compare(args.real, args.space, args.seeds, args.within)
    r, s, e, f = doc["real"], doc["space"], doc["evals_to_5pct"], doc["final_fraction"]
    m = doc["measurement_agreement"]
    print(f"{r['workload']} on {r['device']}: real run {r['run']} ({r['strategy']}, {r['evaluations']} evaluations, "
          f"fixed {r['fixed']}) against its replay on {s['configurations']} recorded configurations "
          f"(optimum {s['optimum_us']:.2f} us)")
    if m["n"]:
        print(f"measurements, real / recorded on the {m['n']} configurations both timed: median {m['median_ratio']:.3f}"
              f" (range {m['min_ratio']:.3f}-{m['max_ratio']:.3f})")
    ss = doc["same_seed_replay"]
    print(f"same-seed replay: identical configurations for the first {ss['keys_identical_until']} evaluations"
          + (f", first different at {ss['first_divergence']}" if ss["first_divergence"] else " (all)"))
    print("best-so-far / recorded optimum:   " + "  ".join(f"@{k}" for k in doc["real_curve_fraction"]))
    print("  real (recorded values)          " + "  ".join(f"{v:.3f}" for v in doc["real_curve_fraction"].values()))
    print("  real (its own measurements)     " + "  ".join(
        f"{v:.3f}" for v in doc["real_curve_fraction_own_measurement"].values()))
    print("  replay median [p10, p90]        " + "  ".join(
        f"{v['median']:.3f} [{v['p10']:.3f}, {v['p90']:.3f}]" for v in doc["replay_curve_fraction"].values()))
    print(f"evaluations to within {doc['within']:.0%}: real {e['real'] or '> ' + str(r['evaluations'])}; replay median "
          f"{e['replay_median']:.0f} [{e['replay_p10']:.0f}, {e['replay_p90']:.0f}] ({doc['seeds']} seeds; "
          f"{e['censored_at']} = not reached)")
    print(f"final fraction of optimum: real {f['real']:.3f}; replay median {f['replay_median']:.3f} "
          f"[{f['replay_p10']:.3f}, {f['replay_p90']:.3f}]")
    print(f"same behaviour (real inside the replays' 10-90 % ranges on both): {doc['same_behaviour']}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
