"""The dispatch table of one packaged op and its precomputed lookup.

`DispatchTable` is the record written into a package (`ops/<op>/dispatch.json`); `Dispatcher` is what the runtime
builds from it once: a dict from exact shapes to entries, the range entries per (dtype, arch), and a bounded
memo of decisions, so a call's guard decision is one dict lookup after the first call of a shape.
"""

from __future__ import annotations

from pydantic import AliasChoices, Field, model_validator

from ...base.records import DType, Record
from .guards import Guard, check_partition

CONFIG_VALUE = int | str | bool


class ShapeClaim(Record):
    """A shape an entry was verified on, and what was measured there (None: verified only, no speed claimed)."""

    axes: dict[str, int] = Field(description="Axis values.")
    kernel_us: float | None = Field(None, description="Kernel median in µs where timed (the run's confirmation "
                                                     "when there was one, else its search trial).")
    kernel_ci_us: tuple[float, float] | None = Field(
        None, validation_alias=AliasChoices("kernel_ci_us", "ci_us"),   # packages written before the rename load
        description="Its confidence interval in µs (the name show --json gives it).")
    source: str = Field(description="'run' (a trial of the run), 'edge' (an edge or tile-boundary point verified at "
                                    "export), or 'interior' (a seeded interior point verified at export).")


class PtxOverlay(Record):
    """A PTX-level edit of the entry's kernel, proved against it (kernelloop.tune.ptx): the runtime substitutes it through
    Triton's IR override, only for the PTX it was made from, and only where the environment is the one it was proved
    in (else the entry's source-level kernel runs)."""

    kernel: str = Field(description="The .entry the edit changes.")
    original_ptx_sha256: str = Field(description="sha256 of the PTX the edit replaces.")
    file: str = Field(description="The edited PTX's path inside the package.")
    diff: str = Field(description="The unified diff's path inside the package.")
    proof: str = Field(description="The proof report's path inside the package (cases, verifier, timing).")
    edit_id: str = Field(description="The PTX candidate's id.")
    rule: str
    hypothesis: str
    speedup: float = Field(description="Kernel time of the source-level kernel over the edit's, same run.")
    ci: tuple[float, float] = Field(description="The speed-up's 95 % bootstrap interval.")
    cases: int = Field(description="Cases the edit matched the original on.")
    triton: str = Field(description="The Triton version it was proved with (the runtime requires the same).")
    arch: str = Field(description="The GPU architecture it was proved on, e.g. sm_90.")


class DispatchEntry(Record):
    """One guard → one (template, configuration) of the op."""

    id: str = Field(description="Entry id, unique in the table (e0, e1, ...).")
    guard: Guard = Field(description="What inputs the entry takes.")
    template: str = Field(description="Template name in the op's spec.")
    kernel: str = Field(description="The kernel source's path inside the package.")
    config: dict[str, CONFIG_VALUE] = Field(description="The configuration `launch` receives.")
    candidate_id: str = Field(description="The archived candidate (template source + configuration).")
    shapes: list[ShapeClaim] = Field(min_length=1, description="Every shape the entry was verified on; speed is "
                                                               "claimed only on those with kernel_us.")
    ptx: PtxOverlay | None = Field(None, description="A proved PTX-level edit of the kernel (None: the source-level "
                                                     "kernel as the run built it).")

    @property
    def timed(self) -> list[dict[str, int]]:
        return [s.axes for s in self.shapes if s.kernel_us is not None]


class DispatchTable(Record):
    """The op's entries; whatever no entry's guard takes runs the reference."""

    op: str = Field(description="Op name.")
    axes: list[str] = Field(min_length=1, description="The op's axes, in spec order.")
    entries: list[DispatchEntry] = Field(description="Disjoint guards (checked when built and when loaded).")

    @model_validator(mode="after")
    def _partition(self) -> "DispatchTable":
        check_partition([e.guard for e in self.entries], self.axes)
        ids = [e.id for e in self.entries]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate entry ids {ids}")
        return self


MEMO_LIMIT = 4096   # distinct shapes remembered per op before the memo starts over


class Dispatcher:
    """Precomputed lookup: `select(dtype, arch, shape)` → the entry index, or -1 for the reference."""

    def __init__(self, table: DispatchTable):
        self.axes = tuple(table.axes)
        self.exact: dict[tuple, int] = {}
        self.ranges: dict[tuple[DType, str], list[tuple[tuple[tuple[int, int], ...], int]]] = {}
        for i, e in enumerate(table.entries):
            g = e.guard
            bounds = tuple((g.axes[a].lo, g.axes[a].hi) for a in self.axes)
            if all(lo == hi for lo, hi in bounds):
                self.exact[(g.dtype, g.arch, tuple(lo for lo, _ in bounds))] = i
            else:
                self.ranges.setdefault((g.dtype, g.arch), []).append((bounds, i))
        self.memo: dict[tuple, int] = {}

    def select(self, dtype: DType, arch: str, shape: tuple[int, ...]) -> int:
        key = (dtype, arch, shape)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        idx = self.exact.get(key, -1)
        if idx < 0:
            for bounds, i in self.ranges.get((dtype, arch), ()):
                if all(lo <= v <= hi for v, (lo, hi) in zip(shape, bounds)):
                    idx = i
                    break
        if len(self.memo) >= MEMO_LIMIT:
            self.memo.clear()
        self.memo[key] = idx
        return idx
