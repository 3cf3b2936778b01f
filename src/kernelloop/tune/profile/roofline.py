"""Roofline position of a measured kernel, from the spec's formulas, and the DRAM-bytes check.

Arithmetic intensity is `OpSpec.flops / OpSpec.bytes_moved` for the workload: the formulas state the
minimum traffic and the work of the op, independent of any kernel. The roofs are measured ceilings
(`ceilings.py`: device copy bandwidth, matrix and vector FLOP/s), or, when none are cached, the run's own
device-copy baseline of the same bytes. A kernel's fraction of the roof is `roof time / kernel time`
(1.0 = as fast as the roof allows).

The DRAM check compares what Nsight Compute counted (`dram__bytes`) with the formula: well above it means
the kernel re-reads data (or the formula undercounts); well below means the formula overcounts, or the data
was served from L2 (a warm cache: profile with `--cache-control all`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...base.records import Ceilings, DType, OpSpec, Roofline, Workload

# Op names whose FLOPs run on tensor cores (matrix roof); everything else is held to the vector roof.
MATRIX_OP_MARKERS: tuple[str, ...] = ("gemm", "matmul", "bmm", "attention", "attn", "conv")


@dataclass(frozen=True)
class DramTolerance:
    """Bounds of profiled DRAM bytes / formula bytes inside which the formula counts as confirmed."""

    reread_ratio: float = 1.15   # above: the kernel moves >15 % more than the minimum (re-reads)
    below_ratio: float = 0.85    # below: the formula overcounts or the data was L2-resident


DEFAULT_DRAM_TOLERANCE = DramTolerance()


def default_pipe(op_name: str) -> str:
    """'matrix' for matmul-like ops (by name), else 'vector'."""
    low = op_name.lower()
    return "matrix" if any(m in low for m in MATRIX_OP_MARKERS) else "vector"


def compute_roof(ceilings: Ceilings, dtype: DType, pipe: str) -> tuple[float | None, str]:
    """(TFLOP/s, name) of the compute roof for a workload dtype on a pipe.

    Vector ops (norms, softmax) accumulate in fp32 whatever the storage type, so they are held to the fp32
    vector roof; matrix ops to the matrix roof of their dtype (fp32 inputs: tf32 when measured).
    """
    if pipe == "matrix":
        order = ["tf32", "fp32"] if dtype is DType.fp32 else [dtype.value]
        table = ceilings.matrix_tflops
    else:
        order = ["fp32"]
        table = ceilings.vector_tflops
    for name in order:
        if name in table:
            return table[name], f"{pipe} {name}"
    return None, ""


def dram_check(formula_bytes: float, profiled_bytes: float | None,
               tol: DramTolerance = DEFAULT_DRAM_TOLERANCE) -> tuple[float | None, str, str]:
    """(ratio, verdict, note) comparing profiled DRAM bytes with the formula's minimum."""
    if profiled_bytes is None:
        return None, "not-profiled", "no DRAM byte count in the profile"
    if formula_bytes <= 0:
        return None, "not-profiled", "the formula gives no bytes to compare with"
    ratio = profiled_bytes / formula_bytes
    if ratio > tol.reread_ratio:
        return ratio, "re-reads", (f"DRAM traffic is {ratio:.2f}x the formula's minimum: the kernel re-reads "
                                   f"data (or the formula undercounts)")
    if ratio < tol.below_ratio:
        return ratio, "below-formula", (f"DRAM traffic is {ratio:.2f}x the formula's minimum: the formula "
                                        f"overcounts, the data was L2-resident (warm cache), or written data was still "
                                        f"in L2 when the kernel ended (write-back: outputs smaller than the L2)")
    return ratio, "ok", f"DRAM traffic is {ratio:.2f}x the formula's minimum"


