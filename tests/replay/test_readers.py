"""Kernel Tuner caches (plain, gzipped, left open) and kernelloop space files."""

import gzip
import json

import pytest

from kernelloop.tune.replay import load_space
from kernelloop.tune.replay.space_file import FORMAT, write_space_file

CACHE = {
    "device_name": "Fake GPU", "kernel_name": "k", "problem_size": [64], "objective": "time",
    "tune_params_keys": ["bx", "tile"], "tune_params": {"bx": [32, 64], "tile": [1, 2]},
    "cache": {
        "32,1": {"bx": 32, "tile": 1, "time": 2.0, "timestamp": "2023-01-01"},
        "32,2": {"bx": 32, "tile": 2, "time": "RuntimeFailedConfig"},
        "64,1": {"bx": 64, "tile": 1, "time": 1.5},
        "64,2": {"bx": 64, "tile": 2, "time": "InvalidConfig"},
    },
}


def test_kernel_tuner_cache_plain_gz_and_open(tmp_path):
    text = json.dumps(CACHE)
    (tmp_path / "a.json").write_text(text)
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(text.encode()))
    open_text = text[: text.rindex("}")].rstrip()[:-1].rstrip() + ","     # what a running Kernel Tuner leaves
    (tmp_path / "c.json").write_text(open_text)
    for name in ("a.json", "b.json.gz", "c.json"):
        s = load_space(tmp_path / name)
        assert s.params == ["bx", "tile"]
        assert [c for c in s.configs] == [{"bx": 32, "tile": 1}, {"bx": 32, "tile": 2}, {"bx": 64, "tile": 1}]
        assert s.values == [2.0, None, 1.5] and s.statuses[1] == "RuntimeFailedConfig"
        assert s.optimum == 1.5 and s.n_failed == 1
        assert s.meta["device_name"] == "Fake GPU"
    assert len(load_space(tmp_path / "a.json", valid_only=True)) == 2


def test_not_a_space_is_an_error(tmp_path):
    (tmp_path / "x.json").write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="neither"):
        load_space(tmp_path / "x.json")
    with pytest.raises(FileNotFoundError):
        load_space(tmp_path / "missing.json")


def doc():
    return {"format": FORMAT, "name": "toy", "op": "rmsnorm", "objective": "kernel_us",
            "workloads": [{"id": "w1", "label": "small", "weight": 3.0}, {"id": "w2", "label": "large", "weight": 1.0}],
            "records": [
                {"config": {"template": "t", "B": 1}, "results": {"w1": {"value": 10.0}, "w2": {"value": 100.0}}},
                {"config": {"template": "t", "B": 2}, "results": {"w1": {"value": 5.0}, "w2": {"value": 120.0}}},
                {"config": {"template": "t", "B": 4}, "results": {"w1": {"value": None, "status": "WRONG_VALUES"},
                                                                   "w2": {"value": 80.0}}},
            ]}


def test_space_file_round_trip_one_workload_and_geomean(tmp_path):
    path = write_space_file(tmp_path / "s.json.gz", doc())
    one = load_space(path, workload="small")
    assert one.values == [10.0, 5.0, None] and one.statuses[2] == "WRONG_VALUES"
    both = load_space(path)
    # baseline = the median per workload (w1: 10, w2: 100); B=2 is 2x on w1 and 0.83x on w2, weighted 3:1
    assert both.values[1] == pytest.approx(1 / (2 ** 0.75 * (100 / 120) ** 0.25))
    assert both.values[2] is None
    limited = load_space(path, min_speedup=0.9)
    assert limited.values[1] is None and limited.values[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no workload"):
        load_space(path, workload="huge")


def test_a_workload_nothing_was_measured_on_is_named_with_the_ones_to_replay(tmp_path):
    """`record --limit N` can leave a workload with no measured configuration; replaying every workload is then
    refused naming it by label (it gave its id only) and the workloads --workload can replay."""
    d = doc()
    for r in d["records"]:
        r["results"]["w2"] = {"value": None, "status": "PRUNED"}
    path = write_space_file(tmp_path / "s.json", d)
    with pytest.raises(ValueError, match=r"workload large: no configuration .* measured on it; .* --workload small$"):
        load_space(path)
    assert load_space(path, workload="small").values == [10.0, 5.0, None]


def test_space_file_validation_names_the_field(tmp_path):
    bad = doc()
    bad["records"][0]["results"]["w9"] = {"value": 1.0}
    with pytest.raises(ValueError, match="unknown workload 'w9'"):
        write_space_file(tmp_path / "bad.json", bad)
    bad = doc()
    bad["records"].append(dict(bad["records"][0]))
    with pytest.raises(ValueError, match="repeats"):
        write_space_file(tmp_path / "bad.json", bad)


def test_workload_spaces_and_the_prior_of_a_recording(tmp_path):
    import hashlib

    from kernelloop.tune.replay.load import load_workload_spaces
    from kernelloop.tune.replay.prior import read_prior
    from kernelloop.tune.search.encoding import config_key
    from kernelloop.tune.search.history import TransferPrior

    path = write_space_file(tmp_path / "s.json.gz", doc())
    w1, w2 = load_workload_spaces(path)
    assert (w1.meta["workload"], w1.values, w2.values) == ("w1", [10.0, 5.0, None], [100.0, 120.0, 80.0])
    (kt,) = load_workload_spaces(_cache_file(tmp_path))
    assert kt.values == [2.0, None, 1.5]
    rec = read_prior(path, "rmsnorm")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert rec.as_dict() == {"files": [{"path": str(path), "sha256": sha}], "path": str(path), "sha256": sha,
                             "configurations": 3}
    assert set(rec.prior.workloads) == {"w1", "w2"} and rec.prior.workloads["w1"][config_key(
        {"template": "t", "B": 2})] == 0.0, "each recorded workload's own times over its best, in logs"
    # every PASSED time over its workload's best: w1 10/5, 5/5; w2 100/80, 120/80, 80/80
    by_hand = TransferPrior([{"template": "t", "B": b} for b in (1, 2, 1, 2, 4)], [2.0, 1.0, 1.25, 1.5, 1.0])
    configs = [{"template": "t", "B": b} for b in (1, 2, 4)]
    assert rec.prior.scores(configs) == pytest.approx(by_hand.scores(configs))
    with pytest.raises(ValueError, match="a recording of op 'rmsnorm', not 'softmax'"):
        read_prior(path, "softmax")
    assert read_prior(_cache_file(tmp_path), "softmax").prior.configurations == 2   # a cache names no op


def _cache_file(tmp_path):
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(CACHE))
    return path
