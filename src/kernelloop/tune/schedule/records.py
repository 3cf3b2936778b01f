"""The typed schedule of a warp-specialized Hopper GEMM: every decision the Gluon kernel makes, as data.

A `Schedule` names the tile, the shared-memory ring the loader fills and the math warpgroups drain (its depth and
the arrivals that complete a phase of each slot's `ready` and `empty` mbarriers), any further mbarrier arrays (the
ping-pong `turn` pair), the warp roles in partition order (roles[0] is the default partition) with their warps and
register budgets, and for every role the barrier and MMA operations it issues at a tile's start, in each k-step and
at a tile's end. The MMA issue (one whole-tile accumulator or two half-width ones; every math role on each tile, or
math roles alternating whole tiles) and the epilogue (store path, fused operations) complete it.

The operations are the protocol: `kernelloop.tune.schedule.protocol` checks it without a GPU, and
`kernelloop.tune.schedule.lower` turns each operation into one Gluon statement. Field paths (`roles[1].k_step[0].parity`)
are what the static gate names when something is wrong.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from ...base.records.base import Record

RING_BARRIERS = ("ready", "empty")
Parity = Literal["phase", "phase^1"]


class Wait(Record):
    """Wait until a phase of an mbarrier has completed (`mbarrier.wait(bar, parity)`). For the ring's barriers the
    phase counter is the lap of the role's ring position (position // stages); for a barrier array it is how many
    tiles the role has done. "phase^1" passes at once on a fresh barrier (the phase before phase 0 counts as
    complete)."""

    op: Literal["wait"] = "wait"
    barrier: str = Field(description="'ready' / 'empty' (the ring's, at the slot of the role's position) or the "
                                     "name of one of the schedule's barrier arrays.")
    index: int | None = Field(None, description="Which barrier of an array (None for the ring's).")
    parity: Parity


class Arrive(Record):
    """One arrival on an mbarrier (`mbarrier.arrive(bar, count)`, issued by one thread of the partition)."""

    op: Literal["arrive"] = "arrive"
    barrier: str
    index: int | None = Field(None, description="Which barrier of an array (None for the ring's).")
    slot: Literal["current", "previous"] = Field(
        "current", description="For the ring's barriers: the slot of the role's current ring position, or of the "
                               "position before it (after a k-loop: its last position).")
    count: int = Field(1, ge=1, description="Arrivals this operation counts.")
    skip_first: bool = Field(False, description="Not on a tile's first k-step (predicated off: nothing before it to "
                                                "release).")


class Load(Record):
    """The loader's step: expect the a and b tiles' bytes on the slot's barrier and issue both TMA copies into the
    slot; the barrier's phase completes when the bytes have landed."""

    op: Literal["load"] = "load"
    barrier: str = "ready"


class Mma(Record):
    """Issue the asynchronous warpgroup MMA(s) of this k-step on the current slot (one per accumulator)."""

    op: Literal["mma"] = "mma"


class MmaWait(Record):
    """`warpgroup_mma_wait(pending)`: retire this role's MMAs until at most `pending` are in flight."""

    op: Literal["mma_wait"] = "mma_wait"
    pending: int = Field(ge=0)


class Sync(Record):
    """A barrier over the warps of the role's partition (so one thread's arrive speaks for all of them)."""

    op: Literal["sync"] = "sync"


Op = Annotated[Union[Wait, Arrive, Load, Mma, MmaWait, Sync], Field(discriminator="op")]


class Role(Record):
    """A partition of warps: what it issues at a tile's start, in each k-step, at a tile's end."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="Its Gluon function's name (without '_').")
    kind: Literal["loader", "math"]
    warps: int = Field(ge=1, le=16)
    registers: int = Field(ge=24, le=256, description="Registers per thread it runs with (setmaxnreg for a worker "
                                                      "partition; what the default partition may use).")
    tile_begin: list[Op] = Field(default_factory=list)
    k_step: list[Op] = Field(default_factory=list)
    tile_end: list[Op] = Field(default_factory=list)

    def ops(self) -> list[tuple[str, int, Op]]:
        """(section, index, op) in issue order."""
        return [(sec, i, op) for sec in ("tile_begin", "k_step", "tile_end") for i, op in enumerate(getattr(self, sec))]


class Barrier(Record):
    """An mbarrier array besides the ring's (e.g. the ping-pong `turn` pair)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    size: int = Field(ge=1, le=8)
    count: int = Field(1, ge=1, description="Arrivals that complete one phase.")


