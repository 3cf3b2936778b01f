"""Histogram values drawn by value pattern (base/records/generators.py names them and says what each is).

The values are integers only, drawn with NumPy's generator from the case's seed on the CPU (serial, exact), so the
controller and a worker that use the same seed hold identical values on any device.
"""

from __future__ import annotations

import math

import numpy as np

ZIPF_EXPONENT = 1.5   # power_law: the bin of rank r is drawn with probability proportional to r^-1.5


def bin_values(pattern: str, n: int, bins: int, seed: int) -> np.ndarray:
    """`n` int64 values in [0, bins) laid out by a value pattern."""
    if bins < 1 or n < 0:
        raise ValueError(f"{n} values cannot be drawn into {bins} bins")
    rng = np.random.default_rng(seed)
    if pattern == "uniform":
        return rng.integers(0, bins, n, dtype=np.int64)
    if pattern == "power_law":
        p = (rng.permutation(bins) + 1.0) ** -ZIPF_EXPONENT
        return rng.choice(bins, size=n, p=p / p.sum()).astype(np.int64)
    if pattern == "all_equal":
        return np.full(n, int(rng.integers(0, bins)), dtype=np.int64)
    if pattern == "few_bins":
        chosen = rng.permutation(bins)[:max(1, math.isqrt(bins))]
        return chosen[rng.integers(0, len(chosen), n)].astype(np.int64)
    raise ValueError(f"unknown value pattern {pattern!r}")


__all__ = ["bin_values"]
