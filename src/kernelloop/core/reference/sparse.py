"""CSR sparsity structures drawn by pattern (base/records/generators.py names them and says what each is).

The structure is integers only, drawn with NumPy's generator from the case's seed on the CPU (serial, exact), so the
controller and a worker that use the same seed hold identical row pointers and columns on any device. Within a row the
columns are distinct and ascending: a random offset and a stride coprime to the column count (distinct for up to
`cols` entries), then sorted; "banded" rows are contiguous around the diagonal.
"""

from __future__ import annotations

import numpy as np

ZIPF_EXPONENT = 1.5   # power_law: row i's share of the entries is proportional to rank^-1.5


def _distribute(weights: np.ndarray, total: int, cap: int, rng: np.random.Generator) -> np.ndarray:
    """Integer row lengths summing to `total`, each at most `cap`, in proportion to `weights` (zero: empty)."""
    lengths = np.zeros(len(weights), dtype=np.int64)
    remaining = int(total)
    w = weights.astype(np.float64)
    while remaining > 0:
        room = cap - lengths
        active = (room > 0) & (w > 0)
        if not active.any():
            raise ValueError(f"{total} entries do not fit {int((w > 0).sum())} rows of at most {cap}")
        share = np.where(active, w, 0.0)
        add = np.minimum(np.floor(share / share.sum() * remaining).astype(np.int64), room)
        if add.sum() == 0:    # fewer entries left than rows with room: one more each for random rows among them
            idx = np.flatnonzero(active)
            add[rng.permutation(idx)[:remaining]] = 1
        lengths += add
        remaining -= int(add.sum())
    return lengths


def row_lengths(pattern: str, rows: int, cols: int, nnz: int, rng: np.random.Generator) -> np.ndarray:
    """Entries per row for a pattern: exactly `nnz` in all, at most `cols` per row."""
    if nnz > rows * cols or min(rows, cols, nnz) < 0:
        raise ValueError(f"a {rows} x {cols} CSR matrix cannot hold {nnz} entries")
    ones = np.ones(rows)
    if pattern in ("uniform", "banded"):
        return _distribute(ones, nnz, cols, rng)
    if pattern == "power_law":
        ranks = rng.permutation(rows) + 1.0
        return _distribute(ranks ** -ZIPF_EXPONENT, nnz, cols, rng)
    if pattern == "empty_rows":
        need = -(-nnz // cols) if cols else 0                 # rows that must stay non-empty to hold nnz
        k = min(max(1, rows // 2), rows - need)
        w = ones.copy()
        w[rng.permutation(rows)[:max(0, k)]] = 0.0
        return _distribute(w, nnz, cols, rng)
    if pattern == "dense_row":
        r = int(rng.integers(rows)) if rows else 0
        lengths = np.zeros(rows, dtype=np.int64)
        if rows:
            lengths[r] = min(cols, nnz)
            w = ones.copy()
            w[r] = 0.0
            lengths += _distribute(w, nnz - lengths[r], cols, rng)
        return lengths
    raise ValueError(f"unknown sparsity pattern {pattern!r}")


def csr_structure(pattern: str, rows: int, cols: int, nnz: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(row_ptr of rows + 1 entries, col_idx of nnz entries), both int64, for a pattern and seed."""
    rng = np.random.default_rng(seed)
    lengths = row_lengths(pattern, rows, cols, nnz, rng)
    row_ptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=row_ptr[1:])
    row_of = np.repeat(np.arange(rows, dtype=np.int64), lengths)
    j = np.arange(nnz, dtype=np.int64) - row_ptr[row_of]
    if pattern == "banded":
        centre = (np.arange(rows, dtype=np.int64) * cols) // max(rows, 1)
        start = np.clip(centre - lengths // 2, 0, cols - lengths)
        col = start[row_of] + j
    else:
        units = np.flatnonzero(np.gcd(np.arange(max(cols, 1), dtype=np.int64), max(cols, 1)) == 1)
        offset = rng.integers(0, max(cols, 1), rows)
        stride = units[rng.integers(0, len(units), rows)]
        col = (offset[row_of] + j * stride[row_of]) % max(cols, 1)
    col = col[np.lexsort((col, row_of))]
    return row_ptr, col


__all__ = ["csr_structure", "row_lengths"]