class Ring(Record):
    """The shared-memory ring of a and b tiles and its per-slot `ready` / `empty` mbarriers."""

    stages: int = Field(ge=1, le=16, description="Slots (the pipeline depth).")
    ready_count: int = Field(1, ge=1, description="Arrivals completing a phase of a slot's ready barrier.")
    empty_count: int = Field(1, ge=1, description="Arrivals completing a phase of a slot's empty barrier.")


class Tile(Record):
    block_m: int = Field(ge=16, le=256)
    block_n: int = Field(ge=16, le=256)
    block_k: int = Field(ge=16, le=256)
    group_m: int = Field(8, ge=1, description="Tile-rows walked together (L2 reuse of b).")


class Issue(Record):
    """How the math roles share the tiles and the accumulator."""

    accumulators: Literal[1, 2] = Field(1, description="One whole-tile accumulator, or two of half its width (two "
                                                       "MMAs a k-step, c stored half by half).")
    tiles: Literal["shared", "alternate"] = Field(
        "shared", description="'shared': one math role computes every tile; 'alternate': the math roles take "
                              "turns on whole tiles (ping-pong), ring positions interleaved in tile order.")


FusedOp = Literal["bias", "gelu", "silu", "relu"]
ACTIVATIONS = ("gelu", "silu", "relu")


class Epilogue(Record):
    store: Literal["tma", "registers"] = Field("tma", description="c through a shared staging buffer and a TMA "
                                                                  "store, or straight from registers.")
    fused: list[FusedOp] = Field(default_factory=list, description=(
        "Elementwise operations on the fp32 tile before c is rounded, in order: 'bias' (+ bias[N], broadcast over "
        "rows), 'gelu' (exact, erf), 'silu' (x * sigmoid(x)), 'relu'."))

    @property
    def name(self) -> str:
        """The template parameter EPILOGUE that stands for `fused` ('none', 'bias', 'bias_gelu', 'silu', ...)."""
        return "_".join(self.fused) or "none"

    @staticmethod
    def fused_of(name: str) -> list[str]:
        """`fused` from an EPILOGUE name (the inverse of `name`)."""
        return [] if name == "none" else str(name).split("_")


