"""The FlashInfer-Trace hardware name of a run's environment: the GPU's, the interpreter's, or the device's text."""

from kernelloop.deliver.interop.export import hardware_name


def test_hardware_name_reads_the_device_kind():
    assert hardware_name({"device": "cuda", "gpu": "NVIDIA H200"}) == "NVIDIA_H200"
    assert hardware_name({"device": "interpret", "gpu": ""}) == "cpu_triton_interpreter"
    assert hardware_name({"device": "interpret:1"}) == "cpu_triton_interpreter"   # a worker's device names its kind
    assert hardware_name({"device": "tpu"}) == "tpu" and hardware_name({}) == "unknown"
    assert hardware_name(None) == "cuda"
