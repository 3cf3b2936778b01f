"""benchmarks/aa_experiment.py end to end in the interpreter, on a tiny kernel: the output a GPU run relies on."""

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_aa_experiment_reports_verdicts_spreads_and_launch_retakes(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("aa_experiment", ROOT / "benchmarks" / "aa_experiment.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "KERNELS", [
        ("layernorm", {"M": 4, "N": 256}, {"BLOCK_N": 256, "ROWS": 1, "num_warps": 1, "EVICT_FIRST": 0}),
        ("rmsnorm", {"M": 4, "N": 256}, {"BLOCK_N": 256, "ROWS": 1, "num_warps": 1, "EVICT_FIRST": 0}),
    ])
    out = tmp_path / "aa.json"
    monkeypatch.setattr(sys, "argv", ["aa", "--device", "interpret", "--kernels", "1", "--comparisons", "2",
                                      "--samples", "3", "--output-sets", "3", "--out", str(out)])
    mod.main()
    doc = json.loads(out.read_text())
    assert doc["comparisons"] == 2 and doc["output_sets"] == 3 and doc["twin"] == "candidate-twin"
    (k,) = doc["kernels"]
    assert k["op"] == "rmsnorm" and len(k["verdicts"]) == 2 and k["non_same"] == sum(v != "SAME" for v in k["verdicts"])
    assert [r["order"][0] for r in k["ratios"]] == ["candidate", "candidate-twin"]   # the order alternates
    assert all(r["twin_us"] > 0 and set(r["launch_retakes"]) == {"candidate", "candidate-twin"} for r in k["ratios"])
    assert k["launch_retakes"] == 0             # wall-clock timing in the interpreter has no device sleep to check
    assert 0 <= doc["non_same_rate"] <= 1
