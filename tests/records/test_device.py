"""Device: parsed from and written as its text; what a worker of one device sees; one model per run."""

import pytest

from kernelloop.core.execute.executor import check_one_model, resolve_devices
from kernelloop.core.execute.pool import worker_visible_devices
from kernelloop.tune.loop import RunOptions
from kernelloop.base.records.device import Device


@pytest.mark.parametrize("text", ["cuda", "cuda:1", "cuda:MIG-4f1c2d", "cuda:GPU-8e0f", "interpret", "interpret:2"])
def test_a_device_round_trips_through_its_text(text):
    d = Device.of(text)
    assert str(d) == text and Device.model_validate(d.model_dump()) == d
    assert d.is_cuda == text.startswith("cuda") and d.interpreted == (not d.is_cuda)


def test_bad_devices_are_refused_and_options_store_text():
    for bad in ("tpu", "cuda:x", "interpret:MIG-1", ""):
        with pytest.raises(ValueError):
            Device.of(bad)
    opts = RunOptions(device="interpret", devices=["interpret:0", "interpret:1"])
    assert opts.as_dict()["device"] == "interpret" and opts.as_dict()["devices"] == ["interpret:0", "interpret:1"]
    assert RunOptions.model_validate(opts.as_dict()) == opts
    assert Device.of("cuda:3").tensor_device == "cuda" and Device.of("cuda:3").controller_tensor_device == "cuda:3"
    assert Device.of("interpret:1").controller_tensor_device == "cpu" and Device.of("cuda:3").kind_only == Device.of("cuda")


def test_a_worker_sees_only_its_own_gpu():
    assert worker_visible_devices(Device.of("cuda"), "0,1") is None          # the default GPU: left as it is
    assert worker_visible_devices(Device.of("cuda:1"), None) == "1"
    assert worker_visible_devices(Device.of("cuda:1"), "4,6") == "6"         # the controller's numbering
    assert worker_visible_devices(Device.of("cuda:MIG-ab"), "0") == "MIG-ab"
    assert worker_visible_devices(Device.of("interpret:1"), "0") is None
    with pytest.raises(ValueError, match="sees 2 GPU"):
        worker_visible_devices(Device.of("cuda:2"), "4,6")


def test_interpreter_devices_and_one_model_per_run():
    assert resolve_devices(Device.of("interpret"), None) == [Device.of("interpret")]
    two = [Device.of("interpret:0"), Device.of("interpret:1")]
    assert resolve_devices(Device.of("interpret"), two) == two
    with pytest.raises(ValueError):
        resolve_devices(Device.of("interpret"), [Device.of("cuda:0")])
    check_one_model({"cuda:0": "NVIDIA H200", "cuda:1": "NVIDIA H200"})
    assert resolve_devices(Device.of("interpret:1"), None) == [Device.of("interpret:1")]
    with pytest.raises(ValueError, match="one device model"):
        check_one_model({"cuda:0": "NVIDIA H200", "cuda:1": "NVIDIA H100"})


def test_the_devices_option_takes_a_count_or_a_list_of_one_kind():
    from kernelloop.deliver import api
    assert api.parse_devices(None, "interpret") is None
    assert api.parse_devices(2, "interpret") == [Device.of("interpret:0"), Device.of("interpret:1")]
    assert api.parse_devices("cuda:0, cuda:2", "cuda") == [Device.of("cuda:0"), Device.of("cuda:2")]
    for bad in ("cuda:0", "0", "tpu:1"):
        with pytest.raises(api.UsageError):
            api.parse_devices(bad, "interpret")
    with pytest.raises(api.UsageError) as e:   # the parser's message alone, no pydantic report around it
        api.parse_devices("abc", "interpret")
    assert str(e.value) == ("devices 'abc': unknown device 'abc': expected cuda, cuda:N, cuda:MIG-..., interpret or "
                            "interpret:N")
    with pytest.raises(api.UsageError, match="executor 'mpi'"):
        api.check_executor("mpi")


def test_a_run_on_one_named_gpu_runs_there_alone(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    # `--device cuda:1` without --devices: GPU 1 only, not every GPU of GPU 0's model
    assert resolve_devices(Device.of("cuda:1"), None) == [Device.of("cuda:1")]
    assert resolve_devices(Device.of("cuda"), None) == [Device.of(f"cuda:{i}") for i in range(4)]
    with pytest.raises(ValueError, match="has 4 GPU"):
        resolve_devices(Device.of("cuda:7"), None)


def test_a_gpu_the_controller_does_not_see_is_refused_by_name(monkeypatch):
    """The controller regenerates each case's inputs on the worker's GPU: a UUID it does not see (its tensors would
    be drawn on the CPU) is refused, not run with every honest kernel judged wrong."""
    import torch
    import kernelloop.base.records.device as dev
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "NVIDIA H200")
    monkeypatch.setattr(dev, "cuda_ordinal", lambda uuid: 0 if uuid == "GPU-8e0f" else None)
    assert resolve_devices(Device.of("cuda"), [Device.of("cuda:GPU-8e0f")]) == [Device.of("cuda:GPU-8e0f")]
    for named in ("cuda:MIG-4f1c2d", "cuda:GPU-77aa"):
        with pytest.raises(ValueError, match=named.removeprefix("cuda:")):
            resolve_devices(Device.of("cuda"), [Device.of(named)])
        with pytest.raises(ValueError, match="sees no GPU"):
            resolve_devices(Device.of(named), None)


def test_the_device_kind_is_an_enum_asked_through_predicates():
    from kernelloop.base.records.device import DeviceKind
    assert Device.of("interpret:1").kind is DeviceKind.INTERPRET and Device.of("cuda:2").kind is DeviceKind.CUDA
    assert Device.of("interpret").is_interpret and not Device.of("cuda").is_interpret
    assert Device(kind=DeviceKind.CUDA, index=1) == Device.of("cuda:1") and str(Device(kind="interpret")) == "interpret"
    assert Device.named(None) is None and Device.named("NVIDIA H200") is None and Device.named("cuda").is_cuda


def test_device_properties_are_a_record_whose_json_is_the_old_mapping():
    import json

    from kernelloop.base.records import Environment
    from kernelloop.base.records.device import DeviceProperties
    from kernelloop.core.device import VIRTUAL_HOPPER, device_properties
    props = device_properties("interpret")
    assert isinstance(props, DeviceProperties) and props.virtual and props.capability == (9, 0)
    dumped = props.model_dump(mode="json")
    assert "total_memory" not in dumped and dumped["capability"] == [9, 0]   # the keys archives always held
    assert DeviceProperties.model_validate(dumped) == props
    with pytest.raises(ValueError):
        DeviceProperties.model_validate({**dumped, "sm_cuont": 1})           # a misspelt property is refused
    gpu = VIRTUAL_HOPPER.with_(virtual=False, name="NVIDIA H200", total_memory=150 << 30)
    assert gpu.model_dump()["total_memory"] == 150 << 30
    env = Environment(device="cuda", torch="t", triton="t", python="p", host="h", properties=gpu)
    back = Environment.model_validate(json.loads(json.dumps(env.model_dump(mode="json"))))
    assert back == env and back.properties.sm_count == 132 and back.device.is_cuda
    assert Environment(device="interpret", torch="t", triton="t", python="p", host="h", properties={}).properties is None
