"""The hand-written Gluon GEMM templates of ops/gemm (gluon_kernel.py) as schedules.

- `gluon_ws`: one loader warp filling a ring of `num_stages` slots; `num_warps` math warps (one or two warpgroups,
  stacked along M) waiting on each slot, issuing the warpgroup MMA, keeping one in flight and releasing the slot of
  the MMA that has just completed; c through a staging tile and a TMA store.
- `gluon_subtiled`: the same with two half-width accumulators (two MMAs a k-step, two in flight) and c stored half
  by half through a staging buffer of half the tile.
- `gluon_pingpong`: two math warpgroups of 4 warps taking alternate tiles, handing the tensor cores to each other
  through the `turn` mbarrier pair once their k-loop is issued.

Each function returns the schedule at a representative configuration; `Schedule.bind(config)` sets any other.
`LIBRARY` maps each template name to its schedule; `generated_template(name)` is the name of the template in
ops/gemm built from it.
"""

from __future__ import annotations

from .records import (Arrive, Barrier, Epilogue, Issue, Load, Mma, MmaWait, Ring, Role, Schedule, Sync, Tile,
                      Wait)

LOADER_REGISTERS = 40


def _loader() -> Role:
    return Role(name="loader", kind="loader", warps=1, registers=LOADER_REGISTERS,
                k_step=[Wait(barrier="empty", parity="phase^1"), Load()])


def _math_k_step(in_flight: int) -> list:
    """Wait for the slot, issue its MMA(s), keep one k-step's MMAs in flight, release the slot before."""
    return [Wait(barrier="ready", parity="phase"), Mma(), MmaWait(pending=in_flight), Sync(),
            Arrive(barrier="empty", slot="previous", skip_first=True)]


def _math_tile_end() -> list:
    return [MmaWait(pending=0), Sync(), Arrive(barrier="empty", slot="previous")]


def gluon_ws(block_m: int = 128, block_n: int = 256, num_warps: int = 8, stages: int = 3) -> Schedule:
    return Schedule(
        name="gluon_ws", tile=Tile(block_m=block_m, block_n=block_n, block_k=64), ring=Ring(stages=stages),
        roles=[Role(name="math", kind="math", warps=num_warps, registers=232, k_step=_math_k_step(1),
                    tile_end=_math_tile_end()), _loader()],
        issue=Issue(accumulators=1, tiles="shared"), epilogue=Epilogue(store="tma"))


def gluon_subtiled(block_m: int = 128, num_warps: int = 8, stages: int = 4) -> Schedule:
    return Schedule(
        name="gluon_subtiled", tile=Tile(block_m=block_m, block_n=256, block_k=64), ring=Ring(stages=stages),
        roles=[Role(name="math", kind="math", warps=num_warps, registers=232, k_step=_math_k_step(2),
                    tile_end=_math_tile_end()), _loader()],
        issue=Issue(accumulators=2, tiles="shared"), epilogue=Epilogue(store="tma"))


def gluon_pingpong(block_m: int = 128, block_n: int = 128, stages: int = 5) -> Schedule:
    def consumer(c: int) -> Role:
        # consumer 0's first wait passes on the fresh barrier; each hands the turn over once its k-loop is issued
        return Role(name=f"math{c}", kind="math", warps=4, registers=232,
                    tile_begin=[Wait(barrier="turn", index=c, parity="phase^1" if c == 0 else "phase")],
                    k_step=_math_k_step(1),
                    tile_end=[Sync(), Arrive(barrier="turn", index=1 - c), *_math_tile_end()])
    return Schedule(
        name="gluon_pingpong", tile=Tile(block_m=block_m, block_n=block_n, block_k=64), ring=Ring(stages=stages),
        roles=[consumer(0), consumer(1), _loader()], barriers=[Barrier(name="turn", size=2)],
        issue=Issue(accumulators=1, tiles="alternate"), epilogue=Epilogue(store="tma"))


LIBRARY = {"gluon_ws": gluon_ws, "gluon_subtiled": gluon_subtiled, "gluon_pingpong": gluon_pingpong}
"""Template name in ops/gemm -> the schedule it is (at a representative configuration)."""

GENERATED_FILES = {"gluon_ws": "schedule_ws.py", "gluon_subtiled": "schedule_subtiled.py",
                   "gluon_pingpong": "schedule_pingpong.py"}
"""Hand-written template -> the file in ops/gemm generated from its schedule."""


def generated_template(name: str) -> str:
    """The name, in ops/gemm's spec, of the template generated from hand-written template `name`'s schedule."""
    return "schedule_" + name.removeprefix("gluon_")


__all__ = ["GENERATED_FILES", "LIBRARY", "LOADER_REGISTERS", "generated_template", "gluon_pingpong",
           "gluon_subtiled", "gluon_ws"]
