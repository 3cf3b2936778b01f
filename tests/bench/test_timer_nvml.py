"""Which GPU the timing environment's NVML snapshot describes (core/bench/timer.py): NVML ignores CUDA_VISIBLE_DEVICES,
so a worker that sees one GPU of several finds its own by UUID, never GPU 0 of the host by default."""

import types

import pytest
import torch

from kernelloop.core.bench import timer


class _Nvml:
    def __init__(self, uuids):
        self.uuids = uuids

    def nvmlDeviceGetHandleByUUID(self, text):
        if text not in self.uuids:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return ("handle", self.uuids.index(text))

    def nvmlDeviceGetCount(self):
        return len(self.uuids)

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("handle", i)


@pytest.fixture
def current_gpu(monkeypatch):
    def set_uuid(uuid):
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(uuid=uuid))
    return set_uuid


def test_the_worker_gpu_is_found_by_its_uuid_among_the_hosts(current_gpu):
    current_gpu("5c1d-0003")   # torch writes the UUID without NVML's prefix
    assert timer.nvml_handle(_Nvml(["GPU-5c1d-0000", "GPU-5c1d-0003"])) == ("handle", 1)


def test_index_zero_only_where_nvml_sees_one_gpu(current_gpu):
    current_gpu("")
    assert timer.nvml_handle(_Nvml(["GPU-only"])) == ("handle", 0)
    with pytest.raises(RuntimeError, match="among 2"):
        timer.nvml_handle(_Nvml(["GPU-a", "GPU-b"]))


def test_a_mig_slice_is_found_by_its_mig_uuid(current_gpu):
    current_gpu("7a2b-0001")   # a worker on a MIG slice: NVML names it MIG-..., never GPU-...
    assert timer.nvml_handle(_Nvml(["GPU-5c1d-0000", "MIG-7a2b-0001"])) == ("handle", 1)
    current_gpu("MIG-7a2b-0001")   # already prefixed: asked as it is
    assert timer.nvml_handle(_Nvml(["GPU-5c1d-0000", "MIG-7a2b-0001"])) == ("handle", 1)
