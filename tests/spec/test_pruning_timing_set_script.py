"""benchmarks/pruning_timing_set.py: the pruned runners of an audit plus a recording's best kept configurations,
per workload, as a `record --configs` file."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("pts", ROOT / "benchmarks" / "pruning_timing_set.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_timing_set_joins_pruned_runners_and_the_recorded_best():
    mod = _script()
    runner = {"template": "rowwise", "config": {"BLOCK_N": 256, "ROWS": 1}, "pruned": "c", "same_launches": []}
    audit = {"op": "rmsnorm", "workloads": [{"workload": "rmsnorm[8x4096]:fp16", "workload_id": "w1",
                                             "axes": {"M": 8, "N": 4096}, "dtype": "fp16", "rows": [{}, {}],
                                             "pruned_runners": [runner]}]}
    recs = [{"config": {"template": "rowwise", "BLOCK_N": 4096, "ROWS": 1, "num_warps": w},
             "results": {"r1": {"value": v, "status": "PASSED"}}} for w, v in ((1, 30.0), (2, 20.0), (4, 25.0))]
    recs.append({"config": {"template": "rowwise", "BLOCK_N": 4096, "ROWS": 1, "num_warps": 8},
                 "results": {"r1": {"value": None, "status": "WRONG_VALUES"}}})
    recorded = {"op": "rmsnorm", "workloads": [{"id": "r0", "axes": {"M": 4096, "N": 4096}, "dtype": "fp16"},
                                               {"id": "r1", "axes": {"N": 4096, "M": 8}, "dtype": "fp16"}],
                "records": recs}
    doc = mod.timing_set(audit, recorded, top=2)
    assert doc["configs"]["w1"] == [recs[1]["config"], recs[2]["config"],
                                    {"template": "rowwise", "BLOCK_N": 256, "ROWS": 1}]
    # device-limit removals are timed before semantic ones
    hw = {"template": "rowwise", "config": {"BLOCK_N": 512, "ROWS": 1}, "pruned": "device limit: x", "same_launches": []}
    audit["workloads"][0]["pruned_runners"] = [runner, hw]
    assert mod.timing_set(audit, recorded, top=0)["configs"]["w1"] == [{"template": "rowwise", **hw["config"]},
                                                                       {"template": "rowwise", **runner["config"]}]
    assert doc["counts"]["w1"] == {"pruned_runners": 1, "recorded_best": 2, "rows": 2}
    with pytest.raises(ValueError, match="no workload"):
        mod.timing_set(audit, {**recorded, "workloads": recorded["workloads"][:1]}, top=2)
    with pytest.raises(ValueError, match="softmax"):
        mod.timing_set(audit, {**recorded, "op": "softmax"}, top=2)
    assert json.loads(json.dumps(doc)) == doc  # what the script writes
