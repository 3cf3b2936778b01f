"""benchmarks/render.py: the markdown table of `kernelloop optimize --json` summaries."""

import math
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _render():
    """The script's functions (it is a script, not a module of the package)."""
    return SimpleNamespace(**runpy.run_path(str(ROOT / "benchmarks" / "render.py")))


def _workload(label, weight, us, baselines):
    return {"label": label, "weight": weight, "best": {"label": "tiled(X=1)"},
            "confirmed": {"kernel_us": us, "kernel_ci_us": [us - 1, us + 1], "call_us": us + 50,
                          "roofline_fraction": None,
                          "baselines": {n: {"kernel_us": b} for n, b in baselines.items()},
                          "speedups": {n: {"speedup": b / us, "ci": [b / us - 0.01, b / us + 0.01],
                                           "verdict": "FASTER" if b > us else "SLOWER"}
                                       for n, b in baselines.items() if n != "copy"}}}


def summary(workloads):
    return {"op": "gemm", "device": "cuda", "gpu": "H200", "torch": "2.11", "triton": "3.6", "run": "r-1",
            "counts": {"PASSED": 3}, "costs": {"wall_s": 10.0}, "workloads": workloads}


def test_columns_follow_the_baselines_the_run_confirmed_against_and_geomeans_are_weighted():
    mod = _render()
    s = summary([_workload("a", 2.0, 100.0, {"cublas": 50.0}), _workload("b", 1.0, 100.0, {"cublas": 200.0}),
                 {"label": "c", "weight": 1.0, "confirmed": None}])
    text = mod.render(s)
    header = next(line for line in text.splitlines() if line.startswith("| workload"))
    assert header.split(" | ")[4:] == ["cublas µs", "vs cublas |"]
    assert "| a | tiled(X=1) | 100.00 [99.00, 101.00] | 150.0 | 50.0 | 0.500 [0.490, 0.510] SLOWER |" in text
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    assert rows["| c"] == "| c | no passing candidate | | | | |"          # as many cells as the header
    assert rows["| c"].count("|") == header.count("|")
    plain, weighted, n = mod.geomeans(s, "cublas")
    assert n == 2 and math.isclose(plain, 1.0) and math.isclose(weighted, math.exp((2 * math.log(0.5)
                                                                                      + math.log(2.0)) / 3))
    assert f"Geometric mean vs cublas: 1.000× (weighted {weighted:.3f}×) over 2 workload(s)." in text


def test_the_copy_gives_the_share_of_copy_column_and_no_speed_up_column():
    mod = _render()
    w = _workload("a", 1.0, 20.0, {"copy": 19.0, "eager": 30.0, "liger": 22.0})
    w["confirmed"]["roofline_fraction"] = 0.95
    text = mod.render(summary([w]))
    header = next(line for line in text.splitlines() if line.startswith("| workload"))
    assert header.split(" | ")[4:] == ["copy µs", "eager µs", "liger µs", "% of copy", "vs eager", "vs liger |"]
    assert "| 19.0 | 30.0 | 22.0 | 95.0 | 1.500" in text
    assert mod.geomeans(summary([w]), "copy") is None


def test_a_workload_searched_but_not_confirmed_shows_its_search_time_with_as_many_cells():
    mod = _render()
    w = {"label": "d", "weight": 1.0, "confirmed": None,
         "best": {"label": "tiled(X=2)", "search": {"kernel_us": 12.5}}}
    text = mod.render(summary([_workload("a", 1.0, 10.0, {"cublas": 9.0}), w]))
    header = next(line for line in text.splitlines() if line.startswith("| workload"))
    row = next(line for line in text.splitlines() if line.startswith("| d "))
    assert row.startswith("| d | tiled(X=2) | 12.50 (search; not confirmed) |")
    assert row.count("|") == header.count("|")


def test_combine_keeps_each_workloads_last_confirmation_and_names_its_run():
    mod = _render()
    a = summary([{**_workload("a", 1.0, 100.0, {"cublas": 50.0}), "id": "w-a"},
                 {**_workload("b", 1.0, 100.0, {"cublas": 100.0}), "id": "w-b"}])
    b = {**summary([{**_workload("a", 1.0, 50.0, {"cublas": 50.0}), "id": "w-a"},
                    {"label": "b", "id": "w-b", "weight": 1.0, "confirmed": None}]), "run": "r-2"}
    both = mod.combine([a, b])
    rows = {w["id"]: w for w in both["workloads"]}
    assert rows["w-a"]["run"] == "r-2" and rows["w-a"]["confirmed"]["kernel_us"] == 50.0   # the later confirmation
    assert rows["w-b"]["run"] == "r-1" and rows["w-b"]["confirmed"]["kernel_us"] == 100.0  # not lost to r-2's miss
    assert both["runs"] == ["r-1", "r-2"] and both["counts"] == {"PASSED": 6}
    plain, _, n = mod.geomeans(both, "cublas")
    assert n == 2 and math.isclose(plain, 1.0)
    text = mod.render_combined(both)
    assert "| r-2 | a | tiled(X=1) | 50.00" in text and "| r-1 | b |" in text
    assert "Combines 2 run(s)" in text
    header = next(line for line in text.splitlines() if line.startswith("| run | workload"))
    assert all(line.count("|") == header.count("|") for line in text.splitlines() if line.startswith("|"))
    with pytest.raises(ValueError, match="one op"):
        mod.combine([a, {**b, "op": "attention"}])
