"""How one controller gets one device's worker tensors back (the transports of core/execute/shared.py): the arena on
the CPU; on a GPU CUDA IPC where it works between the two processes, else the host arena. Decided once, before the
first candidate is loaded (a probe that fails replaces the worker), by a probe: the worker shares a tensor of known
contents (protocol.ShareRequest) and CUDA IPC is used only when this process opens it and reads those contents. Where
it falls back, `note` says why (the run archives it as a `transport` event). Exports this process does not copy are
released (`release`), so the worker can free them."""

from __future__ import annotations

from typing import Callable

from ...base.records.device import Device
from . import protocol as P
from .shared import Transport, read_all, release_all


class TransportChoice:
    """The transport one evaluator asks its worker for, and why not CUDA IPC where it is not."""

    def __init__(self, device: Device, tensor_device: str, cuda_ipc: bool = True):
        self.device, self.tensor_device = device, tensor_device
        self.ipc: bool | None = None if cuda_ipc else False   # None: not probed yet
        self.note = "" if cuda_ipc else "CUDA IPC turned off (cuda_ipc=False)"

    @property
    def asked(self) -> Transport:
        """The arena on the CPU; on a GPU CUDA IPC unless refused (or turned off), then the host arena. The candidate
        gets CUDA tensors either way."""
        if not self.device.is_cuda:
            return "arena"
        return "cuda-ipc" if self.ipc is not False and self.tensor_device != "cpu" else "host-arena"

    def refuse(self, why: str) -> None:
        """From now on the host arena for this GPU's tensors, and why."""
        self.ipc = False
        self.note = why[:1000]

    def worker_said(self, reply_record) -> None:
        """A Checked or Benched reply whose worker could not export its CUDA buffers (they came in a host arena)."""
        if reply_record.transport_error:
            self.refuse(f"the worker could not export its CUDA buffers: {reply_record.transport_error}")

    def unopened(self, e: Exception) -> None:
        """This process could not open the worker's CUDA IPC handles (the request is asked again)."""
        self.refuse(f"this process could not open the worker's CUDA IPC handles: {type(e).__name__}: {e}")

    @property
    def _gpu(self) -> int | None:
        """The worker's GPU as this process numbers it (None off a GPU)."""
        if not self.device.is_cuda:
            return None
        return int(self.tensor_device.split(":")[1]) if ":" in self.tensor_device else 0

    def own_copy(self, shared) -> list:
        """This process's own copies of shared tensors (nested lists of SharedTensor), on its tensor device."""
        return read_all(shared, self.tensor_device, self._gpu)

    def release(self, shared) -> None:
        """Let the worker free shared tensors this process does not copy (nested lists of SharedTensor): every
        reply that shared tensors by CUDA IPC ends either in `own_copy` or here (core/execute/shared.py)."""
        release_all(shared, self._gpu)

    def decide(self, request: Callable[[P.ShareRequest], object]) -> None:
        """Probe CUDA IPC once on a GPU (`request` sends the worker a ShareRequest and returns its pool.Reply)."""
        if not self.device.is_cuda or self.ipc is not None:
            return
        if self.tensor_device == "cpu":
            return self.refuse(f"the controller does not address {self.device} as a CUDA device of its own (a MIG "
                               f"slice or a GPU it does not see)")
        msg = P.ShareRequest()
        reply = request(msg)
        if reply.status != "ok" or not isinstance(reply.record, P.Shared):
            return self.refuse(f"the CUDA IPC probe got no answer ({reply.status}: {reply.error or reply.log_tail})")
        if reply.record.tensor is None:
            return self.refuse(f"the worker could not export CUDA memory: {reply.record.error}")
        import torch
        try:
            got = self.own_copy([reply.record.tensor])[0]
            ok = torch.equal(got.cpu(), torch.arange(msg.elements, dtype=torch.float32))
        except Exception as e:  # noqa: BLE001 - e.g. the driver refuses the handle across the worker's isolation
            self.release([reply.record.tensor])
            return self.refuse(f"this process could not open the worker's CUDA IPC handle: {type(e).__name__}: {e}")
        if not ok:
            return self.refuse("the worker's CUDA IPC handle opened on other contents than it shared")
        self.ipc = True


__all__ = ["TransportChoice"]
