"""benchmarks/strategies_heldout.py: runs the held-out set of a folder's split in both conditions and scores the
candidate against a baseline per space and over the spaces."""

import json
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NS = runpy.run_path(str(ROOT / "benchmarks" / "strategies_heldout.py"))
CACHE = {"device_name": "Fake", "kernel_name": "k", "problem_size": 1, "objective": "time",
         "tune_params_keys": ["x"], "tune_params": {"x": list(range(8))},
         "cache": {str(i): {"x": i, "time": t} for i, t in
                   enumerate([9.0, "CompilationFailedConfig", 7.0, 1.0, 4.0, 3.0, 2.0, 8.0])}}


def test_heldout_table_from_a_tiny_split(tmp_path):
    spaces = tmp_path / "spaces"
    spaces.mkdir()
    for name in ("tune", "held"):
        (spaces / f"{name}.json").write_text(json.dumps(CACHE))
    entry = '{ set = "%s", kernel = "k", gpu = "g", arch = "x" }'
    (spaces / "split.toml").write_text(f'decided = "2026-12-07"\nrule = "r"\n[spaces]\ntune = {entry % "tuning"}\n'
                                       f'held = {entry % "heldout"}\n')
    out = tmp_path / "out"
    assert NS["main"](["--spaces", str(spaces), "--seeds", "2", "--budget", "8", "--candidate", "exhaustive",
                       "--baselines", "random", "--cache", str(tmp_path / "cache"), "--resamples", "50",
                       "--out", str(out)]) == 0
    doc = json.loads((out / "heldout.json").read_text())
    assert doc["meta"]["spaces"] == ["held.json"]                 # the tuning space is not run
    cells = {(c["label"], c["condition"]): c for c in doc["cells"]}
    assert set(cells) == {(s, c) for s in ("exhaustive", "random") for c in ("dropped", "kept")}
    # declaration order: the optimum (1.0) is the 3rd valid configuration, the 4th when the failure is kept
    assert cells[("exhaustive", "dropped")]["median_e2"] == 3 and cells[("exhaustive", "kept")]["median_e2"] == 4
    ratios = {(r["space"], r["condition"]) for r in doc["ratios"]}
    assert ratios == {(s, c) for s in ("held.json", "geometric mean over 1") for c in ("dropped", "kept")}
    assert (out / "runs.jsonl.xz").is_file() and "| exhaustive | dropped |" in (out / "heldout.md").read_text()
