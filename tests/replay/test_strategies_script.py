"""benchmarks/strategies.py: a folder of spaces plus --space files, a budget above a space's size, and Kernel Tuner
on a kernelloop space whose templates have different parameters."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from kernelloop.tune.replay import load_space
from kernelloop.tune.replay.space_file import FORMAT, write_space_file

ROOT = Path(__file__).resolve().parents[2]

KT_CACHE = {
    "device_name": "Fake GPU", "kernel_name": "k", "problem_size": [64], "objective": "time",
    "tune_params_keys": ["bx", "tile"], "tune_params": {"bx": [32, 64, 128], "tile": [1, 2]},
    "cache": {
        "32,1": {"bx": 32, "tile": 1, "time": 2.0},
        "32,2": {"bx": 32, "tile": 2, "time": "RuntimeFailedConfig"},
        "64,1": {"bx": 64, "tile": 1, "time": 1.5},
        "64,2": {"bx": 64, "tile": 2, "time": 1.8},
        "128,1": {"bx": 128, "tile": 1, "time": 3.0},
        "128,2": {"bx": 128, "tile": 2, "time": 2.5},
    },
}


def _script():
    spec = importlib.util.spec_from_file_location("strategies_bench", ROOT / "benchmarks" / "strategies.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod   # the worker processes unpickle run_one by module name (forked: they have it)
    spec.loader.exec_module(mod)
    return mod


def _templated_space(path: Path) -> Path:
    """A kernelloop space of two templates with different parameters (one configuration failed)."""
    recs = [({"template": "rows", "B": b, "W": w}, 10.0 / b + w) for b in (1, 2, 4) for w in (1, 2)]
    recs += [({"template": "chunk", "C": c}, 3.0 + c / 8) for c in (8, 16, 32)]
    records = [{"config": c, "results": {"w": {"value": v, "status": "PASSED"}}} for c, v in recs]
    records.append({"config": {"template": "chunk", "C": 64},
                    "results": {"w": {"value": None, "status": "COMPILE_ERROR"}}})
    return write_space_file(path, {"format": FORMAT, "name": "toy", "objective": "kernel_us",
                                   "device": {"name": "Fake GPU"}, "workloads": [{"id": "w"}],
                                   "records": records})


def test_space_option_adds_files_to_the_folder_and_runs_stop_at_the_space_size(tmp_path):
    sb = _script()
    folder = tmp_path / "spaces"
    folder.mkdir()
    (folder / "kt_toy.json").write_text(json.dumps(KT_CACHE))
    extra = _templated_space(tmp_path / "toy.space.json.gz")
    cache, out = tmp_path / "cache", tmp_path / "out"
    assert sb.main(["--spaces", str(folder), "--space", str(extra), "--budget", "12", "--seeds", "3",
                    "--only", "random,exhaustive,evolution", "--jobs", "1", "--cache", str(cache),
                    "--out", str(out), "--tag", "t"]) == 0
    res = json.loads((out / "strategies-t.json").read_text())
    assert res["meta"]["spaces"] == ["kt_toy", "toy:w"]
    assert set(res["summary"]) == {"random", "exhaustive", "evolution"}
    assert "1 given with --space" in res["meta"]["protocol"]["spaces"]
    assert "kt_toy 5, toy:w 9" in res["meta"]["protocol"]["spaces"]
    assert "exhausted" in res["meta"]["protocol"]["budget"]
    for strat in ("random", "exhaustive", "evolution"):
        for space, size in (("kt_toy", 5), ("toy:w", 9)):
            runs = [json.loads(l) for l in (cache / f"{strat}--{space}--b12.jsonl").read_text().splitlines()]
            assert sorted(r["seed"] for r in runs) == [0, 1, 2]
            for r in runs:   # every run evaluated the whole (valid) space, so it found the optimum
                assert r["evaluations"] == size and r["p100"] == 1.0 and r["evals_to_5pct"] <= size
    # the folder alone still works, and a file that is also in the folder is not counted twice
    assert sb.main(["--spaces", str(folder), "--space", str(folder / "kt_toy.json"), "--budget", "12",
                    "--seeds", "3", "--only", "random", "--jobs", "1", "--cache", str(cache), "--out", str(out),
                    "--tag", "t2"]) == 0
    assert json.loads((out / "strategies-t2.json").read_text())["meta"]["spaces"] == ["kt_toy"]


def test_kernel_tuner_sees_a_templated_space_over_the_union_of_its_parameters(tmp_path):
    pytest.importorskip("kernel_tuner")
    sb = _script()
    path = _templated_space(tmp_path / "toy.space.json.gz")
    space = load_space(path, valid_only=True)
    doc, flat = sb.kt_flat_space(space)
    assert doc["tune_params_keys"] == ["B", "C", "W", "template"]
    assert doc["tune_params"]["C"] == [0, 8, 16, 32] and doc["tune_params"]["B"] == [0, 1, 2, 4]
    assert len(doc["cache"]) == len(space) == 9
    assert flat.values == space.values and flat.configs[0] == {"B": 1, "C": 0, "W": 1, "template": "rows"}
    for strat in ("kt:random_sample", "kt:greedy_ils", "kt:genetic_algorithm"):
        r = sb.run_one((strat, str(path), 0, 50))   # budget above the space size: the run ends at the space
        assert r["space"] == "toy:w" and 1 <= r["evaluations"] <= len(space)
        assert r["p50"] <= 1.0 and "kt_capped" in r
    # a Kernel Tuner cache is replayed as recorded, without the stall stop
    (tmp_path / "kt_toy.json").write_text(json.dumps(KT_CACHE))
    r = sb.run_one(("kt:random_sample", str(tmp_path / "kt_toy.json"), 0, 50))
    assert r["evaluations"] == 5 and r["p50"] == 1.0 and "kt_capped" not in r


def test_the_stall_stop_ends_a_run_that_only_repeats(monkeypatch):
    pytest.importorskip("kernel_tuner")
    from types import SimpleNamespace

    from kernel_tuner.runners.simulation import SimulationRunner
    from kernel_tuner.util import TuningBudget

    sb = _script()
    seen_by_runner = []
    monkeypatch.setattr(SimulationRunner, "run", lambda self, ps, opts: seen_by_runner.extend(ps) or [{}] * len(ps))
    stub = SimulationRunner.run
    opts = SimpleNamespace(budget=TuningBudget(max_fevals=100))
    opts.budget.add_evaluations(2)
    with sb.kt_stall_stop(3) as state:
        SimulationRunner.run(None, [(1, "a"), (2, "a")], opts)          # two new configurations
        SimulationRunner.run(None, [(1, "a"), (2, "a")], opts)          # two repeats: below the limit
        assert not state["capped"] and not opts.budget.is_done()
        SimulationRunner.run(None, [(1, "a")], opts)                    # the third repeat in a row
        assert state["capped"] and opts.budget.is_done() and state["proposals"] == 5
    assert SimulationRunner.run is stub and len(seen_by_runner) == 5    # every proposal reached the runner; restored
