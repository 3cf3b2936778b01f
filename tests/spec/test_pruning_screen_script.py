"""benchmarks/pruning_screen.py: what pruning removed, screened beside the recorded best of what it kept."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from kernelloop.tune.replay.space_file import write_space_file

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("pscreen", ROOT / "benchmarks" / "pruning_screen.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


AXES = {"M": 4, "N": 512}
KEPT = [{"template": "rowwise", "BLOCK_N": 512, "ROWS": 1, "num_warps": w, "EVICT_FIRST": 0, "STREAM_STORE": 0}
        for w in (1, 2, 4)]
PRUNED = {"BLOCK_N": 128, "ROWS": 1, "num_warps": 1, "EVICT_FIRST": 0, "STREAM_STORE": 0}


def audit_doc(population=150):
    return {"op": "rmsnorm", "workloads": [{
        "workload": "rmsnorm[4x512]:fp16", "workload_id": "w1", "axes": AXES, "dtype": "fp16",
        "classes": {"runs": population - 10, "spills": 10},
        "pruned_runners": [{"template": "rowwise", "config": PRUNED, "pruned": "constraint 'loop'",
                            "same_launches": [{"x": 1}]}]}]}


def recorded_doc():
    return {"format": "kernelloop-space/1", "name": "r", "op": "rmsnorm", "objective": "kernel_us", "params": [],
            "workloads": [{"id": "r1", "axes": {"N": 512, "M": 4}, "dtype": "fp16"}], "complete": True,
            "records": [{"config": c, "results": {"r1": {"value": 10.0 + i, "status": "PASSED"}}}
                        for i, c in enumerate(KEPT)]}


def test_plan_puts_the_recorded_best_first_then_the_pruned_runners():
    items = _script().plan(audit_doc(), recorded_doc(), top=2)
    assert [i["config"] for i in items] == [KEPT[0], KEPT[1], {"template": "rowwise", **PRUNED}]
    assert [i["pruned"] for i in items] == [None, None, "constraint 'loop'"]
    assert items[0]["recorded_us"] == 10.0 and items[2]["same_launches"] == 1
    assert all(i["population"] == 150 and i["workload_id"] == "w1" for i in items)


def test_plan_screens_a_recorded_configuration_the_audit_now_prunes_once_as_pruned():
    doc = audit_doc()
    doc["workloads"][0]["pruned_runners"].append({"template": "rowwise", "config": {k: v for k, v in KEPT[0].items()
                                                                                   if k != "template"},
                                                  "pruned": "rule D", "same_launches": []})
    items = _script().plan(doc, recorded_doc(), top=2)
    assert [(i["config"]["num_warps"], i["pruned"]) for i in items] == [
        (2, None), (4, None), (1, "constraint 'loop'"), (1, "rule D")]
    assert len({_script()._key(i) for i in items}) == 4


def test_summarize_flags_pruned_configurations_near_the_threshold():
    mod = _script()
    items = mod.plan(audit_doc(population=250), recorded_doc(), top=3)   # top 1 % of 250: the best 3
    keys = [mod._key(i) for i in items]
    res = {keys[0]: {"status": "timed", "us": 10.0}, keys[1]: {"status": "timed", "us": 11.0},
           keys[2]: {"status": "timed", "us": 12.0}, keys[3]: {"status": "timed", "us": 13.0}}
    s = mod.summarize(items, res, margin=0.10)["w1"]
    assert s["top_k"] == 3 and s["threshold_us"] == 12.0 and s["best_pruned_rank"] == 4
    assert [c["us"] for c in s["to_confirm"]] == [13.0]
    assert s["verdict"] == "2 pruned configuration(s) in 1 launch(es) to confirm"   # it stands for two
    assert mod.confirm_set(items, {"w1": s})["w1"] == [*KEPT, {"template": "rowwise", **PRUNED}]
    res[keys[3]]["us"] = 13.3      # more than 10 % above the threshold
    s = mod.summarize(items, res, margin=0.10)["w1"]
    assert s["to_confirm"] == [] and s["verdict"].startswith("no pruned configuration within 10%")
    res[keys[3]] = {"status": "error", "error": "boom"}
    s = mod.summarize(items, res, margin=0.10)["w1"]
    assert s["pruned_unscreened"] == 1 and s["not_timed"][0]["error"] == "boom"
    assert mod.summarize(items, {}, margin=0.1)["w1"]["verdict"] == "too few screened for the top 3"


def _row(cfg, pruned, cls="runs", cubin="a", grid=(4,)):
    return {"template": "rowwise", "config": cfg, "pruned": pruned, "class": cls, "status": "built", "error": "",
            "kernels": [{"name": "k", "cubin_sha256": cubin, "grid": list(grid), "scalars": [512]}]}


def audit_all_doc():
    """Six rows: two kept ones with the same launch, a pruned twin of them, two pruned ones sharing a launch,
    one pruned alone, and one that fails (not in the population)."""
    c = [{"BLOCK_N": 512, "ROWS": 1, "num_warps": w, "EVICT_FIRST": e, "STREAM_STORE": 0}
         for w in (1, 2, 4) for e in (0, 1)]
    rows = [_row(c[0], None, cubin="k0"), _row(c[1], None, cubin="k0"), _row(c[2], "rule A", cubin="k0"),
            _row(c[3], "rule B", cubin="p1"), _row(c[4], "rule B", cubin="p1"), _row(c[5], "rule C", cubin="p2"),
            _row({**c[0], "ROWS": 2}, "limit", cls="fails", cubin=None)]
    return {"op": "rmsnorm", "workloads": [{
        "workload": "rmsnorm[4x512]:fp16", "workload_id": "w1", "axes": AXES, "dtype": "fp16",
        "classes": {"runs": 6, "fails": 1}, "pruned_runners": [], "rows": rows}]}, c


def test_plan_all_groups_every_runner_by_launch_and_weights_the_threshold():
    mod = _script()
    doc, c = audit_all_doc()
    items = mod.plan(doc, None, top=0, kept="all")
    assert [(i["config"]["num_warps"], i["config"]["EVICT_FIRST"], i["pruned"], i["weight"]) for i in items] == [
        (1, 0, None, 3),            # two kept and the pruned twin: counted as kept (pruning it lost nothing)
        (2, 1, "rule B", 2),
        (4, 1, "rule C", 1)]
    assert all(i["population"] == 6 for i in items)
    keys = [mod._key(i) for i in items]
    # population 6 -> k = ceil(0.5 * 6) = 3 with share 0.5: the kept group alone covers ranks 1-3
    res = {keys[0]: {"status": "timed", "us": 10.0}, keys[1]: {"status": "timed", "us": 10.5},
           keys[2]: {"status": "timed", "us": 20.0}}
    s = mod.summarize(items, res, margin=0.10, share=0.5)["w1"]
    assert s["top_k"] == 3 and s["threshold_us"] == 10.0 and s["best_pruned_rank"] == 4
    assert s["screened_configurations"] == 6 and s["kept_screened"] == 1
    assert [t["us"] for t in s["to_confirm"]] == [10.5]          # within 10 % of the threshold
    assert mod.confirm_set(items, {"w1": s})["w1"] == [{"template": "rowwise", **c[0]},
                                                         {"template": "rowwise", **c[1 + 2]}]
    # with the kept group slower, the pruned pair takes ranks 1-2 and the threshold is the kept group's time
    res[keys[0]]["us"] = 11.0
    s = mod.summarize(items, res, margin=0.0, share=0.5)["w1"]
    assert s["threshold_us"] == 11.0 and s["best_pruned_rank"] == 1
    assert [t["weight"] for t in s["to_confirm"]] == [2]


def test_a_reaudit_finds_a_groups_timing_through_any_configuration_of_its_launches(tmp_path):
    """After a rule change a group may get another head (a now-kept member): its timing still counts."""
    mod = _script()
    doc, c = audit_all_doc()
    before = mod.plan(doc, None, top=0, kept="all")
    results = {mod._key(i): {"key": mod._key(i), "status": "timed", "us": us} for i, us in zip(before, (10, 9, 20))}
    doc["workloads"][0]["rows"][4]["pruned"] = None          # rule B dropped for one member of the pair
    after = mod.plan(doc, None, top=0, kept="all")
    assert after[1]["config"] == {"template": "rowwise", **c[4]} and after[1]["pruned"] is None
    assert mod._key(after[1]) not in results and mod._result(after[1], results)["us"] == 9
    s = mod.summarize(after, results, margin=0.1, share=0.5)["w1"]
    assert s["screened"] == 3 and s["pruned_unscreened"] == 0 and s["best_pruned_us"] == 20
    # the script's --summarize-only does the same from files, with no GPU and nothing timed
    audit, out, summary = tmp_path / "audit.json", tmp_path / "screen.jsonl", tmp_path / "summary.json"
    audit.write_text(json.dumps(doc))
    out.write_text("".join(json.dumps(r) + "\n" for r in results.values()))
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "pruning_screen.py"), str(audit), "--kept", "all",
                        "--out", str(out), "--summary", str(summary), "--summarize-only"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(summary.read_text())["workloads"]["w1"]
    assert got["population"] == 6 and got["screened"] == 3 and got["best_pruned_us"] == 20
    assert len(out.read_text().splitlines()) == 3                # nothing appended


def test_screen_in_the_interpreter_end_to_end_and_resume_after_a_cut_or_a_crash(tmp_path):
    audit, space = tmp_path / "audit.json", tmp_path / "rec.json"
    audit.write_text(json.dumps(audit_doc()))
    write_space_file(space, recorded_doc())
    out, summary = tmp_path / "screen.jsonl", tmp_path / "summary.json"
    args = [sys.executable, str(ROOT / "benchmarks" / "pruning_screen.py"), str(audit), "--space", str(space),
            "--out", str(out), "--summary", str(summary), "--top", "2", "--samples", "2", "--device", "interpret"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    timed = [x for x in rows if x.get("status") == "timed"]
    assert len(timed) == 3 and all(x["us"] > 0 and x["samples"] == 2 for x in timed)
    s = json.loads(summary.read_text())["workloads"]["w1"]
    assert s["screened"] == 3 and s["pruned_screened"] == 1 and s["top_k"] == 2
    # a run cut while on the pruned configuration (one start, no result): --resume times it again
    mod = _script()
    pruned_key = mod._key(mod.plan(audit_doc(), recorded_doc(), top=2)[2])
    kept_rows = [line for line in out.read_text().splitlines()
                 if pruned_key not in (json.loads(line).get("key"), json.loads(line).get("started"))]
    out.write_text("\n".join(kept_rows + [json.dumps({"started": pruned_key}), '{"cut mid-wr']) + "\n")
    r = subprocess.run(args + ["--resume"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines() if not line.startswith('{"cut')]
    assert [x["status"] for x in rows if x.get("key") == pruned_key] == ["timed"]
    assert sum(1 for x in rows if x.get("status") == "timed") == 3          # the kept ones were not timed again
    # one that took its process down twice (two starts, no result) is recorded as crashed, not tried a third time
    kept_rows = [line for line in out.read_text().splitlines() if not line.startswith('{"cut')
                 and pruned_key not in (json.loads(line).get("key"), json.loads(line).get("started"))]
    out.write_text("\n".join(kept_rows + [json.dumps({"started": pruned_key})] * 2) + "\n")
    r = subprocess.run(args + ["--resume"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [x["status"] for x in rows if x.get("key") == pruned_key] == ["crashed"]
    s = json.loads(summary.read_text())["workloads"]["w1"]
    assert s["pruned_unscreened"] == 1 and s["not_timed"][0]["status"] == "crashed"
    assert s["verdict"].startswith("incomplete: 1 pruned launch(es) not screened")


def test_kept_all_in_the_interpreter_times_each_launch_once_and_resume_finds_it_under_another_head(tmp_path):
    doc, c = audit_all_doc()
    audit, out, summary = tmp_path / "audit.json", tmp_path / "screen.jsonl", tmp_path / "summary.json"
    audit.write_text(json.dumps(doc))
    args = [sys.executable, str(ROOT / "benchmarks" / "pruning_screen.py"), str(audit), "--kept", "all",
            "--out", str(out), "--summary", str(summary), "--samples", "2", "--device", "interpret"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    timed = [json.loads(x) for x in out.read_text().splitlines() if '"status": "timed"' in x]
    assert len(timed) == 3 and all(t["us"] > 0 and t["samples"] == 2 for t in timed)
    got = json.loads(summary.read_text())["workloads"]["w1"]
    assert got["screened"] == 3 and got["screened_configurations"] == 6 and got["pruned_unscreened"] == 0
    # a re-audit keeps one member of the pruned pair: its group gets that member as head; resuming times nothing
    doc["workloads"][0]["rows"][4]["pruned"] = None
    audit.write_text(json.dumps(doc))
    r = subprocess.run(args + ["--resume"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert sum('"status": "timed"' in x for x in out.read_text().splitlines()) == 3
    got = json.loads(summary.read_text())["workloads"]["w1"]
    assert got["screened"] == 3 and got["kept_screened"] == 2 and got["pruned_screened"] == 1
