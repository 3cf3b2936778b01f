"""Bottleneck classification of one kernel profile, and the evidence each class keeps.

The classes follow CUDAMaster (2026), from the Speed Of Light throughputs (memory = the larger of Memory and DRAM
throughput):
- compute-bound:           Compute (SM) throughput > `compute_pct`;
- memory-bandwidth-bound:  compute <= `compute_pct` and memory > `memory_pct`;
- memory-latency-bound:    compute and memory both <= their thresholds;
with two additions, checked first:
- balanced-near-limit:     compute and memory both > `balanced_pct` and within `balanced_gap` points of each
                           other: both units are near their limits and neither is the bottleneck;
- dominance:               when compute and memory are both above their thresholds (and not balanced), the
                           busier unit decides. CUDAMaster's rule reads compute first, which labels a kernel
                           with 50 % compute and 90 % memory compute-bound; the busier unit is the one that
                           limits it.
The thresholds are heuristics, not hardware laws (30 % is CUDAMaster's choice), hence parameters. A class at or
above `near_limit_pct` says so in its reason: little is left to gain on that unit.

A class is an entry point, not a diagnosis: each keeps only the handful of metrics that matter for it
(`EVIDENCE`), so a planner or a reader sees the relevant numbers instead of hundreds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ...base.records import BottleneckClass, BuildResources, Classification, EvidenceItem, KernelProfile, RuleHit
from .metrics import BY_KEY, STALL_REASONS


@dataclass(frozen=True)
class Thresholds:
    """Classification thresholds (percent of peak) and evidence sizes."""

    compute_pct: float = 30.0      # compute throughput above this: compute-bound (CUDAMaster)
    memory_pct: float = 30.0       # DRAM or memory throughput above this (compute below): bandwidth-bound
    balanced_pct: float = 60.0     # compute and memory both above this ...
    balanced_gap: float = 10.0     # ... and within this many points of each other: balanced, near the limit on both
    near_limit_pct: float = 80.0   # the deciding unit above this: the reason says it is near its limit
    top_stalls: int = 3            # stall reasons kept as evidence (largest first)
    max_rules: int = 3             # rule results kept as evidence (largest estimated speed-up first)


DEFAULT_THRESHOLDS = Thresholds()

C = BottleneckClass

# Per class: the profile metrics worth showing, with what each one says.
EVIDENCE: dict[BottleneckClass, tuple[tuple[str, str], ...]] = {
    C.MEMORY_BANDWIDTH: (
        ("sol_dram_pct", "DRAM throughput: how close the kernel is to the memory roof"),
        ("sol_memory_pct", "busiest memory unit; above DRAM % means L1/L2 traffic, not DRAM, is the limit"),
        ("dram_bytes", "DRAM bytes moved; compare with the spec's minimum (re-reads)"),
        ("ld_sectors_per_request", "sectors per global load request: 4 = 32-bit coalesced, 16 = 128-bit"),
        ("st_sectors_per_request", "sectors per global store request"),
        ("l2_hit_pct", "L2 hit rate: re-reads served by L2, or streaming data that thrashes it"),
        ("l1_hit_pct", "L1 hit rate"),
        ("mem_busy_pct", "memory pipelines busy"),
        ("waves_per_sm", "waves: a partial last wave leaves bandwidth idle at the tail"),
    ),
    C.MEMORY_LATENCY: (
        ("occupancy_achieved_pct", "achieved occupancy: warps available to hide memory latency"),
        ("occupancy_theoretical_pct", "theoretical occupancy: what registers/shared memory/block size allow"),
        ("block_limit_registers", "blocks per SM the register file allows"),
        ("registers_per_thread", "registers per thread: the usual occupancy limiter"),
        ("sched_eligible_warps", "eligible warps per scheduler per cycle (< 1: issue slots go idle)"),
        ("sched_no_eligible_pct", "cycles with no eligible warp"),
        ("warp_cycles_per_issued", "cycles between a warp's instructions: latency not hidden"),
        ("waves_per_sm", "waves: too few programs to fill the GPU"),
        ("grid_size", "programs launched"),
    ),
    C.COMPUTE: (
        ("sol_compute_pct", "compute (SM) throughput"),
        ("issue_slots_busy_pct", "issue slots busy: instruction issue is the limit when high"),
        ("ipc_issued_active", "instructions issued per active cycle"),
        ("pipe_fma_pct", "FMA pipe utilisation"),
        ("pipe_alu_pct", "ALU pipe utilisation (integer, comparisons, conversions)"),
        ("pipe_fp16_pct", "FP16 pipe utilisation"),
        ("pipe_tensor_all_pct", "tensor-core activity (every MMA kind): 0 for a matmul means it runs on CUDA cores"),
        ("pipe_tensor_pct", "HMMA tensor-core activity (Hopper's wgmma shows only in the line above)"),
        ("sm_busy_pct", "SM busy"),
        ("occupancy_achieved_pct", "achieved occupancy"),
    ),
    C.NEAR_LIMIT: (
        ("sol_compute_pct", "compute throughput"),
        ("sol_memory_pct", "memory throughput"),
        ("sol_dram_pct", "DRAM throughput"),
        ("dram_bytes", "DRAM bytes moved"),
        ("occupancy_achieved_pct", "achieved occupancy"),
        ("waves_per_sm", "waves: the tail wave is one of the few gains left"),
        ("duration_ns", "kernel duration"),
    ),
    C.UNKNOWN: (),
}

# Classes that show the largest stall reasons.
_STALL_CLASSES = (C.MEMORY_LATENCY, C.COMPUTE)

# Build resources worth showing per class: (attribute of BuildResources, why).
BUILD_EVIDENCE: dict[BottleneckClass, tuple[tuple[str, str], ...]] = {
    C.MEMORY_BANDWIDTH: (("ldg128_fraction", "share of global loads that are 128-bit wide"),
                         ("stg128_fraction", "share of global stores that are 128-bit wide")),
    C.MEMORY_LATENCY: (("registers", "registers per thread (build)"), ("spills", "spilled registers"),
                       ("local_loads", "local-memory loads in the SASS (spills, local arrays)")),
    C.COMPUTE: (("registers", "registers per thread (build)"),
                ("tensor_instructions", "tensor-core instructions in the SASS")),
    C.NEAR_LIMIT: (("ldg128_fraction", "share of global loads that are 128-bit wide"),),
    C.UNKNOWN: (),
}

# Sections whose rule results matter per class (rule rows name the section identifier).
RULE_SECTIONS: dict[BottleneckClass, frozenset[str]] = {
    C.MEMORY_BANDWIDTH: frozenset({"SpeedOfLight", "MemoryWorkloadAnalysis", "LaunchStats"}),
    C.MEMORY_LATENCY: frozenset({"Occupancy", "LaunchStats", "WarpStateStats", "SchedulerStats"}),
    C.COMPUTE: frozenset({"SpeedOfLight", "ComputeWorkloadAnalysis", "WarpStateStats", "SchedulerStats"}),
    C.NEAR_LIMIT: frozenset({"SpeedOfLight", "LaunchStats", "Occupancy", "MemoryWorkloadAnalysis",
                             "ComputeWorkloadAnalysis"}),
    C.UNKNOWN: frozenset(),
}


def decide(compute: float | None, memory: float | None, dram: float | None,
           t: Thresholds = DEFAULT_THRESHOLDS) -> tuple[BottleneckClass, str]:
    """The class from the three Speed Of Light percentages, and the comparison that decided it."""
    if compute is None or (memory is None and dram is None):
        return C.UNKNOWN, "the profile lacks the Speed Of Light throughputs (compute and memory/DRAM %)"
    mem = max(v for v in (memory, dram) if v is not None)
    mem_name = "DRAM" if dram is not None and (memory is None or dram >= memory) else "memory"

    def near(value: float) -> str:
        return f"; near the limit (> {t.near_limit_pct:g} %)" if value > t.near_limit_pct else ""

    if compute > t.balanced_pct and mem > t.balanced_pct and abs(compute - mem) <= t.balanced_gap:
        return C.NEAR_LIMIT, (f"compute {compute:.1f} % and {mem_name} {mem:.1f} % both > {t.balanced_pct:g} % and "
                              f"within {t.balanced_gap:g} points")
    compute_high, memory_high = compute > t.compute_pct, mem > t.memory_pct
    if compute_high and memory_high:
        if compute > mem:
            return C.COMPUTE, (f"compute {compute:.1f} % > {t.compute_pct:g} % and above {mem_name} "
                               f"{mem:.1f} %{near(compute)}")
        return C.MEMORY_BANDWIDTH, (f"{mem_name} {mem:.1f} % > {t.memory_pct:g} % and at or above compute "
                                    f"{compute:.1f} %{near(mem)}")
    if compute_high:
        return C.COMPUTE, f"compute {compute:.1f} % > {t.compute_pct:g} %{near(compute)}"
    if memory_high:
        return C.MEMORY_BANDWIDTH, (f"compute {compute:.1f} % <= {t.compute_pct:g} % and {mem_name} {mem:.1f} % > "
                                    f"{t.memory_pct:g} %{near(mem)}")
    parts = [f"{n} {v:.1f} %" for n, v in (("compute", compute), ("memory", memory), ("DRAM", dram))
             if v is not None]
    return C.MEMORY_LATENCY, f"{', '.join(parts)} all <= {t.compute_pct:g}/{t.memory_pct:g} %"


def _item(key: str, value, why: str) -> EvidenceItem:
    mdef = BY_KEY.get(key)
    return EvidenceItem(key=key, value=value, unit=mdef.unit if mdef else "", why=why)


def evidence_for(klass: BottleneckClass, profile: KernelProfile, build: BuildResources | None = None,
                 t: Thresholds = DEFAULT_THRESHOLDS) -> tuple[list[EvidenceItem], list[str]]:
    """(kept evidence, wanted keys the profile lacks) for a class."""
    items, missing = [], []
    for key, why in EVIDENCE[klass]:
        if key in profile.metrics:
            items.append(_item(key, profile.metrics[key], why))
        else:
            missing.append(key)
    if klass in _STALL_CLASSES:
        stalls = sorted(((profile.number(f"stall_{r}"), r) for r in STALL_REASONS
                         if profile.number(f"stall_{r}") is not None), reverse=True)
        if not stalls:
            missing.append("stall_*")
        for value, r in stalls[:t.top_stalls]:
            why = f"stall reason ranked by cycles per issued instruction: {r.replace('_', ' ')}"
            items.append(_item(f"stall_{r}", value, why))
    if build is not None:
        for attr, why in BUILD_EVIDENCE[klass]:
            value = getattr(build, attr)
            if value is not None:
                items.append(EvidenceItem(key=attr, value=float(value), unit="", why=why))
    return items, missing


def relevant_rules(klass: BottleneckClass, rules: list[RuleHit], limit: int) -> list[RuleHit]:
    """The class's rule results, largest estimated speed-up first."""
    keep = [r for r in rules if r.section in RULE_SECTIONS[klass]]
    keep.sort(key=lambda r: -(r.speedup_pct or 0.0))
    return keep[:limit]


def classify(profile: KernelProfile, thresholds: Thresholds = DEFAULT_THRESHOLDS,
             build: BuildResources | None = None) -> Classification:
    """Class, deciding comparison and filtered evidence of one kernel profile."""
    compute = profile.number("sol_compute_pct")
    memory = profile.number("sol_memory_pct")
    dram = profile.number("sol_dram_pct")
    klass, reason = decide(compute, memory, dram, thresholds)
    items, missing = evidence_for(klass, profile, build, thresholds)
    return Classification(
        bottleneck=klass, reason=reason, compute_pct=compute, memory_pct=memory, dram_pct=dram,
        thresholds={k: float(v) for k, v in asdict(thresholds).items()}, evidence=items, missing=missing,
        rules=relevant_rules(klass, profile.rules, thresholds.max_rules))


__all__ = ["BUILD_EVIDENCE", "DEFAULT_THRESHOLDS", "EVIDENCE", "RULE_SECTIONS", "Thresholds", "classify", "decide",
           "evidence_for", "relevant_rules"]
