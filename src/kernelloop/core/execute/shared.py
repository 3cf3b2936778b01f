"""Tensors shared between a worker and the controller without files of serialised tensors.

How a request's tensors come back is its transport (`resolve_transport` decides it in the worker, the reply says
which one ran):
- "arena" (the CPU, the interpreter): the worker places a verification case's tensors -- the inputs it hands the
  candidate, its copy of them from before the first call, and every call's output buffers -- in an arena: one file in
  the job folder (tmpfs where there is one) mapped into both processes. The candidate writes its outputs straight
  into it; the controller maps the same pages and reads the candidate's outputs itself, with no copy made by the
  worker. An arena ends with a page (ARENA_SLACK) after its last buffer's guard, so a write that runs on past that
  guard stays in the case's own mapping, where the guard shows it; and the worker unmaps each case's arena as soon as
  the case's calls have returned (`Arena.close`), so no later case's call can reach an earlier case's tensors -- a
  stray write of a later case lands in its own arena or faults, and is charged to the case that made it, never to
  an earlier case the controller judges first.
- "cuda-ipc" (a GPU): the candidate gets CUDA tensors on the worker's GPU; after the calls those buffers are shared
  through CUDA IPC (torch.multiprocessing's reductions: a memory handle and torch's reference counter) and the
  controller opens them on the same GPU.
- "host-arena" (a GPU whose buffers the controller cannot open: CUDA IPC refused by the driver or the host's
  isolation, a MIG slice the controller cannot address): the candidate still gets CUDA tensors on its GPU; only after
  every call has returned does the worker copy them into a host arena, which the controller maps and moves to its own
  device.

A CUDA run never hands the candidate host tensors: the arena holds the candidate's own tensors only on the CPU.

Either way the controller takes its own copy (`SharedTensor.read` + `clone`) only after the worker replied -- every
call of the request has returned -- and the thread census found nothing left running that could still write.
A CUDA IPC export stays allocated in the worker until the controller has opened and dropped it (torch's reference
count of the export), so a reply whose tensors the controller does not copy -- a verdict before the copy, a request
asked again after an open failed -- has them released (`SharedTensor.release`: opened and dropped, no copy).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
from pathlib import Path
import base64
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PlainSerializer

from ...base.records.base import Record
from ...base.records.device import Device

ALIGN = 256   # bytes: every tensor of an arena starts on this boundary (CUDA-friendly, cache-line aligned)
ARENA_SLACK = mmap.PAGESIZE   # bytes mapped after an arena's last tensor: an overrun past it stays in the arena
TRANSPORTS = ("arena", "cuda-ipc", "host-arena")
Transport = Literal["arena", "cuda-ipc", "host-arena"]


def resolve_transport(device: Device, requested: str) -> Transport:
    """The transport a worker on `device` uses for what the controller asked (`requested`): on the CPU always the
    arena, whose pages are the candidate's own tensors; on a GPU CUDA IPC when asked for, else the host arena (copies
    made after the calls) -- never the CPU's arena, which would hand a CUDA candidate host tensors."""
    if not device.is_cuda:
        return "arena"
    return "cuda-ipc" if requested == "cuda-ipc" else "host-arena"


def _bytes_to_wire(value: Any) -> Any:
    """A CUDA IPC argument in JSON: bytes (memory, event and counter handles) as {"b64": ...}, the rest as it is."""
    if isinstance(value, (bytes, bytearray)):
        return {"b64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def _bytes_from_wire(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) != {"b64"} or not isinstance(value["b64"], str):
            raise ValueError("a CUDA IPC argument is a number, a list of numbers, a flag, None or {'b64': text}")
        return base64.b64decode(value["b64"], validate=True)
    return value


IpcArg = Annotated[Any, BeforeValidator(_bytes_from_wire), PlainSerializer(_bytes_to_wire, when_used="json")]


class SharedTensor(Record):
    """Where to find one tensor the worker shares: a slice of an arena file (CPU), or a CUDA IPC handle."""

    transport: Literal["arena", "cuda-ipc"] = "arena"
    arena: str = Field("", description="The arena file (transport 'arena').")
    offset: int = Field(0, ge=0, description="Byte offset of the tensor's storage in the arena.")
    dtype: str = Field(description="torch dtype name, e.g. 'float16'.")
    shape: list[int]
    stride: list[int]
    ipc: list[IpcArg] | None = Field(None, description="torch.multiprocessing.reductions.rebuild_cuda_tensor's arguments "
                                                    "after its two classes and the dtype (transport 'cuda-ipc').")

    def read(self, device: str = "cpu", gpu: int | None = None, maps: dict | None = None):
        """The shared tensor as a view of the worker's memory (not a copy): its arena mapped copy-on-write (`maps`
        keeps each arena's mapping, so a case's tensors share one), or its CUDA buffer opened on GPU `gpu` (the
        worker's GPU as the controller numbers it)."""
        import torch
        dtype = getattr(torch, self.dtype)
        if self.transport == "cuda-ipc":
            from torch.multiprocessing.reductions import rebuild_cuda_tensor
            (size, stride, offset, storage_device, handle, size_bytes, offset_bytes, ref_handle, ref_offset,
             event_handle, event_sync) = self.ipc
            return rebuild_cuda_tensor(torch.Tensor, tuple(size), tuple(stride), offset, torch.UntypedStorage, dtype,
                                       gpu if gpu is not None else storage_device, handle, size_bytes, offset_bytes,
                                       False, ref_handle, ref_offset, event_handle, event_sync)
        maps = {} if maps is None else maps
        if self.arena not in maps:
            # never through a link, never anything but a regular file (the worker may have placed either there)
            fd = os.open(self.arena, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise OSError(f"arena {self.arena} is not a regular file")
                maps[self.arena] = torch.frombuffer(mmap.mmap(fd, 0, access=mmap.ACCESS_COPY), dtype=torch.uint8)
            finally:
                os.close(fd)
        buf = maps[self.arena]
        extent = _extent(self.shape, self.stride) * torch.empty((), dtype=dtype).element_size()
        view = buf[self.offset:self.offset + extent].view(dtype).as_strided(self.shape, self.stride)
        return view.to(device) if device != "cpu" else view

    def release(self, gpu: int | None = None) -> None:
        """Let the worker free a CUDA IPC export this process does not copy: the buffer is opened and dropped at
        once, so torch's consumer side lowers the export's reference count as after a copy; where it cannot be opened,
        the count is lowered directly (what torch does for a handle this process already has open). Until then the
        worker holds the buffer whatever it drops. Best effort, never raises; nothing to do for an arena slice."""
        if self.transport != "cuda-ipc":
            return
        try:
            self.read("cuda", gpu)
            return
        except Exception:  # noqa: BLE001 - a handle this process cannot open: lower its count without it
            import torch
        with contextlib.suppress(Exception):   # the worker keeps the buffer; one that runs out of memory is replaced
            torch.UntypedStorage._release_ipc_counter(self.ipc[7], self.ipc[8], device=self.ipc[3])


def arenas_outside(record: Any, folder: str | os.PathLike) -> list[str]:
    """The arena files a reply's shared tensors (found anywhere in `record`, a record or nested lists/dicts of them)
    name outside `folder` itself: the controller reads arenas only in the job folder it named."""
    root = os.path.realpath(folder) if folder else ""
    out: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, SharedTensor):
            if x.transport == "arena" and (not root or not os.path.isabs(x.arena)
                                           or os.path.dirname(os.path.realpath(x.arena)) != root):
                out.append(x.arena)
        elif isinstance(x, Record):
            for name in type(x).model_fields:
                walk(getattr(x, name))
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)
    walk(record)
    return out


