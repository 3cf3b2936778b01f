"""What a schedule asks of an SM, computed from its fields, and the limits it must stay within.

- shared memory: the ring's a and b slots, the staging buffer(s) of c, 8 bytes an mbarrier, and 256 bytes of
  alignment (Triton 3.9's sm_90 builds of the three Gluon templates were 172-288 bytes above their buffers);
- registers: every role's budget over its threads (the loader's warp holds a whole warpgroup's registers, as
  workers are padded to warpgroups) within the register file; each worker budget a multiple of 8 in [24, 256]
  (`setmaxnreg`); each math thread's accumulator plus ~64 registers of addresses and indices, plus what the fused
  epilogue holds beside them, within its role's budget; the math warps stacked along M, 16 rows each;
- threads per program, and how many programs the registers, shared memory and threads leave room for on one SM.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...base.records.device import DeviceProperties
from ...core.device import VIRTUAL_HOPPER
from .protocol import Finding
from .records import Schedule

ACC_OVERHEAD = 64
"""Registers a math thread needs besides its accumulator (addresses, indices, loop state)."""
ALIGNMENT = 256
EPILOGUE_REGISTERS = {"gelu": 0.5}
"""Registers a math thread holds, per value of one accumulator, while a fused operation runs (the bias slice, SiLU
and ReLU need none beyond the overhead). Triton 3.9's sm_90 builds of the three library schedules at their
configurations (128 accumulator values a thread; one 128-value accumulator, or two of 64) with each epilogue: only
the exact GELU spills, and only over a whole 128-value accumulator (gluon_ws 240 bytes of stack, gluon_pingpong
320); over a 64-value half (gluon_subtiled) it does not. The shared memory is that of the plain store (+16 bytes
for ping-pong), within the ALIGNMENT slack."""


def epilogue_registers(s: Schedule, values: int) -> int:
    """Registers the fused epilogue adds to a math thread holding `values` accumulator values in all."""
    per = values // s.issue.accumulators
    return int(sum(EPILOGUE_REGISTERS.get(op, 0) * per for op in s.epilogue.fused))


@dataclass(frozen=True)
class Footprint:
    shared_bytes: int
    ring_bytes: int
    staging_bytes: int
    barrier_bytes: int
    threads: int
    registers: int          # the maxnreg the kernel is built with
    register_file: int      # registers the roles' budgets take from the file
    ctas_per_sm: int


def footprint(s: Schedule, elem: int = 2, limits: DeviceProperties | None = None) -> Footprint:
    lim = limits or VIRTUAL_HOPPER
    t = s.tile
    ring = s.ring.stages * (t.block_m * t.block_k + t.block_k * t.block_n) * elem
    buffers = len(s.math_roles) if s.issue.tiles == "alternate" else 1
    staging = buffers * t.block_m * t.block_n // s.issue.accumulators * elem if s.epilogue.store == "tma" else 0
    barriers = 8 * (2 * s.ring.stages + sum(b.size for b in s.barriers))
    shared = ring + staging + barriers + ALIGNMENT
    threads = s.launch_warps * 32
    worker_math = sum(r.warps for r in s.roles[1:] if r.kind == "math")
    padded = s.launch_warps - s.roles[0].warps
    used = 0
    for i, r in enumerate(s.roles):
        warps = r.warps if r.kind == "math" or i == 0 else padded - worker_math
        used += r.registers * warps * 32
    regs = s.max_registers
    per_sm = min(lim.regs_per_sm // max(regs * threads, 1), lim.shared_per_sm // (shared + 1024),
                 lim.max_threads_per_sm // threads)
    return Footprint(shared_bytes=shared, ring_bytes=ring, staging_bytes=staging, barrier_bytes=barriers,
                     threads=threads, registers=regs, register_file=used, ctas_per_sm=per_sm)


def check_resources(s: Schedule, elem: int = 2, limits: DeviceProperties | None = None) -> list[Finding]:
    """The device limits the schedule breaks, each naming the field to change."""
    lim = limits or VIRTUAL_HOPPER
    f = footprint(s, elem, lim)
    out: list[Finding] = []
    if f.shared_bytes > lim.shared_per_block_optin:
        field = "ring.stages" if f.ring_bytes >= f.staging_bytes else "epilogue.store"
        out.append(Finding(field, f"needs {f.shared_bytes} bytes of shared memory ({s.ring.stages} ring slots "
                                  f"{f.ring_bytes}, staging {f.staging_bytes}, barriers {f.barrier_bytes}) > "
                                  f"{lim.shared_per_block_optin} a program may have"))
    if f.threads > lim.max_threads_per_block:
        out.append(Finding("roles", f"{f.threads} threads a program > {lim.max_threads_per_block}"))
    for i, r in enumerate(s.roles[1:], 1):
        if r.registers % 8:
            out.append(Finding(f"roles[{i}].registers", f"{r.registers}: a worker's budget (setmaxnreg) is a "
                                                        f"multiple of 8"))
    if f.register_file > lim.regs_per_sm:
        worst = max(range(len(s.roles)), key=lambda i: s.roles[i].registers)
        out.append(Finding(f"roles[{worst}].registers",
                           f"the roles' budgets take {f.register_file} registers > the {lim.regs_per_sm} of the "
                           f"register file ({', '.join(f'{r.name} {r.registers} x {r.warps} warp(s)' for r in s.roles)})"))
    t = s.tile
    for i, r in enumerate(s.roles):
        if r.kind != "math":
            continue
        acc = t.block_m * t.block_n // (r.warps * 32)
        fused = epilogue_registers(s, acc)
        if acc + ACC_OVERHEAD > r.registers:
            out.append(Finding(f"roles[{i}].registers",
                               f"{r.name}'s {t.block_m}x{t.block_n} fp32 accumulator takes {acc} registers a thread "
                               f"(+{ACC_OVERHEAD} for addresses and indices) > its budget of {r.registers}"))
        elif acc + ACC_OVERHEAD + fused > r.registers:
            out.append(Finding("epilogue.fused",
                               f"{s.epilogue.fused} on {r.name}'s {acc} accumulator registers a thread (+{ACC_OVERHEAD} "
                               f"for addresses and indices) holds {fused} more registers > its budget of "
                               f"{r.registers} (it would spill): two half-width accumulators (issue.accumulators) "
                               f"or a smaller tile"))
        if t.block_m < 16 * r.warps:
            out.append(Finding("tile.block_m", f"{r.name}'s {r.warps} warps stack along M, 16 rows each (a warpgroup "
                                               f"64): block_m {t.block_m} is too short"))
        if r.warps % 4:
            out.append(Finding(f"roles[{i}].warps", "a math role issues warpgroup MMAs: whole warpgroups of 4 warps"))
    if f.ctas_per_sm < 1 and not out:
        out.append(Finding("roles", f"no program fits on an SM ({f.threads} threads at {f.registers} registers, "
                                    f"{f.shared_bytes} bytes)"))
    return out


__all__ = ["ACC_OVERHEAD", "EPILOGUE_REGISTERS", "Footprint", "check_resources", "epilogue_registers", "footprint"]