class Schedule(Record):
    """A warp-specialized Hopper GEMM, c = a @ b (b as [N, K] with the config's TRANS_B)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    family: Literal["gemm"] = "gemm"
    tile: Tile
    ring: Ring
    roles: list[Role] = Field(min_length=2)
    barriers: list[Barrier] = Field(default_factory=list)
    issue: Issue = Field(default_factory=Issue)
    epilogue: Epilogue = Field(default_factory=Epilogue)

    @model_validator(mode="after")
    def _shape(self) -> "Schedule":
        names = [r.name for r in self.roles]
        if len(set(names)) != len(names):
            raise ValueError(f"roles: names must be distinct ({names})")
        if self.roles[0].kind != "math":
            raise ValueError("roles[0]: the default partition must be a math role")
        if [r.kind for r in self.roles].count("loader") != 1:
            raise ValueError("roles: exactly one loader role")
        if len({r.warps for r in self.math_roles}) != 1:
            raise ValueError("roles: every math role has the same warps")
        if self.issue.tiles == "shared" and len(self.math_roles) != 1:
            raise ValueError("issue.tiles: 'shared' has one math role ('alternate' for several)")
        known = {b.name: b for b in self.barriers}
        for i, b in enumerate(self.barriers):
            if b.name in RING_BARRIERS or b.name in names:
                raise ValueError(f"barriers[{i}].name: {b.name!r} is taken")
        for path, op in self.op_paths():
            barrier = getattr(op, "barrier", None)
            if barrier is None:
                continue
            if barrier in RING_BARRIERS:
                if getattr(op, "index", None) is not None:
                    raise ValueError(f"{path}.index: the ring's barriers are indexed by the ring position")
                if isinstance(op, Arrive) and op.slot == "current" and ".k_step[" not in path:
                    raise ValueError(f"{path}.slot: outside a k-step there is no current slot (use 'previous')")
            elif barrier in known:
                if isinstance(op, Load):
                    raise ValueError(f"{path}.barrier: a load completes on a ring barrier")
                if op.index is None or not 0 <= op.index < known[barrier].size:
                    raise ValueError(f"{path}.index: {barrier!r} has {known[barrier].size} barrier(s)")
            else:
                raise ValueError(f"{path}.barrier: no barrier {barrier!r} (the ring's 'ready', 'empty', or one of "
                                 f"{sorted(known)})")
        return self

    # -- views ----------------------------------------------------------------------------------------------
    @property
    def math_roles(self) -> list[Role]:
        return [r for r in self.roles if r.kind == "math"]

    @property
    def loader(self) -> Role:
        return next(r for r in self.roles if r.kind == "loader")

    def role_index(self, name: str) -> int:
        return next(i for i, r in enumerate(self.roles) if r.name == name)

    def op_paths(self) -> list[tuple[str, Op]]:
        """Every operation with its field path, e.g. ('roles[0].k_step[2]', MmaWait(pending=1))."""
        return [(f"roles[{i}].{sec}[{j}]", op) for i, r in enumerate(self.roles) for sec, j, op in r.ops()]

    @property
    def math_warps(self) -> int:
        """All math warps (the config's num_warps)."""
        return sum(r.warps for r in self.math_roles)

    @property
    def launch_warps(self) -> int:
        """Warps of the program: the default partition's plus the workers', padded to whole warpgroups."""
        workers = sum(r.warps for r in self.roles[1:])
        return self.roles[0].warps + -(-workers // 4) * 4

    @property
    def max_registers(self) -> int:
        """The `maxnreg` the kernel is built with: the register file over all threads, rounded down to 8."""
        return min(255, 65536 // (self.launch_warps * 32)) // 8 * 8

    # -- the configuration ----------------------------------------------------------------------------------
    def config(self) -> dict[str, int]:
        """The template parameters this schedule's numbers stand for."""
        t = self.tile
        return {"BLOCK_M": t.block_m, "BLOCK_N": t.block_n, "BLOCK_K": t.block_k, "GROUP_M": t.group_m,
                "num_warps": self.math_warps, "num_stages": self.ring.stages}

    def parameters(self) -> list[str]:
        """The template parameters `bind` sets: the numbers of `config`, then EPILOGUE (text)."""
        return [*self.config(), "EPILOGUE"]

    def bind(self, config: dict) -> "Schedule":
        """This schedule with the numbers and the epilogue of a template configuration (EPILOGUE sets
        `epilogue.fused`; keys it does not know are ignored)."""
        tile = self.tile.model_copy(update={k: config[p] for k, p in (("block_m", "BLOCK_M"), ("block_n", "BLOCK_N"),
                                                                        ("block_k", "BLOCK_K"), ("group_m", "GROUP_M"))
                                            if p in config})
        ring = self.ring.model_copy(update={"stages": config["num_stages"]} if "num_stages" in config else {})
        epilogue = self.epilogue.model_dump()
        if "EPILOGUE" in config:
            epilogue["fused"] = Epilogue.fused_of(config["EPILOGUE"])
        roles = list(self.roles)
        if "num_warps" in config:
            per = int(config["num_warps"]) // len(self.math_roles)
            roles = [r.model_copy(update={"warps": per}) if r.kind == "math" else r for r in roles]
        return Schedule.model_validate({**self.model_dump(), "tile": tile.model_dump(), "ring": ring.model_dump(),
                                        "roles": [r.model_dump() for r in roles], "epilogue": epilogue})


__all__ = ["ACTIVATIONS", "Arrive", "Barrier", "Epilogue", "FusedOp", "Issue", "Load", "Mma", "MmaWait", "Op", "Parity", "RING_BARRIERS",
           "Ring", "Role", "Schedule", "Sync", "Tile", "Wait"]
