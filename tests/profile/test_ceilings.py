"""The ceilings cache (CPU) and the ceiling measurements (gpu tier)."""

import json

import pytest

from kernelloop.tune.profile.ceilings import (CACHE_FORMAT, CeilingPlan, CeilingsCacheError, cache_path, cached_ceilings,
                                         get_ceilings, load_cache, measure_ceilings, store_ceilings)
from kernelloop.base.records import Ceilings, ceilings_key


def _ceil(device="NVIDIA H200", driver="580.159.04", torch="2.11.0", copy=3300.0) -> Ceilings:
    return Ceilings(device=device, driver=driver, torch=torch, copy_gbps=copy, matrix_tflops={"fp16": 700.0},
                    vector_tflops={"fp32": 60.0}, method="test", measured_at=1.0)


def test_cache_round_trip_keyed_by_device_driver_torch(tmp_path):
    path = tmp_path / "c" / "ceilings.json"
    a, b = _ceil(), _ceil(driver="590.1")
    store_ceilings(a, path)
    store_ceilings(b, path)
    store_ceilings(_ceil(copy=3400.0), path)      # same key: replaced
    doc = json.loads(path.read_text())
    assert doc["format"] == CACHE_FORMAT and doc["version"] == 1
    assert sorted(doc["entries"]) == sorted([a.key, b.key])
    assert a.key == ceilings_key("NVIDIA H200", "580.159.04", "2.11.0")
    assert cached_ceilings("NVIDIA H200", "580.159.04", "2.11.0", path).copy_gbps == 3400.0
    assert cached_ceilings("NVIDIA H200", "580.159.04", "2.12.0", path) is None   # other torch: measure again
    assert cached_ceilings("NVIDIA H100", "580.159.04", "2.11.0", path) is None
    assert load_cache(tmp_path / "absent.json") == {}


@pytest.mark.parametrize("content, match", [
    ("not json", "not JSON"), ('{"format": "other"}', "not a kernelloop-ceilings"),
    ('{"format": "kernelloop-ceilings", "version": 9, "entries": {}}', "version 9"),
])
def test_malformed_cache_is_an_error(tmp_path, content, match):
    p = tmp_path / "ceilings.json"
    p.write_text(content)
    with pytest.raises(CeilingsCacheError, match=match):
        load_cache(p)


def test_entry_under_the_wrong_key_is_refused(tmp_path):
    p = tmp_path / "ceilings.json"
    p.write_text(json.dumps({"format": CACHE_FORMAT, "version": 1,
                             "entries": {"NVIDIA H100|driver=1|torch=2": _ceil().model_dump(mode="json")}}))
    with pytest.raises(CeilingsCacheError, match="holds ceilings of"):
        load_cache(p)


def test_cache_location(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELLOOP_CACHE_DIR", str(tmp_path))
    assert cache_path() == tmp_path / "ceilings.json"


SMALL = CeilingPlan(copy_bytes=256 << 20, matmul_n=2048, vector_elems=1 << 20, vector_iters=256, warmup=2, reps=5)


@pytest.mark.gpu
def test_measure_and_cache_on_this_gpu(tmp_path):
    c = measure_ceilings(SMALL)
    assert c.copy_gbps > 100                       # any datacenter GPU copies faster than 100 GB/s
    assert set(c.matrix_tflops) == {"fp16", "bf16", "tf32", "fp32"}
    assert set(c.vector_tflops) == {"fp16", "bf16", "fp32"}
    assert all(v > 0 for v in [*c.matrix_tflops.values(), *c.vector_tflops.values()])
    assert c.matrix_tflops["fp16"] > c.matrix_tflops["fp32"]   # tensor cores vs CUDA cores
    calls = []

    def measure(plan):
        calls.append(plan)
        return c
    path = tmp_path / "ceilings.json"
    first = get_ceilings(path, plan=SMALL, measure=measure)
    again = get_ceilings(path, plan=SMALL, measure=measure)
    assert first == again == c and len(calls) <= 1   # measured at most once (0 if the driver query differs)
