"""How integer and boolean inputs are drawn: the typed vocabulary of a TensorSpec's `init` beyond the float ones.

A float input's `init` is one of "activation", "weight", "bias" (core/reference/inputs.py). An integer or boolean
input declares one of these records instead (TOML: an inline table with `kind`):

- `{kind = "index", low = "0", high = "N"}`: integers drawn uniformly from [low, high) -- expressions over the
  axes -- with repeats (gather/scatter indices, labels);
- `{kind = "mask", p = 0.5}`: booleans, each true with probability p;
- `{kind = "csr_row_ptr", rows = "M", cols = "N", nnz = "NNZ", patterns = [...]}`: the row pointers (rows + 1
  entries, 0 first and nnz last) of a CSR matrix of `rows` x `cols` with exactly `nnz` stored entries, laid out by a
  sparsity pattern (SparsityPattern): `patterns` are those the verifier's visible checks cycle through; its
  held-out draws add HELDOUT_PATTERNS (empty rows, one dense row) whatever the spec lists;
- `{kind = "csr_col_idx", row_ptr = "row_ptr"}`: the column indices (distinct and ascending within each row) of the
  CSR matrix whose row pointers are the input named `row_ptr` (declared before it);
- `{kind = "bins", bins = "B", patterns = [...]}`: values in [0, bins) laid out by a value pattern (BinPattern):
  `patterns` are those the visible checks cycle through; held-out draws add BIN_HELDOUT_PATTERNS (all values equal:
  the worst contention; a few bins: most bins empty) whatever the spec lists.

Each pattern places exactly `nnz` entries (at most `cols` per row; the spec states `nnz <= rows * cols` as a
constraint):
- "uniform": every row nnz // rows or one more entries, at random columns;
- "power_law": row lengths proportional to a Zipf law (rank^-1.5, ranks shuffled over the rows), capped at `cols`;
- "banded": rows of near-equal length on contiguous columns around the diagonal (clipped to the matrix);
- "empty_rows": about half the rows (at least one, where the others can hold nnz) empty, the rest near-equal;
- "dense_row": one row as full as nnz allows (up to `cols`), the rest near-equal.

Value patterns of a `bins` input (core/reference/bins.py):
- "uniform": every value uniform over the bins;
- "power_law": bin of rank r drawn with probability proportional to r^-1.5 (ranks shuffled over the bins);
- "all_equal": every value the same random bin (every update of a histogram hits one counter);
- "few_bins": values uniform over about sqrt(bins) random bins (at least one), the other bins empty.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from .base import Record

FloatInit = Literal["activation", "weight", "bias"]
SparsityPattern = Literal["uniform", "power_law", "banded", "empty_rows", "dense_row"]
PATTERNS: tuple[str, ...] = ("uniform", "power_law", "banded", "empty_rows", "dense_row")
HELDOUT_PATTERNS: tuple[str, ...] = ("empty_rows", "dense_row")
BinPattern = Literal["uniform", "power_law", "all_equal", "few_bins"]
BIN_PATTERNS: tuple[str, ...] = ("uniform", "power_law", "all_equal", "few_bins")
BIN_HELDOUT_PATTERNS: tuple[str, ...] = ("all_equal", "few_bins")


class IndexInit(Record):
    """Integers drawn uniformly from [low, high), with repeats."""

    kind: Literal["index"] = "index"
    low: str = Field("0", description="Smallest value: an expression over the axes.")
    high: str = Field(description="One past the largest value: an expression over the axes.")


class MaskInit(Record):
    """Booleans, each true with probability p."""

    kind: Literal["mask"] = "mask"
    p: float = Field(0.5, ge=0.0, le=1.0, description="Probability of true.")


class CsrRowPtrInit(Record):
    """The row pointers of a CSR matrix laid out by a sparsity pattern (see the module docstring)."""

    kind: Literal["csr_row_ptr"] = "csr_row_ptr"
    rows: str = Field(description="Rows: an expression over the axes (the tensor has rows + 1 entries).")
    cols: str = Field(description="Columns: an expression over the axes.")
    nnz: str = Field(description="Stored entries: an expression over the axes.")
    patterns: list[SparsityPattern] = Field(default_factory=lambda: ["uniform", "power_law", "banded"],
                                            min_length=1, description="Patterns of the visible checks.")


class CsrColIdxInit(Record):
    """The column indices of the CSR matrix whose row pointers are the input `row_ptr`."""

    kind: Literal["csr_col_idx"] = "csr_col_idx"
    row_ptr: str = Field(description="Name of the input holding the row pointers (declared before this one).")


class BinsInit(Record):
    """Integers in [0, bins) laid out by a value pattern (see the module docstring)."""

    kind: Literal["bins"] = "bins"
    bins: str = Field(description="Number of bins: an expression over the axes (values lie in [0, bins)).")
    patterns: list[BinPattern] = Field(default_factory=lambda: ["uniform", "power_law"], min_length=1,
                                       description="Patterns of the visible checks.")


Generator = Annotated[Union[IndexInit, MaskInit, CsrRowPtrInit, CsrColIdxInit, BinsInit], Field(discriminator="kind")]
Init = Union[FloatInit, Generator]


def init_expressions(init: Init) -> list[str]:
    """The axis expressions an init names (checked by OpSpec against its axes)."""
    if isinstance(init, IndexInit):
        return [init.low, init.high]
    if isinstance(init, CsrRowPtrInit):
        return [init.rows, init.cols, init.nnz]
    if isinstance(init, BinsInit):
        return [init.bins]
    return []


__all__ = ["BIN_HELDOUT_PATTERNS", "BIN_PATTERNS", "BinPattern", "BinsInit", "CsrColIdxInit", "CsrRowPtrInit", "FloatInit", "Generator", "HELDOUT_PATTERNS", "IndexInit", "Init",
           "MaskInit", "PATTERNS", "SparsityPattern", "init_expressions"]
