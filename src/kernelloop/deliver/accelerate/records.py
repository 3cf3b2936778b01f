"""The records `kernelloop.accelerate` writes and returns: what happened to each operator card and each op, the
package, the end-to-end check, the verdict; and the folder's state that makes a second call reuse finished runs."""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from ...base.records import Record
from ...base.records.measurement import Ratio


class CardStatus(str, Enum):
    """What became of an operator card (one call-site variant of the model)."""

    PATCHED = "patched"                        # a call site of it was replaced by the package's op
    NOT_MAPPED = "not mapped"                  # kernelloop has no op for it (the card's reason says why)
    NO_SPACE = "nothing to try"                # every configuration of the op is pruned at its shape
    RUN_FAILED = "run failed"                  # the op's loop run stopped with an error
    NO_CANDIDATE = "no candidate passed"       # the run verified no candidate at its workload
    SLOWER = "slower than the reference"       # on a GPU: its winner was measured slower, so not packaged
    NOT_PACKAGED = "not packaged"              # left out at export for another reason (the detail says which)
    NOT_APPLIED = "not applied"                # packaged, but apply left its call sites alone (the detail says why)


class CardOutcome(Record):
    card: str = Field(description="The card's id (a content address, CaptureReport's).")
    module_class: str = Field(description="Short module class, with the ATen overload for an ATen call site.")
    paths: list[str] = Field(description="Module paths of its calls.")
    calls: int
    op: str | None = Field(None, description="The kernelloop op it maps onto (None: none).")
    workload: str | None = Field(None, description="The workload label its shape is, when mapped.")
    status: CardStatus
    detail: str = Field("", description="Why it is not patched, in words ('' when patched).")


class OpOutcome(Record):
    op: str
    run_dir: str
    workloads: int
    passed: int = Field(0, description="Workloads with a PASSED candidate.")
    trials: int = 0
    reused: bool = Field(False, description="A finished run of an earlier call, read back, not run again.")
    resumed: bool = Field(False, description="An interrupted run of an earlier call, continued.")
    error: str = Field("", description="Why the run stopped, when it did (the op is then not packaged).")
    packaged: int = Field(0, description="Dispatch entries of the op in the package.")
    left_out: list[str] = Field(default_factory=list, description="Winners export left out, and why.")


class Verdict(str, Enum):
    ACCELERATED = "patched"                    # sites replaced, outputs within tolerance (and not slower on a GPU)
    NOTHING_PATCHED = "nothing patched"        # no op packaged, or no call of the model reached the package
    OUT_OF_TOLERANCE = "outputs out of tolerance"
    SLOWER = "slower than the original"        # on a GPU, the patched model measured slower


class FusionStatus(str, Enum):
    """What the opt-in fusion step (`fuse=True`, `--fuse`) gave: a fused graph beside the patched model, or why not."""

    NOT_TRIED = "not tried"                                 # fuse=False
    NOTHING_TO_FUSE = "nothing to fuse"                     # discovery found no pattern a kernel family takes
    NOT_REALISED = "no pattern realised"                    # patterns planned, none passed verification
    NOT_KEPT = "not kept"                                   # composed, but its end-to-end check said no
    FAILED = "failed"                                       # fusion could not run (the model did not export, ...)
    VERIFIED = "verified, speed not measured (interpreter)"  # kept; in the interpreter no speed claim
    PAYS = "faster than the patched model"                  # kept; on CUDA FASTER than the patched model
    DOES_NOT_PAY = "not faster than the patched model"      # kept; on CUDA SAME or SLOWER than the patched model


class FusedPattern(Record):
    """One pattern fusion realised (or tried to), as `kernelloop fuse` reports it."""

    op: str = Field(description="The fused op's name.")
    family: str
    kind: str = Field(description="The kernel family it is realised with (add_norm, dual_gemm, rotary, ...).")
    ops: list[str] = Field(description="The model's ATen ops it replaces, in order.")
    occurrences: int
    replaced: int = Field(description="Sites composed into the fused graph.")
    passed: bool = Field(description="A candidate passed verification.")
    why_not: str = Field("", description="Why none of its sites is in the fused graph ('' when some are).")


class FusionOutcome(Record):
    """The fusion step: `fuse`'s composition of the unpatched model's exported graph, a separate inference-only
    model (`Accelerated.fused`), never applied in place of the model -- training stays with the module patches."""

    status: FusionStatus
    detail: str = Field("", description="fuse's verdict, or why fusion was not tried or failed.")
    out: str | None = Field(None, description="The fuse folder (OUT/fuse): ops, runs, package, report.json.")
    patterns: list[FusedPattern] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list, description="Why each pattern (or candidate) was not fused: "
                                                                 "fuse's refusals, failed realisations, sites left.")
    outputs_ok: bool | None = Field(None, description="The fused graph's outputs against the original's, when "
                                                      "composed.")
    vs_patched: Ratio | None = Field(None, description="On CUDA: the fused graph over the patched model, paired.")
    speed: str = Field("", description="The speed claim in words, or why there is none.")

    @property
    def fused(self) -> list[str]:
        """The fused ops with at least one site in the fused graph."""
        return [p.op for p in self.patterns if p.replaced]


class AccelerateSummary(Record):
    """What `kernelloop.accelerate` did (also `OUT/accelerate.json`, and `kernelloop accelerate --json`)."""

    model: str
    device: str = Field(description="The loop's device: cuda or interpret.")
    budget: str = Field(description="The loop's budget per workload, as given ('' for the default).")
    out: str
    cards: list[CardOutcome]
    ops: list[OpOutcome]
    package: str | None = Field(None, description="The package folder (None: nothing was packaged).")
    package_reused: bool = False
    replaced: list[str] = Field(default_factory=list, description="Call sites patched: 'path -> op'.")
    e2e: str | None = Field(None, description="The end-to-end report (e2e.json), when checked.")
    outputs_ok: bool | None = None
    delivered: bool | None = Field(None, description="e2e's verdict: None where speed was not measured.")
    speed: str = Field("", description="The end-to-end speed-up, or why it was not measured.")
    fusion: FusionOutcome = Field(description="The fusion step's outcome (status not tried unless fuse=True).")
    verdict: Verdict
    seconds: float = 0.0

    def not_patched(self) -> list[CardOutcome]:
        return [c for c in self.cards if c.status is not CardStatus.PATCHED]


class OpState(Record):
    """One op's run in an accelerate folder: which workloads it was made for and whether it finished."""

    workloads_sha256: str
    budget: str
    strategy: str
    finished: bool = False


class FolderState(Record):
    """`OUT/state.json`: the runs and the package an accelerate folder holds, so a second call reuses them."""

    model: str
    ops: dict[str, OpState] = Field(default_factory=dict)
    package_from: str | None = Field(None, description="sha256 of the finished runs the package was exported from.")
