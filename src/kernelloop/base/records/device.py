"""Where candidates run: a `Device` record instead of device strings.

A device is a CUDA GPU (`cuda`; one of several: `cuda:1`; a MIG slice or a GPU named by its UUID:
`cuda:MIG-...`, `cuda:GPU-...`) or the Triton interpreter on the CPU (`interpret`; one of several interpreter
workers: `interpret:1`). It is written as that text wherever it is stored (run options, the archive, a worker's
command line) and read back from it, so archives written when the device was a plain string read back unchanged.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, model_serializer, model_validator

from .base import Record



class DeviceKind(StrEnum):
    """What kind of device runs candidates; its value is the text stored and typed on the command line. Code asks a
    `Device` (`is_cuda`, `is_interpret`) rather than comparing this text."""

    CUDA = "cuda"
    INTERPRET = "interpret"


KINDS = tuple(k.value for k in DeviceKind)


class Device(Record):
    """A CUDA GPU (all of them, one by ordinal, or one by UUID / MIG slice) or the Triton interpreter."""

    kind: DeviceKind = Field(description="'cuda': a GPU; 'interpret': the Triton interpreter on CPU tensors.")
    index: int | None = Field(None, ge=0, description="The GPU's ordinal (or the interpreter worker's number); "
                                                      "None: the default one.")
    uuid: str | None = Field(None, description="A GPU or MIG slice named by its UUID (GPU-..., MIG-...).")

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        if isinstance(data, str):
            return cls._parse(data)
        return data

    @staticmethod
    def _parse(text: str) -> dict:
        kind, _, rest = text.strip().partition(":")
        if kind not in KINDS:
            raise ValueError(f"unknown device {text!r}: expected cuda, cuda:N, cuda:MIG-..., interpret or "
                             f"interpret:N")
        if not rest:
            return {"kind": kind}
        if rest.isdigit():
            return {"kind": kind, "index": int(rest)}
        if kind == DeviceKind.CUDA and rest.startswith(("GPU-", "MIG-")):
            return {"kind": kind, "uuid": rest}
        raise ValueError(f"unknown device {text!r}: after 'cuda:' an ordinal or a GPU-/MIG- UUID")

    @model_serializer
    def _as_text(self) -> str:
        return str(self)

    def __str__(self) -> str:
        tail = self.uuid if self.uuid is not None else (str(self.index) if self.index is not None else "")
        return f"{self.kind.value}:{tail}" if tail else self.kind.value

    @classmethod
    def of_environment(cls, environment: dict) -> "Device":
        """The device an archived environment record (its dict) names; 'interpret' when it names none."""
        return cls.of(environment.get("device") or DeviceKind.INTERPRET)

    @classmethod
    def of(cls, device: "Device | str") -> "Device":
        """A Device from itself or its text."""
        return device if isinstance(device, Device) else cls.model_validate(device)

    @classmethod
    def named(cls, device: "Device | str | None") -> "Device | None":
        """A Device from itself or its text; None for None or text that names no device (an archive's free text)."""
        if device is None or isinstance(device, Device):
            return device
        try:
            return cls.model_validate(device)
        except ValueError:
            return None

    @property
    def is_cuda(self) -> bool:
        """A GPU (compiled kernels, CUDA tensors, the CUDA timer)."""
        return self.kind is DeviceKind.CUDA

    @property
    def is_interpret(self) -> bool:
        """The Triton interpreter on CPU tensors: verdicts real, timings interpreter wall clock."""
        return self.kind is DeviceKind.INTERPRET

    interpreted = is_interpret

    @property
    def tensor_device(self) -> str:
        """The torch device of its tensors, in a process that sees only this device ('cuda' or 'cpu')."""
        return "cuda" if self.is_cuda else "cpu"

    @property
    def controller_tensor_device(self) -> str:
        """The torch device on which the controller (which sees every GPU) holds this device's tensors: 'cuda:N' for a
        GPU by ordinal, 'cuda' for the default one, the ordinal of a UUID among the visible GPUs, else 'cpu' (a GPU
        or MIG slice the controller cannot address; execute.executor.resolve_devices refuses to run on one, since the
        controller's regeneration of the inputs on the CPU would differ from the worker's draws on the GPU)."""
        if not self.is_cuda:
            return "cpu"
        if self.index is not None:
            return f"cuda:{self.index}"
        if self.uuid is None:
            return "cuda"
        ordinal = cuda_ordinal(self.uuid)
        return f"cuda:{ordinal}" if ordinal is not None else "cpu"

    @property
    def kind_only(self) -> "Device":
        """The device without its ordinal or UUID: what a run's manifest and options name."""
        return Device(kind=self.kind)


class DeviceProperties(Record):
    """What a device can do: the limits pruning, the static gate and schedule checks hold candidates to
    (`core.device.device_properties`), archived with a run's environment. Its JSON is the mapping it replaced (the
    same keys, `total_memory` absent where unknown), so manifests hashed over it do not change."""

    name: str = Field(description="The GPU's name, or the virtual device's ('virtual sm_90 (interpreter)').")
    virtual: bool = Field(description="Limits assumed (the interpreter's stand-in for an sm_90 GPU), not read off a "
                                      "GPU.")
    sm_count: int = Field(ge=0, description="Streaming multiprocessors.")
    max_threads_per_block: int = Field(ge=1, description="Threads a program may have.")
    max_threads_per_sm: int = Field(ge=1, description="Resident threads an SM holds.")
    regs_per_sm: int = Field(ge=1, description="32-bit registers of an SM's register file.")
    max_regs_per_thread: int = Field(ge=1, description="Registers a thread may address before spilling.")
    shared_per_block_optin: int = Field(ge=0, description="Shared memory a program may opt in to, bytes.")
    shared_per_sm: int = Field(ge=0, description="Shared memory of an SM, bytes.")
    l2_bytes: int = Field(ge=0, description="L2 cache, bytes.")
    warp_size: int = Field(ge=1, description="Threads a warp.")
    capability: tuple[int, int] = Field(description="Compute capability (major, minor).")
    total_memory: int | None = Field(None, description="Device memory, bytes (None for the virtual device).")

    @model_serializer(mode="wrap")
    def _omit_unknown_memory(self, handler):
        data = handler(self)
        if data.get("total_memory", 0) is None:
            del data["total_memory"]
        return data

    def with_(self, **changes: Any) -> "DeviceProperties":
        """A copy with some properties changed, validated (e.g. `HOPPER.with_(capability=(8, 0))`)."""
        return DeviceProperties.model_validate({**self.model_dump(), **changes})


def cuda_ordinal(uuid: str) -> int | None:
    """The ordinal of the visible GPU whose UUID is `uuid` (GPU-... or MIG-...), None when none is."""
    import torch
    want = uuid.removeprefix("GPU-").removeprefix("MIG-")
    for i in range(torch.cuda.device_count()):
        got = str(getattr(torch.cuda.get_device_properties(i), "uuid", ""))
        if got and got.removeprefix("GPU-").removeprefix("MIG-") == want:
            return i
    return None


__all__ = ["Device", "DeviceKind", "DeviceProperties", "cuda_ordinal"]