def _extent(shape, stride) -> int:
    """Elements a strided tensor's storage spans."""
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(shape, stride))


class Arena:
    """A worker's arena file: `tensors` (on any device: a GPU's are copied to the host here) laid out in it, then
    ARENA_SLACK bytes; `views` of it with the same contents and `records` saying where each lies. The mapping lives
    until `close` (the worker's CPU cases: right after the case's calls) or as long as the Arena (the host arena:
    the worker keeps the last request's until the next one)."""

    def __init__(self, path: str | os.PathLike, tensors: list) -> None:
        import torch
        self.path = str(path)
        offsets, total = [], 0
        for t in tensors:
            offsets.append(total)
            total += -(-(_extent(t.shape, t.stride()) * t.element_size()) // ALIGN) * ALIGN
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, total + ARENA_SLACK)
            self._map = mmap.mmap(fd, total + ARENA_SLACK, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        buf = torch.frombuffer(self._map, dtype=torch.uint8)
        self.views, self.records = [], []
        for t, off in zip(tensors, offsets):
            extent = _extent(t.shape, t.stride()) * t.element_size()
            view = buf[off:off + extent].view(t.dtype).as_strided(tuple(t.shape), t.stride())
            view.copy_(t)
            self.views.append(view)
            self.records.append(SharedTensor(arena=self.path, offset=off, dtype=str(t.dtype).removeprefix("torch."),
                                             shape=list(t.shape), stride=list(t.stride())))

    def close(self) -> None:
        """Unmap the arena from this process (the file, and with it what the controller reads, stays). The views are
        dropped; a tensor the candidate kept of it now points at unmapped pages, so touching it faults in the call
        that does -- never writes into a case already run."""
        self.views = []
        self._map.close()


def share_cuda(t) -> SharedTensor:
    """A CUDA tensor of this process shared by IPC handle (raises where the driver or torch refuses)."""
    from torch.multiprocessing.reductions import reduce_tensor
    _, args = reduce_tensor(t)
    (_cls, size, stride, offset, _storage_cls, dtype, storage_device, handle, size_bytes, offset_bytes, _grad,
     ref_handle, ref_offset, event_handle, event_sync) = args
    return SharedTensor(transport="cuda-ipc", dtype=str(dtype).removeprefix("torch."), shape=list(size),
                        stride=list(stride), ipc=[list(size), list(stride), offset, storage_device, handle,
                                                  size_bytes, offset_bytes, ref_handle, ref_offset, event_handle,
                                                  event_sync])


def read_all(groups, device: str = "cpu", gpu: int | None = None) -> list:
    """Own copies of shared tensors (nested lists of SharedTensor, None kept): read, then cloned."""
    maps: dict = {}

    def one(x):
        if x is None:
            return None
        if isinstance(x, list):
            return [one(y) for y in x]
        return x.read(device, gpu, maps).clone()
    return one(groups)


def release_all(groups, gpu: int | None = None) -> None:
    """Release shared tensors this process does not copy (nested lists of SharedTensor, None skipped)."""
    for x in groups or ():
        if isinstance(x, list):
            release_all(x, gpu)
        elif x is not None:
            x.release(gpu)


def remove_arenas(folder: str | os.PathLike) -> None:
    for p in Path(folder).glob("*.arena"):
        p.unlink(missing_ok=True)


__all__ = ["Arena", "arenas_outside", "SharedTensor", "TRANSPORTS", "Transport", "read_all", "release_all", "remove_arenas",
           "resolve_transport", "share_cuda"]
