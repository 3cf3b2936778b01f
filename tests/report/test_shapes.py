"""Robustness across shapes of a multi-workload recorded space (kernelloop.deliver.report.shapes, `replay --shapes`)."""

import json

import pytest
from typer.testing import CliRunner

from kernelloop.cli import common
from kernelloop.cli.app import app
from kernelloop.deliver.report.shapes import shape_robustness

runner = CliRunner()


def _doc():
    # Two shapes that want opposite block sizes: B=64 wins "small", B=512 wins "large"; B=128 is a compromise.
    times = {16: (9.0, 90.0), 64: (4.0, 60.0), 128: (5.0, 45.0), 512: (12.0, 30.0), 1024: (None, 31.0)}
    return {"format": "kernelloop-space/1", "name": "two-shapes", "op": "toy", "objective": "kernel_us",
            "workloads": [{"id": "w-s", "label": "small", "axes": {"N": 64}, "dtype": "fp16", "weight": 1.0},
                          {"id": "w-l", "label": "large", "axes": {"N": 4096}, "dtype": "fp16", "weight": 1.0}],
            "records": [{"config": {"B": b}, "results": {"w-s": {"value": s, "status": "PASSED" if s else "FAILED"},
                                                         "w-l": {"value": l, "status": "PASSED"}}}
                        for b, (s, l) in times.items()]}


def test_overfitting_and_specialization_are_reported():
    rep = shape_robustness(_doc())
    assert rep["best_per_shape"]["small"] == {"config": {"B": 64}, "time": 4.0}
    assert rep["best_per_shape"]["large"] == {"config": {"B": 512}, "time": 30.0}
    # baseline = each shape's median (small: 9.0 of [4, 5, 9, 12]; large: 45 of [30, 31, 45, 60, 90])
    assert rep["baseline"] == {"small": 9.0, "large": 45.0}
    # best single by geomean: B=128 (sqrt(9/5 * 45/45) = 1.342) beats B=64 (sqrt(2.25 * 0.75) = 1.299)
    b = rep["best_single"]
    assert b["config"] == {"B": 128} and b["geomean_speedup"] == pytest.approx((9 / 5 * 45 / 45) ** 0.5)
    assert b["worst_shape"] == "large" and b["ratio_to_best"] == {"small": 1.25, "large": 1.5}
    # each shape's winner, shipped for the other: 64 on large is 2x its best; 512 on small 3x; 1024 fails on small
    assert rep["overfitting"]["small"]["largest_loss"] == pytest.approx(2.0)
    assert rep["overfitting"]["large"]["on_other_shapes"]["small"] == pytest.approx(3.0)
    # a dispatcher of two configurations serves both at their best
    sp = rep["specialization"]
    assert {json.dumps(c) for c in sp["configs"]} >= {json.dumps({"B": 64}), json.dumps({"B": 512})}
    chosen = {lab: sp["configs"][i] for lab, i in sp["assignment"].items()}
    assert chosen == {"small": {"B": 64}, "large": {"B": 512}}
    assert sp["geomean_speedup"] == pytest.approx((9 / 4 * 45 / 30) ** 0.5) and sp["worst_speedup"] == 1.5


def test_one_shape_is_refused():
    doc = _doc()
    doc["workloads"] = doc["workloads"][:1]
    with pytest.raises(ValueError, match="at least two workloads"):
        shape_robustness(doc)


def test_cli_replay_shapes(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps(_doc()))
    r = runner.invoke(app, ["replay", str(p), "--shapes"])
    assert r.exit_code == 0, r.output
    assert "best single configuration: B=128" in r.output and "specialization: 2 configuration(s)" in r.output
    r = runner.invoke(app, ["replay", str(p), "--shapes", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["best_single"]["worst_shape"] == "large"
    one = _doc()
    one["workloads"] = one["workloads"][:1]
    for rec in one["records"]:
        rec["results"].pop("w-l")
    p.write_text(json.dumps(one))
    r = runner.invoke(app, ["replay", str(p), "--shapes"])
    assert r.exit_code == common.BAD_INPUT and "at least two workloads" in r.output
