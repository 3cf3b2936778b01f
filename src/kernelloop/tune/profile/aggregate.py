"""Several launches in one profiled call, summed; and the profile-vs-timing agreement under one bandwidth roof.

A subject's call may launch more than one kernel (an eager baseline that is a chain of PyTorch ops, a split-K
GEMM that zeroes its output first). Nsight Compute profiles each launch in the NVTX range separately; what one
call costs is their sum:
- duration and DRAM bytes: sums over the launches (unknown when one launch lacks the number);
- DRAM throughput %: the duration-weighted mean of the launches' percentages (time at that throughput);
- class: the class of the dominant launch, the one with the longest duration; every launch keeps its own class.

The agreement check compares two independent estimates of "how close to the bandwidth roof":
the profile's (DRAM bytes counted / Nsight Compute's duration) and the timer's (the spec's minimum bytes / the
timed kernel median), both divided by the same roof (measured ceilings, else the run's device copy).
"""

from __future__ import annotations

from ...base.records import KernelProfile, KernelShare, OpSpec, ProfileAggregate, Roofline, RooflineAgreement, Workload
from .classify import DEFAULT_THRESHOLDS, Thresholds, classify

AGREEMENT_TOLERANCE = 0.05
"""Largest relative difference between the profile's and the timer's roof fraction that counts as agreement."""


def dram_bytes_of(kernel: KernelProfile) -> float | None:
    """DRAM bytes read + written by one launch: `dram_bytes`, else read + write, else None."""
    total = kernel.number("dram_bytes")
    if total is not None:
        return total
    r, w = kernel.number("dram_read_bytes"), kernel.number("dram_write_bytes")
    return r + w if r is not None and w is not None else None


def aggregate(kernels: list[KernelProfile], thresholds: Thresholds = DEFAULT_THRESHOLDS) -> ProfileAggregate:
    """Sum of the launches; the dominant launch is the longest (the first one on ties or unknown durations)."""
    if not kernels:
        raise ValueError("no launches to aggregate")
    durations = [k.number("duration_ns") for k in kernels]
    drams = [dram_bytes_of(k) for k in kernels]
    known = [d for d in durations if d is not None]
    total = sum(known) if len(known) == len(kernels) else None
    dominant = max(range(len(kernels)), key=lambda i: (durations[i] if durations[i] is not None else -1.0, -i))
    shares = []
    for k, d, b in zip(kernels, durations, drams):
        c = classify(k, thresholds)
        shares.append(KernelShare(kernel=k.kernel, launch_id=k.launch_id, duration_ns=d, dram_bytes=b,
                                  share=d / total if d is not None and total else None, bottleneck=c.bottleneck,
                                  reason=c.reason, compute_pct=c.compute_pct, memory_pct=c.memory_pct,
                                  dram_pct=c.dram_pct))
    pcts = [(s.dram_pct, s.duration_ns) for s in shares]
    dram_pct = (sum(p * d for p, d in pcts) / total
                if total and all(p is not None and d is not None for p, d in pcts) else None)
    return ProfileAggregate(launches=len(kernels), duration_ns=total,
                            dram_bytes=sum(drams) if all(b is not None for b in drams) else None,
                            dram_pct=dram_pct, dominant=dominant, kernels=shares)


def agreement(spec: OpSpec, workload: Workload, roof: Roofline | None, *, profile_bytes: float | None,
              profile_ns: float | None, timing_us: float | None, timing_source: str = "",
              tolerance: float = AGREEMENT_TOLERANCE) -> RooflineAgreement:
    """The profile's and the timer's fraction of the bandwidth roof of `roof`, and how far apart they are."""
    nbytes = spec.bytes_moved(workload.axes, workload.dtype)
    bw = roof.bandwidth_gbps if roof is not None else None
    source = roof.ceiling_source if roof is not None else ""
    p_us = profile_ns / 1e3 if profile_ns else None
    p_gbps = profile_bytes / (p_us * 1e-6) / 1e9 if profile_bytes is not None and p_us else None
    t_gbps = nbytes / (timing_us * 1e-6) / 1e9 if timing_us else None
    p_frac = nbytes / (p_us * 1e-6) / 1e9 / bw if p_us and bw else None
    t_frac = t_gbps / bw if t_gbps is not None and bw else None
    diff = abs(p_frac - t_frac) / t_frac if p_frac is not None and t_frac else None
    missing = [what for what, v in (("a bandwidth roof (no ceilings cached, no copy baseline)", bw),
                                    ("a profiled duration", p_us), ("a timed kernel median", timing_us)) if not v]
    if missing:
        note = "cannot compare: no " + ", no ".join(missing)
    else:
        note = f"the timed median is {timing_us / p_us:.3f}x Nsight Compute's duration"
    if profile_bytes is not None and nbytes:
        note += f"; profiled DRAM bytes are {profile_bytes / nbytes:.3f}x the formula"
    else:
        note += "; no profiled DRAM bytes to check against the formula"
    return RooflineAgreement(
        bandwidth_gbps=bw, ceiling_source=source, profile_bytes=profile_bytes, profile_us=p_us, profile_gbps=p_gbps,
        profile_fraction=p_frac, timing_bytes=nbytes, timing_us=timing_us, timing_source=timing_source,
        timing_gbps=t_gbps, timing_fraction=t_frac, difference=diff, tolerance=tolerance,
        agrees=diff <= tolerance if diff is not None else None, note=note)


__all__ = ["AGREEMENT_TOLERANCE", "aggregate", "agreement", "dram_bytes_of"]
