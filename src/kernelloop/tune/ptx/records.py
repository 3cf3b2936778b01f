"""The PTX package's records: what a recovery found, what a round trip compared, what a static check refused."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ...base.records.base import Record

Origin = Literal["candidate", "cache", "ptx", "cubin"]
Rule = Literal["entry_name", "params", "launch_bounds", "new_symbol", "new_extern", "shared_memory", "assembles",
               "registers"]


class PtxParam(Record):
    """One parameter of a PTX `.entry`: `.param .u64 .ptr .global .align 1 k_param_0` or `.param .align 64 .b8 d[128]`."""

    name: str
    type: str = Field(description="The state-space type: .u64, .b32, .f32, .b8 ...")
    attrs: list[str] = Field(default_factory=list, description="The other qualifiers in order: .ptr .global .align 1")
    count: int = Field(1, description="Array length (1 for a scalar)")

    @property
    def size(self) -> int:
        """Bytes the parameter occupies (its type's width times its array length; .pred counts as 1)."""
        digits = "".join(c for c in self.type if c.isdigit())
        return (int(digits) // 8 if digits else 1) * self.count

    @property
    def signature(self) -> str:
        """The parameter without its name: what the ABI fixes."""
        return " ".join([self.type, *self.attrs] + ([f"[{self.count}]"] if self.count != 1 else []))


class PtxEntry(Record):
    """A kernel's `.entry`: name, parameters and performance directives (`.reqntid 128`, `.maxnreg 64` ...)."""

    name: str
    visible: bool = True
    params: list[PtxParam] = Field(default_factory=list)
    directives: dict[str, list[int]] = Field(default_factory=dict, description="reqntid/maxntid/maxnreg/... values")


class RecoveredKernel(Record):
    """One compiled kernel's PTX and what it declares; `recoverable` false says why there is no PTX."""

    origin: Origin
    path: str = ""
    recoverable: bool
    reason: str = Field("", description="Why the PTX could not be recovered (empty when it was)")
    name: str = ""
    target: str = Field("", description="The PTX's .target, e.g. sm_90a")
    ptx_version: str = ""
    num_warps: int | None = None
    threads: int | None = None
    shared_bytes: int | None = Field(None, description="The launch's shared memory (Triton's metadata.shared)")
    registers: int | None = Field(None, description="Registers per thread in the original cubin")
    entry: PtxEntry | None = None
    ptx: str = ""
    cubin_b64: str = Field("", description="The original cubin, base64 (empty when none came with it)")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Triton's metadata, where it came with it")


class Difference(Record):
    """One way the re-assembled cubin differs from the original (or from what its PTX declares)."""

    kind: Literal["cubin", "sass", "resources", "nv_info", "params", "declarations"]
    what: str
    original: str = ""
    reassembled: str = ""


class RoundTrip(Record):
    """The PTX re-assembled with Triton's ptxas and Triton's flags, compared to the original cubin."""

    ok: bool = Field(description="Assembled, and no difference in SASS, resources, .nv.info or parameters")
    assembled: bool
    error: str = Field("", description="ptxas's stderr, verbatim, when it refused the PTX")
    command: list[str] = Field(default_factory=list, description="The ptxas command line (file names generic)")
    compared_to_cubin: bool = Field(False, description="An original cubin was there to compare with")
    identical_cubin: bool | None = None
    sass_equal: bool | None = None
    sass_instructions: int = 0
    registers: int | None = Field(None, description="Registers per thread of the re-assembled cubin")
    differences: list[Difference] = Field(default_factory=list)


class KernelReport(Record):
    kernel: RecoveredKernel
    round_trip: RoundTrip | None = None


class Recovery(Record):
    """`kernelloop ptx recover`'s answer for one input: every kernel it holds, each with its round trip."""

    source: str
    origin: Origin
    recoverable: bool
    reason: str = ""
    kernels: list[KernelReport] = Field(default_factory=list)

    @property
    def round_trip_ok(self) -> bool:
        return self.recoverable and bool(self.kernels) and all(k.round_trip is not None and k.round_trip.ok
                                                               for k in self.kernels)


class Violation(Record):
    """A rule an edited PTX breaks: the edit is refused before it reaches a GPU."""

    rule: Rule
    message: str


class Mutation(Record):
    """A seeded edit of a PTX: `breaking` edits must be refused by the static checks (with rule `expect`), or,
    for wrong edits that keep the ABI (`expect` "differential": a dropped store, a changed predicate or offset),
    by the differential proof."""

    kind: str
    breaking: bool
    expect: Rule | Literal["differential"] | None = None
    description: str
    ptx: str


# --- PTX-level candidates -----------------------------------------------------------------------------------

WindowSource = Literal["sass", "profile"]


class HotWindow(Record):
    """A stretch of the entry's body where time is expected (or, with a profile, measured) to go: a loop, or a
    basic block outside loops. Lines are 0-based indices into the PTX text's lines, inclusive."""

    kernel: str
    label: str = Field("", description="The block's label ($L__BB0_2), empty for the entry block")
    start: int
    end: int
    loop: bool = Field(description="The window is a loop body (a branch back to its own label)")
    ptx_instructions: int
    sass_instructions: float = Field(description="SASS instructions of the window's source lines, apportioned by "
                                                 "the PTX instructions each line has here")
    weight: float = Field(description="The window's share of the kernel's estimated (or sampled) issue slots")
    source: WindowSource = Field(description="sass: a static estimate (loops count LOOP_TRIPS times); profile: "
                                             "Nsight Compute's per-instruction samples")
    source_lines: list[int] = Field(default_factory=list, description="Kernel source lines (.loc) it covers")
    profile_metric: str = Field("", description="The source page column the weight was taken from (source "
                                                "'profile'): warp-state samples, else instructions executed")


class ProfileSamples(Record):
    """A kernel's values per SASS offset from Nsight Compute's source page, joined to its cubin: every instruction
    the profile names is at the same offset with the same opcode in the cubin the windows are read from."""

    kernel: str
    metric: str = Field(description="The source page column (Warp Stall Sampling (All Samples), ...)")
    samples: dict[int, float] = Field(description="SASS offset -> value, summed over the kernel's results")
    results: int = Field(description="Profiled results of the kernel summed (launches)")
    notes: list[str] = Field(default_factory=list, description="Results left out, and why")


class PtxHunk(Record):
    """One replaced run of lines: `remove` (the original's lines from `start`, 0-based) becomes `insert`."""

    start: int
    remove: list[str] = Field(default_factory=list)
    insert: list[str] = Field(default_factory=list)


class PtxCandidate(Record):
    """An edit of a recovered PTX, proposed as a candidate: the source-level kernel it came from, the hash of the
    PTX it edits, the patch (hunks inside hot windows), a hypothesis and who proposed it."""

    op: str = ""
    parent_candidate_id: str = Field(description="The source-level candidate (template source + configuration)")
    parent_trial_id: str = Field("", description="The trial of the parent this edit was made for, where known")
    kernel: str = Field(description="The .entry the edit changes")
    original_ptx_sha256: str = Field(description="sha256 of the recovered PTX the hunks apply to")
    hunks: list[PtxHunk] = Field(min_length=1)
    windows: list[HotWindow] = Field(default_factory=list, description="The hot windows the hunks fall in")
    rule: str = Field(description="The transformation: cache_hint, prefetch_size, unroll, predicate, hoist_loads, "
                                  "llm ...")
    hypothesis: str = Field(description="What should change and why, falsifiable")
    proposer: str = Field(description="rules | llm:<model> | manual")
    reorders_fp: bool = Field(False, description="The edit reorders floating-point work: the proof compares with "
                                                 "the op's tolerance instead of bit for bit")

    @property
    def id(self) -> str:
        from ...base.records.base import content_hash
        return "p-" + content_hash({"parent": self.parent_candidate_id, "ptx": self.original_ptx_sha256,
                                    "hunks": [h.model_dump() for h in self.hunks]})
