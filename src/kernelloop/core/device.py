"""What the target device can do: the properties hardware pruning needs, and the environment record."""

from __future__ import annotations

import os
import platform
import socket
import subprocess

from ..base.records import Environment
from ..base.records.device import Device, DeviceProperties

# Used when there is no GPU (interpreter mode): the limits of an NVIDIA H100/H200 (sm_90), so that a space
# pruned on a laptop is the space a Hopper GPU would accept. Marked virtual in every record.
VIRTUAL_HOPPER = DeviceProperties(
    name="virtual sm_90 (interpreter)",
    virtual=True,
    sm_count=132,
    max_threads_per_block=1024,
    max_threads_per_sm=2048,
    regs_per_sm=65536,
    max_regs_per_thread=255,
    shared_per_block_optin=232448,
    shared_per_sm=233472,
    l2_bytes=50331648,
    warp_size=32,
    capability=(9, 0),
)


def cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - a broken CUDA install means: no GPU here
        return False


def device_properties(device: Device | str) -> DeviceProperties:
    """Properties of a GPU (`cuda`: GPU 0; `cuda:N`: GPU N) or the virtual Hopper (`interpret`)."""
    device = Device.of(device)
    if not device.is_cuda:
        return VIRTUAL_HOPPER
    import torch
    where = device.controller_tensor_device
    p = torch.cuda.get_device_properties(torch.device(where if where != "cpu" else "cuda"))
    return DeviceProperties(
        name=p.name,
        virtual=False,
        sm_count=p.multi_processor_count,
        max_threads_per_block=getattr(p, "max_threads_per_block", 1024),
        max_threads_per_sm=getattr(p, "max_threads_per_multi_processor", 2048),
        regs_per_sm=getattr(p, "regs_per_multiprocessor", 65536),
        max_regs_per_thread=255,
        shared_per_block_optin=getattr(p, "shared_memory_per_block_optin", 49152),
        shared_per_sm=getattr(p, "shared_memory_per_multiprocessor", 49152),
        l2_bytes=getattr(p, "L2_cache_size", 50 * 2**20),
        warp_size=getattr(p, "warp_size", 32),
        capability=(p.major, p.minor),
        total_memory=p.total_memory,
    )


def driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def environment(device: Device | str) -> Environment:
    """The environment record of a device: its kind (not its ordinal: GPUs of one model are one environment), the
    GPU's name, driver, versions, properties and the workers' confinement."""
    import torch
    import triton
    device = Device.of(device)
    props = device_properties(device)
    return Environment(
        device=str(device.kind_only),
        gpu="" if not device.is_cuda else props.name,
        driver="" if not device.is_cuda else driver_version(),
        cuda=str(torch.version.cuda or ""),
        torch=torch.__version__,
        triton=triton.__version__,
        python=platform.python_version(),
        host=socket.gethostname() if os.environ.get("KERNELLOOP_RECORD_HOST", "1") == "1" else "",
        properties=props,
        sandbox=_sandbox(),
    )


def _sandbox() -> str:
    """The confinement workers get (core/execute/pool.py starts them the same way)."""
    from .sandbox.policy import SANDBOX_ENV, os_layer
    if os.environ.get(SANDBOX_ENV, "on") == "off":
        return "off"
    return f"audit hook; os layer: {os_layer()}"
