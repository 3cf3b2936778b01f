"""Screen what pruning removed against the best of what it kept: short, unverified timings on a GPU.

    python benchmarks/pruning_screen.py AUDIT.json[.xz] (--kept all | --space RECORDED.space.json.xz [--top 10])
        --out SCREEN.jsonl [--samples 10] [--margin 0.10] [--device cuda] [--summary SCREEN.json]

AUDIT.json is a `kernelloop audit-pruning` report. With `--kept all` every configuration that runs, kept or pruned,
is screened once per distinct launch (configurations whose launches are identical do identical work; a launch a
kept configuration makes counts as kept), so the top-1 % threshold is that of the whole population. With
`--space`, only the recording's `--top` best kept configurations are screened beside the pruned ones: cheaper, and
the threshold can then only be slower than the population's (the check errs towards flagging). Every configuration
is launched through its template (compiled, or read from Triton's cache that the audit's ahead-of-time builds
warmed) and timed with the project's timer (cold L2, launch hidden) for `--samples` samples: a screen, not a
measurement; nothing is verified (a pruned configuration that is fast but wrong would be flagged, not hidden).

The top-1 % threshold is the time of the k-th best configuration screened, k = ceil(1 % of the configurations that
run, from the audit), each screened launch counted as many times as configurations make it. A pruned configuration
within `--margin` of it (or faster) is listed under "to_confirm": time those with `kernelloop record --configs`
(verified, full timing policy) beside the kept best before calling any of them a miss of pruning; none listed
means none of the pruned configurations comes near the top 1 %.

Each configuration's result is appended to SCREEN.jsonl as it is measured. A run cut by its time limit is continued
with --resume (the configuration it was on is tried again); one that took its process down twice is recorded as
crashed; a CUDA fault (sticky for the process) is recorded for its configuration and ends the process, so that
--resume continues in a fresh one. A verdict with pruned configurations left unscreened says "incomplete".
`--summarize-only` times nothing and summarizes SCREEN.jsonl against AUDIT.json, e.g. a re-audit (`audit-pruning
--builds`) after a pruning rule changed: a group's timing is found through any configuration making its launches.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelloop.base.builtin import ops_dir
from kernelloop.base.compressed import read_text  # noqa: E402
from kernelloop.tune.replay.space_file import read_space_document  # noqa: E402
from kernelloop.tune.search.encoding import config_key  # noqa: E402


def plan(audit: dict, recorded: dict | None, top: int, kept: str = "recorded") -> list[dict]:
    """The configurations to screen, in order, each with its `weight` (how many configurations of the population
    it stands for: equal launches do equal work).

    kept="recorded": per workload the recording's `top` best kept configurations, then the pruned runners (one per
    distinct launch). kept="all": every configuration that runs, kept or pruned, one per distinct launch (from the
    audit's rows); a launch that a kept configuration makes counts as kept (pruning it loses nothing)."""
    items = []
    for rep in audit["workloads"]:
        runs = rep["classes"].get("runs", 0) + rep["classes"].get("spills", 0)
        base = {"workload_id": rep["workload_id"], "axes": rep["axes"], "dtype": rep["dtype"], "population": runs}
        if kept == "all":
            items += [{**base, **g} for g in _launch_groups(rep["rows"])]
            continue
        by_shape = {(json.dumps(w["axes"], sort_keys=True), w["dtype"]): w["id"] for w in recorded["workloads"]}
        rid = by_shape.get((json.dumps(rep["axes"], sort_keys=True), rep["dtype"]))
        if rid is None:
            raise ValueError(f"the recording has no workload {rep['workload']}")
        # a recording made under older rules may hold configurations the audit now prunes: they are screened
        # among the pruned ones, not as kept (one item per configuration, or the threshold would count it twice)
        pruned_now = {config_key({"template": r["template"], **c})
                      for r in rep["pruned_runners"] for c in [r["config"], *r.get("same_launches", [])]}
        measured = sorted((r for r in recorded["records"] if (r["results"].get(rid) or {}).get("value") is not None
                           and config_key(r["config"]) not in pruned_now),
                          key=lambda r: r["results"][rid]["value"])
        for r in measured[:top]:
            items.append({**base, "config": r["config"], "pruned": None, "weight": 1,
                          "recorded_us": r["results"][rid]["value"]})
        for r in rep["pruned_runners"]:
            items.append({**base, "config": {"template": r["template"], **r["config"]}, "pruned": r["pruned"],
                          "same_launches": len(r.get("same_launches", [])),
                          "weight": 1 + len(r.get("same_launches", []))})
    return items


def _launch_groups(rows: list[dict]) -> list[dict]:
    """The audit rows that run, grouped by identical launches: one item per group, kept first when it has one."""
    from kernelloop.tune.search.prune_audit import outcomes_of

    groups: dict = {}
    for row, o in zip(rows, outcomes_of(rows)):
        if row["class"] not in ("runs", "spills"):
            continue
        key = o.launches if o.launches is not None else ("row", len(groups))
        groups.setdefault(key, []).append(row)
    out = []
    for members in groups.values():
        head = next((m for m in members if not m["pruned"]), members[0])
        out.append({"config": {"template": head["template"], **head["config"]}, "pruned": head["pruned"],
                    "same_launches": len(members) - 1, "weight": len(members),
                    # any member's timing serves the group (a re-audit may pick another head for it)
                    "members": [config_key({"template": m["template"], **m["config"]}) for m in members]})
    return out


def _key(item: dict) -> str:
    return item["workload_id"] + "|" + config_key(item["config"])


def _result(item: dict, results: dict[str, dict]) -> dict | None:
    """The item's screened result: its own, or that of any configuration making the same launches."""
    found = results.get(_key(item))
    for member in item.get("members", ()):
        if found is not None:
            break
        found = results.get(item["workload_id"] + "|" + member)
    return found


def read_results(path: Path) -> tuple[dict[str, dict], set[str], set[str]]:
    """(done results by key, keys started once without a result, keys started twice or more without one) of an
    earlier screen file. A run cut by its time limit leaves one start: that configuration is tried again; a second
    start without a result means it took its process down twice."""
    done, starts = {}, {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:  # a line cut by the process's death
                continue
            if "started" in ev:
                starts[ev["started"]] = starts.get(ev["started"], 0) + 1
            elif "key" in ev:
                done[ev["key"]] = ev
    open_ = {k: n for k, n in starts.items() if k not in done}
    return done, {k for k, n in open_.items() if n == 1}, {k for k, n in open_.items() if n >= 2}


def screen(op_folder: Path, items: list[dict], out: Path, device: str, samples: int, resume: bool) -> None:
    """Time every item not yet in `out`, appending one line per event."""
    import torch

    from kernelloop.core.bench.policy import policies_for
    from kernelloop.core.bench.timer import sample
    from kernelloop.base.records import Workload
    from kernelloop.core.reference.inputs import alloc_outputs, alloc_scratch, make_inputs
    from kernelloop.core.spec import load_op

    bundle = load_op(op_folder)
    spec = bundle.spec
    policy = policies_for(device)[0]
    policy = policy.model_copy(update={"name": policy.name + "-screen", "samples": samples,
                                       "warmup": min(policy.warmup, 2), "output_sets": 1})
    done, _, crashed = read_results(out) if resume else ({}, set(), set())
    if not resume:
        out.write_text("")
    log = out.open("a", buffering=1)
    for key in crashed:  # it took the process down twice
        log.write(json.dumps({"key": key, "status": "crashed", "us": None}) + "\n")
        done[key] = {"status": "crashed"}
    modules, tensors = {}, {}
    import importlib.util
    for item in items:
        key = _key(item)
        if _result(item, done) is not None:
            continue
        w = Workload(op=spec.name, axes=item["axes"], dtype=item["dtype"])
        if w.id not in tensors:
            tensors.clear()
            dev = "cuda" if device == "cuda" else "cpu"
            tensors[w.id] = (make_inputs(spec, w, 0, dev), alloc_outputs(spec, w, dev), alloc_scratch(spec, w, dev))
        inputs, outputs, scratch = tensors[w.id]
        name = item["config"]["template"]
        if name not in modules:
            t = next(t for t in spec.templates if t.name == name)
            s = importlib.util.spec_from_file_location(f"screen_{name}", bundle.folder / t.file)
            m = importlib.util.module_from_spec(s)
            s.loader.exec_module(m)
            modules[name] = m
        cfg = {k: v for k, v in item["config"].items() if k != "template"}
        log.write(json.dumps({"started": key}) + "\n")

        def call(m=modules[name], cfg=cfg):
            m.launch(*inputs, *outputs, **scratch, **spec.scalars, **cfg)

        row = {"key": key, **{k: item[k] for k in ("workload_id", "config", "pruned")}}
        t0 = time.perf_counter()
        try:
            call()
            if device == "cuda":
                torch.cuda.synchronize()
            ks = sample({"c": call}, policy, seed=0)["c"]["kernel_us"]
            row.update(status="timed", us=sorted(ks)[len(ks) // 2], samples=len(ks))
        except Exception as e:  # noqa: BLE001 - a configuration that cannot run is a result, not the end
            row.update(status="error", us=None, error=f"{type(e).__name__}: {e}"[:500])
            if device == "cuda":
                try:
                    torch.cuda.synchronize()
                except Exception:  # noqa: BLE001 - a sticky CUDA error: this process can time nothing more
                    row.update(status="cuda_fault", seconds=round(time.perf_counter() - t0, 3))
                    log.write(json.dumps(row) + "\n")
                    log.close()
                    import os
                    os._exit(3)  # --resume continues in a fresh process with the next configuration
        row["seconds"] = round(time.perf_counter() - t0, 3)
        log.write(json.dumps(row) + "\n")
        done[key] = row


def _weight(item: dict) -> int:
    return item.get("weight", 1)


def summarize(items: list[dict], results: dict[str, dict], margin: float, share: float = 0.01) -> dict:
    """Per workload: the top-share threshold among screened times, and the pruned configurations near it.

    The threshold is the time of the k-th best configuration screened, k = ceil(share * population), counting each
    item `weight` times (the configurations whose launches it stands for). Where only part of the kept space is
    screened, that time can only be slower than the population's k-th best: the check errs towards flagging."""
    out = {}
    for wid in dict.fromkeys(i["workload_id"] for i in items):
        mine = [i for i in items if i["workload_id"] == wid]
        res = {_key(i): _result(i, results) or {} for i in mine}
        timed = [(res[_key(i)]["us"], i) for i in mine if res[_key(i)].get("status") == "timed"]
        pop = mine[0]["population"]
        k = max(1, math.ceil(share * pop))
        timed.sort(key=lambda x: x[0])
        row = {"population": pop, "top_k": k, "screened": len(timed),
               "screened_configurations": sum(_weight(i) for _, i in timed),
               "pruned_screened": sum(1 for _, i in timed if i["pruned"]),
               "kept_screened": sum(1 for _, i in timed if not i["pruned"]),
               "pruned_unscreened": sum(1 for i in mine if i["pruned"] and res[_key(i)].get("status") != "timed"),
               "not_timed": [{"config": i["config"], **{k2: res[_key(i)].get(k2) for k2 in ("status", "error")}}
                             for i in mine if res[_key(i)] and res[_key(i)].get("status") != "timed"]}
        ranks, seen = [], 0
        for _, i in timed:
            ranks.append(seen + 1)
            seen += _weight(i)
        if seen < k:
            row["verdict"] = f"too few screened for the top {k}"
        else:
            threshold = next(us for (us, i), r in zip(timed, ranks) if r + _weight(i) - 1 >= k)
            near = [{"config": i["config"], "us": us, "pruned": i["pruned"], "weight": _weight(i)}
                    for us, i in timed if i["pruned"] and us <= threshold * (1 + margin)]
            best_pruned = next(((us, r) for (us, i), r in zip(timed, ranks) if i["pruned"]), (None, None))
            verdict = (f"{sum(c['weight'] for c in near)} pruned configuration(s) in {len(near)} launch(es) to confirm"
                       if near else "no pruned configuration within {:.0%} of the top-1 % threshold".format(margin))
            if row["pruned_unscreened"]:
                verdict = f"incomplete: {row['pruned_unscreened']} pruned launch(es) not screened; " + verdict
            row.update(threshold_us=threshold, best_us=timed[0][0], best_pruned_us=best_pruned[0],
                       best_pruned_rank=best_pruned[1], margin=margin, to_confirm=near, verdict=verdict,
                       kept_best=[{"config": i["config"], "us": us} for us, i in timed if not i["pruned"]][:k + 10])
        out[wid] = row
    return out


def confirm_set(items: list[dict], summary: dict) -> dict[str, list[dict]]:
    """Per workload, for `record --configs`: the kept configurations screened best (the recorded best, or with
    kept="all" the best k + 10 screened) and the flagged pruned ones."""
    out = {}
    for wid, row in summary.items():
        best = [i["config"] for i in items if i["workload_id"] == wid and i["pruned"] is None and "recorded_us" in i]
        if not best:
            best = [c["config"] for c in row.get("kept_best", [])]
        out[wid] = best + [c["config"] for c in row.get("to_confirm", [])]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("audit", type=Path)
    ap.add_argument("--space", type=Path, help="an earlier recording of the op (needed with --kept recorded)")
    ap.add_argument("--kept", choices=["recorded", "all"], default="recorded",
                    help="which kept configurations to screen beside the pruned ones: the recording's --top best, "
                         "or every one that runs (one per distinct launch), which makes the threshold exact")
    ap.add_argument("--out", type=Path, required=True, help="results, one JSON line per configuration")
    ap.add_argument("--summary", type=Path, help="write the per-workload summary here (JSON)")
    ap.add_argument("--confirm-out", type=Path,
                    help="write the configurations to confirm as a file for `kernelloop record --configs`: the "
                         "flagged pruned ones beside the kept best (the recording's --top best, or with --kept all "
                         "the k + 10 best kept launches of the screen)")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--margin", type=float, default=0.10)
    ap.add_argument("--device", default="cuda", choices=["cuda", "interpret"])
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--summarize-only", action="store_true",
                    help="time nothing: summarize the results already in --out against AUDIT.json (e.g. a re-audit "
                         "after a pruning rule changed; launches are matched, so no GPU is needed)")
    ap.add_argument("--ops", type=Path, default=ops_dir())
    a = ap.parse_args()
    if a.device == "interpret":  # before anything imports triton
        import os
        os.environ["TRITON_INTERPRET"] = "1"
    audit = json.loads(read_text(a.audit))      # the committed audits are kept as .json.xz
    if a.kept == "recorded" and a.space is None:
        ap.error("--space is needed with --kept recorded")
    items = plan(audit, read_space_document(a.space) if a.space else None, a.top, a.kept)
    if not a.summarize_only:
        screen(a.ops / audit["op"], items, a.out, a.device, a.samples, a.resume)
    done, _, _ = read_results(a.out)
    summary = summarize(items, done, a.margin)
    samples = a.samples
    if a.summarize_only:   # what the results were timed with, not this command's defaults
        counts = sorted({r["samples"] for r in done.values() if r.get("samples")})
        samples = counts[0] if len(counts) == 1 else counts
    text = json.dumps({"op": audit["op"], "device": a.device, "samples": samples, "workloads": summary}, indent=1)
    if a.summary:
        a.summary.write_text(text)
    if a.confirm_out:
        a.confirm_out.write_text(json.dumps({"op": audit["op"], "configs": confirm_set(items, summary)}, indent=1))
    print(text)


if __name__ == "__main__":
    main()
