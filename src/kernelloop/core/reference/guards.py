"""Guard zones around every output and workspace buffer the harness hands a candidate.

Each buffer is carved out of a larger flat byte tensor, its *backing*: GUARD_BYTES of a sentinel pattern, the
buffer (poisoned as before), then the sentinel again from the buffer's end up to a GUARD_BYTES boundary and
GUARD_BYTES more. GUARD_BYTES is a multiple of 256, so the buffer starts on the same 256-byte boundary a fresh
allocation (or an arena slice, core/execute/shared.py) has: pointer alignment, and with it Triton's divisibility
specialisation of the pointer, is unchanged.

The worker shares the backings (not the bare buffers) with the controller -- the arena on the CPU, CUDA IPC or the
host arena on a GPU: the same code path -- and the controller, after every call of a case has returned, reads the
guards from its own copy: a byte that no longer holds the sentinel is a write outside the buffer, judged REJECTED
("memory-safety") with the buffer, the side (before / after) and the byte offset from the buffer's start or end.
An element written one past the end, or one before the start, lands in a guard. A write that jumps over a whole guard
(a stride of more than GUARD_BYTES) lands in another buffer of the arena: an input (the mutation check) or another
output; that is not a guard's job.
"""

from __future__ import annotations

import torch

GUARD_BYTES = 1024          # a multiple of 256
SENTINEL = (0xA5, 0x5A, 0xC3, 0x3C)   # the guard's byte pattern, repeated


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def backing_bytes(numel: int, dtype: torch.dtype) -> int:
    """The size of a buffer's backing: guard, the buffer rounded up to GUARD_BYTES, guard."""
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    return 2 * GUARD_BYTES + _round_up(max(nbytes, 1), GUARD_BYTES)


def _pattern(n: int, device) -> torch.Tensor:
    reps = -(-n // len(SENTINEL))
    return torch.tensor(SENTINEL, dtype=torch.uint8).repeat(reps)[:n].to(device)


def fill_guards_(backing: torch.Tensor) -> torch.Tensor:
    """The whole backing set to the sentinel pattern (the buffer is poisoned afterwards by its caller)."""
    backing.copy_(_pattern(backing.numel(), backing.device))
    return backing


def guarded_empty(shape: tuple[int, ...], dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(buffer, backing): a contiguous buffer of `shape` and `dtype` inside a sentinel-filled backing."""
    numel = 1
    for n in shape:
        numel *= n
    backing = fill_guards_(torch.empty(backing_bytes(numel, dtype), dtype=torch.uint8, device=device))
    return unguard(backing, shape, dtype), backing


def unguard(backing: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """The buffer of `shape` and `dtype` inside a backing (a view, not a copy)."""
    numel = 1
    for n in shape:
        numel *= n
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    if backing.dtype != torch.uint8 or backing.dim() != 1 or backing.numel() != backing_bytes(numel, dtype):
        raise ValueError(f"a guarded backing of {backing_bytes(numel, dtype)} bytes was expected, got "
                         f"{tuple(backing.shape)} {backing.dtype}")
    return backing[GUARD_BYTES:GUARD_BYTES + nbytes].view(dtype).view(shape)


def guard_breach(name: str, backing: torch.Tensor, nbytes: int) -> str | None:
    """Where a write left the buffer of `nbytes` bytes inside `backing`, naming the buffer, the side and the byte
    offset of the first changed byte (from the buffer's start, before it; from its end, after it); None if both
    guards still hold the sentinel."""
    want = _pattern(backing.numel(), backing.device)
    changed = backing != want
    changed[GUARD_BYTES:GUARD_BYTES + nbytes] = False
    if not bool(changed.any()):
        return None
    where = torch.nonzero(changed).flatten()
    n = int(where.numel())
    first_before = where[where < GUARD_BYTES]
    if first_before.numel():
        off = int(first_before.max()) - GUARD_BYTES   # the changed byte nearest the start
        return (f"{name}: memory-safety: written before the buffer's start (nearest changed byte at start{off}; "
                f"{n} guard byte(s) changed)")
    off = int(where.min()) - GUARD_BYTES - nbytes
    return (f"{name}: memory-safety: written after the buffer's end (first changed byte at end+{off}; {n} guard "
            f"byte(s) changed)")


__all__ = ["GUARD_BYTES", "backing_bytes", "fill_guards_", "guard_breach", "guarded_empty", "unguard"]