def roofline_position(spec: OpSpec, workload: Workload, kernel_us: float | None, *,
                      bandwidth_gbps: float | None = None, peak_tflops: float | None = None, peak_name: str = "",
                      ceiling_source: str = "", dram_bytes: float | None = None,
                      dram_tolerance: DramTolerance = DEFAULT_DRAM_TOLERANCE) -> Roofline:
    """The roofline record of one kernel time on one workload, given whichever roofs are known."""
    nbytes = spec.bytes_moved(workload.axes, workload.dtype)
    flops = spec.flops(workload.axes, workload.dtype)
    ai = flops / nbytes if nbytes > 0 else 0.0
    t_mem = nbytes / (bandwidth_gbps * 1e9) * 1e6 if bandwidth_gbps else None
    t_cmp = flops / (peak_tflops * 1e12) * 1e6 if peak_tflops else None
    ridge = (peak_tflops * 1e12) / (bandwidth_gbps * 1e9) if bandwidth_gbps and peak_tflops else None
    # Which roof applies is only known with both roofs (or no FLOPs at all); with one roof the fraction is
    # still relative to it, but the kernel may sit under the other one.
    if ridge is not None:
        bound = "memory" if ai < ridge else "compute"
    elif t_mem is not None and flops == 0:
        bound = "memory"
    else:
        bound = "unknown"
    known = [t for t in (t_mem, t_cmp) if t is not None]
    roof_us = max(known) if known else None
    ratio, verdict, note = dram_check(nbytes, dram_bytes, dram_tolerance)
    ok_time = kernel_us is not None and kernel_us > 0
    return Roofline(
        flops=flops, bytes=nbytes, arithmetic_intensity=ai, kernel_us=kernel_us,
        achieved_gbps=nbytes / (kernel_us * 1e-6) / 1e9 if ok_time else None,
        achieved_tflops=flops / (kernel_us * 1e-6) / 1e12 if ok_time else None,
        ceiling_source=ceiling_source, bandwidth_gbps=bandwidth_gbps, peak_tflops=peak_tflops, peak_name=peak_name,
        ridge_intensity=ridge, bound=bound, roof_us=roof_us,
        fraction=roof_us / kernel_us if roof_us is not None and ok_time else None,
        dram_bytes_profiled=dram_bytes, dram_ratio=ratio, dram_check=verdict, dram_note=note)


def roofline_from_ceilings(spec: OpSpec, workload: Workload, kernel_us: float | None, ceilings: Ceilings, *,
                           pipe: str | None = None, dram_bytes: float | None = None,
                           dram_tolerance: DramTolerance = DEFAULT_DRAM_TOLERANCE) -> Roofline:
    """Roofline under measured ceilings (copy bandwidth; the matrix or vector roof of the dtype)."""
    peak, name = compute_roof(ceilings, workload.dtype, pipe or default_pipe(spec.name))
    return roofline_position(spec, workload, kernel_us, bandwidth_gbps=ceilings.copy_gbps, peak_tflops=peak,
                             peak_name=name, ceiling_source=f"measured ceilings {ceilings.key}",
                             dram_bytes=dram_bytes, dram_tolerance=dram_tolerance)


def roofline_from_copy(spec: OpSpec, workload: Workload, kernel_us: float | None, copy_us: float, *,
                       dram_bytes: float | None = None,
                       dram_tolerance: DramTolerance = DEFAULT_DRAM_TOLERANCE) -> Roofline:
    """Roofline whose memory roof is a measured device copy of the formula's bytes (no compute roof)."""
    nbytes = spec.bytes_moved(workload.axes, workload.dtype)
    bw = nbytes / (copy_us * 1e-6) / 1e9 if copy_us > 0 else None
    return roofline_position(spec, workload, kernel_us, bandwidth_gbps=bw,
                             ceiling_source=f"device copy of the same bytes ({copy_us:.2f} us)",
                             dram_bytes=dram_bytes, dram_tolerance=dram_tolerance)


__all__ = ["DEFAULT_DRAM_TOLERANCE", "DramTolerance", "MATRIX_OP_MARKERS", "compute_roof", "default_pipe",
           "dram_check", "roofline_from_ceilings", "roofline_from_copy", "roofline_position"]
