"""Guards of a dispatch table: which inputs an entry may take, and the proof that entries partition their domain.

A guard is a box: one dtype, one device architecture, contiguous and aligned inputs, the op's scalars at the values
they were verified with, and per axis an inclusive integer range (`lo == hi` is an exact value). Two entries of a
table may never both accept an input (`check_partition`); whatever no entry accepts runs the reference. The runtime
never decides by catching an exception: the decision is the guard's alone.
"""

from __future__ import annotations

from itertools import combinations

from pydantic import Field, model_validator

from ...base.records import DType, Record

ALIGN_BYTES = 16   # every input's data pointer a multiple of this: what the harness's allocations give the verifier


class PartitionError(ValueError):
    """Two entries of a dispatch table accept the same input, or a guard is malformed."""


class AxisRange(Record):
    """An inclusive range of one axis."""

    lo: int = Field(ge=0, description="Smallest accepted value.")
    hi: int = Field(ge=0, description="Largest accepted value (== lo: exactly one value).")

    @model_validator(mode="after")
    def _ordered(self) -> "AxisRange":
        if self.hi < self.lo:
            raise ValueError(f"empty range [{self.lo}, {self.hi}]")
        return self

    @property
    def exact(self) -> bool:
        return self.lo == self.hi

    def __contains__(self, value: int) -> bool:
        return self.lo <= value <= self.hi


class Guard(Record):
    """What an input must be for one dispatch entry to take it."""

    dtype: DType = Field(description="The workload dtype (the op's 'op'-typed tensors).")
    arch: str = Field(description="Device architecture the kernel was verified on: 'sm_90', or 'interpret' (the "
                                  "Triton interpreter on CPU tensors).")
    axes: dict[str, AxisRange] = Field(description="Every axis of the op: its accepted range.")
    scalars: dict[str, float] = Field(default_factory=dict,
                                      description="The op's scalar arguments at the values the kernel was verified "
                                                  "with; any other value goes to the reference.")
    contiguous: bool = Field(True, description="Every input must be contiguous (the verifier's inputs are).")
    align_bytes: int = Field(ALIGN_BYTES, ge=1, description="Every input's data pointer must be a multiple of this.")

    def accepts(self, dtype: DType, arch: str, axes: dict[str, int]) -> bool:
        """Shape part of the decision (dtype, architecture, axes); layout and scalars are checked by the runtime."""
        return dtype == self.dtype and arch == self.arch and all(axes[a] in r for a, r in self.axes.items())

    def points(self) -> int:
        """How many distinct axis assignments the guard accepts."""
        n = 1
        for r in self.axes.values():
            n *= r.hi - r.lo + 1
        return n


def overlap(a: Guard, b: Guard) -> bool:
    """Whether some input satisfies both guards."""
    if a.dtype != b.dtype or a.arch != b.arch or a.scalars != b.scalars:
        return False
    if a.contiguous != b.contiguous or a.align_bytes != b.align_bytes:
        return False   # both fields are fixed per table; distinct values here would make the boxes incomparable
    return all(not (ra.hi < rb.lo or rb.hi < ra.lo) for ra, rb in ((a.axes[k], b.axes[k]) for k in a.axes))


def check_partition(guards: list[Guard], axes: list[str]) -> None:
    """Raise PartitionError unless every guard names exactly `axes` and no two guards overlap."""
    for i, g in enumerate(guards):
        if sorted(g.axes) != sorted(axes):
            raise PartitionError(f"entry {i}: guard axes {sorted(g.axes)} differ from the op's {sorted(axes)}")
    by_key: dict[tuple, list[int]] = {}
    for i, g in enumerate(guards):
        by_key.setdefault((g.dtype, g.arch, tuple(sorted(g.scalars.items()))), []).append(i)
    for idx in by_key.values():
        # sweep along the first axis: only guards whose first-axis ranges meet need the full comparison
        first = axes[0]
        idx = sorted(idx, key=lambda i: guards[i].axes[first].lo)
        for n, i in enumerate(idx):
            for j in idx[n + 1:]:
                if guards[j].axes[first].lo > guards[i].axes[first].hi:
                    break
                if overlap(guards[i], guards[j]):
                    raise PartitionError(f"entries {i} and {j} overlap: {_box(guards[i])} and {_box(guards[j])}")


def _box(g: Guard, axes: list[str] | None = None) -> str:
    return f"{g.dtype.value}/{g.arch} " + " ".join(
        f"{k}={g.axes[k].lo}" if g.axes[k].exact else f"{k}=[{g.axes[k].lo},{g.axes[k].hi}]" for k in axes or g.axes)


def describe(g: Guard, axes: list[str] | None = None) -> str:
    """One line for humans: dtype/arch and each axis's value or range (in `axes` order when given)."""
    return _box(g, axes)


def pairwise_disjoint(guards: list[Guard]) -> bool:
    """The brute-force check (every pair): what the property tests hold `check_partition` to."""
    return not any(overlap(a, b) for a, b in combinations(guards, 2))
