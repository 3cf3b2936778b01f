"""Canonical metric keys: one name per quantity, whichever way Nsight Compute reported it.

Nsight Compute names a quantity two ways: a raw metric (`sm__throughput.avg.pct_of_peak_sustained_elapsed`,
what the `ncu_report` Python module and `--metrics` rows carry) and a display label inside a section
(`GPU Speed Of Light Throughput` / `Compute (SM) Throughput`, what the CSV details page prints). Labels
are not unique across sections ("Memory Throughput" is a percentage in Speed Of Light and a byte rate in
Memory Workload Analysis), so a label is matched together with its section.

Every key is a snake_case identifier so rule conditions (`kernelloop.tune.knowledge`) can use it as a name
and hypotheses can name it. Values are stored in the key's canonical unit (`normalize` converts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Sections requested for every profile (`--section` identifiers).
SECTIONS: tuple[str, ...] = ("SpeedOfLight", "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis", "Occupancy",
                             "LaunchStats", "WarpStateStats", "SchedulerStats")

# Display names of those sections in the CSV details page, by identifier (rule rows use the identifier).
SECTION_NAMES: dict[str, str] = {
    "SpeedOfLight": "GPU Speed Of Light Throughput",
    "MemoryWorkloadAnalysis": "Memory Workload Analysis",
    "ComputeWorkloadAnalysis": "Compute Workload Analysis",
    "Occupancy": "Occupancy",
    "LaunchStats": "Launch Statistics",
    "WarpStateStats": "Warp State Statistics",
    "SchedulerStats": "Scheduler Statistics",
}

SOL, MWA, CWA, OCC, LAUNCH, WARP, SCHED = (SECTION_NAMES[s] for s in SECTIONS)


@dataclass(frozen=True)
class MetricDef:
    """One canonical quantity."""

    key: str
    unit: str
    raw: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()   # (section display name, metric label)
    description: str = ""


def _m(key: str, unit: str, raw: str | tuple[str, ...] = (), labels: tuple[tuple[str, str], ...] = (),
       description: str = "") -> MetricDef:
    return MetricDef(key, unit, (raw,) if isinstance(raw, str) else tuple(raw), labels, description)


# Warp stall reasons (cycles per issued instruction a warp spent stalled for this reason), as the
# WarpStateStats section charts them. Requested as raw metrics so they appear in the CSV too.
STALL_REASONS: tuple[str, ...] = (
    "long_scoreboard", "short_scoreboard", "barrier", "membar", "mio_throttle", "lg_throttle",
    "math_pipe_throttle", "wait", "not_selected", "selected", "no_instruction", "dispatch_stall", "drain",
    "branch_resolving", "imc_miss", "tex_throttle", "sleeping", "misc", "gmma",
)


def stall_raw(reason: str) -> str:
    return f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"


METRICS: tuple[MetricDef, ...] = (
    # -- Speed Of Light
    _m("duration_ns", "ns", "gpu__time_duration.sum", ((SOL, "Duration"),), "Kernel duration"),
    _m("elapsed_cycles", "cycle", "gpc__cycles_elapsed.max", ((SOL, "Elapsed Cycles"),)),
    _m("sm_active_cycles", "cycle", "sm__cycles_active.avg", ((SOL, "SM Active Cycles"),)),
    _m("sm_frequency_hz", "hz", "gpc__cycles_elapsed.avg.per_second", ((SOL, "SM Frequency"),)),
    _m("dram_frequency_hz", "hz", "dram__cycles_elapsed.avg.per_second", ((SOL, "DRAM Frequency"),)),
    _m("sol_compute_pct", "%", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
       ((SOL, "Compute (SM) Throughput"),), "Compute (SM) throughput, % of peak"),
    _m("sol_memory_pct", "%", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
       ((SOL, "Memory Throughput"),), "Memory throughput (busiest of L1, L2, DRAM), % of peak"),
    _m("sol_dram_pct", "%", ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                             "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
       ((SOL, "DRAM Throughput"),), "DRAM throughput, % of peak"),
    _m("sol_l1_pct", "%", "l1tex__throughput.avg.pct_of_peak_sustained_active", ((SOL, "L1/TEX Cache Throughput"),)),
    _m("sol_l2_pct", "%", "lts__throughput.avg.pct_of_peak_sustained_elapsed", ((SOL, "L2 Cache Throughput"),)),
    # -- Memory Workload Analysis
    _m("dram_bytes_per_s", "byte/s", "dram__bytes.sum.per_second", ((MWA, "Memory Throughput"),),
       "DRAM bytes per second"),
    _m("dram_bytes", "byte", "dram__bytes.sum", (), "DRAM bytes read + written"),
    _m("dram_read_bytes", "byte", "dram__bytes_read.sum"),
    _m("dram_write_bytes", "byte", "dram__bytes_write.sum"),
    _m("l1_hit_pct", "%", "l1tex__t_sector_hit_rate.pct", ((MWA, "L1/TEX Hit Rate"),)),
    _m("l2_hit_pct", "%", "lts__t_sector_hit_rate.pct", ((MWA, "L2 Hit Rate"),)),
    _m("mem_busy_pct", "%", "gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed",
       ((MWA, "Mem Busy"),)),
    _m("max_bandwidth_pct", "%", "gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed",
       ((MWA, "Max Bandwidth"),)),
    _m("mem_pipes_busy_pct", "%", "sm__memory_throughput.avg.pct_of_peak_sustained_active",
       ((MWA, "Mem Pipes Busy"),)),
    _m("ld_sectors_per_request", "ratio", "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",
       (), "32-byte sectors per global load request (4 = fully coalesced 32-bit, 16 = 128-bit)"),
    _m("st_sectors_per_request", "ratio", "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio"),
    # -- Compute Workload Analysis
    _m("ipc_executed_active", "inst/cycle", "sm__inst_executed.avg.per_cycle_active", ((CWA, "Executed Ipc Active"),)),
    _m("ipc_executed_elapsed", "inst/cycle", "sm__inst_executed.avg.per_cycle_elapsed",
       ((CWA, "Executed Ipc Elapsed"),)),
    _m("ipc_issued_active", "inst/cycle", "sm__inst_issued.avg.per_cycle_active", ((CWA, "Issued Ipc Active"),)),
    _m("issue_slots_busy_pct", "%", "sm__inst_issued.avg.pct_of_peak_sustained_active", ((CWA, "Issue Slots Busy"),)),
    _m("sm_busy_pct", "%", "sm__instruction_throughput.avg.pct_of_peak_sustained_active", ((CWA, "SM Busy"),)),
    _m("pipe_fma_pct", "%", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
    _m("pipe_alu_pct", "%", "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active"),
    # fp16 arithmetic runs on the FMA pipe since GA10x; its executed instructions are counted separately
    _m("pipe_fp16_pct", "%", "sm__inst_executed_pipe_fp16.avg.pct_of_peak_sustained_active"),
    _m("pipe_lsu_pct", "%", "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"),
    _m("pipe_tensor_pct", "%", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
       (), "Tensor-core (HMMA) pipe activity"),
    # sm_90's tl.dot compiles to wgmma (GMMA), which the HMMA counter does not see: the aggregate tensor pipe does
    _m("pipe_tensor_all_pct", "%", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
       (), "Tensor-core pipe activity, every kind of MMA (HMMA and Hopper's GMMA)"),
    # -- Occupancy
    _m("occupancy_theoretical_pct", "%", "sm__maximum_warps_per_active_cycle_pct", ((OCC, "Theoretical Occupancy"),)),
    _m("occupancy_achieved_pct", "%", "sm__warps_active.avg.pct_of_peak_sustained_active",
       ((OCC, "Achieved Occupancy"),)),
    _m("warps_theoretical_per_sm", "warp", "sm__maximum_warps_avg_per_active_cycle",
       ((OCC, "Theoretical Active Warps per SM"),)),
    _m("warps_achieved_per_sm", "warp", "sm__warps_active.avg.per_cycle_active",
       ((OCC, "Achieved Active Warps Per SM"),)),
    _m("block_limit_registers", "block", "launch__occupancy_limit_registers", ((OCC, "Block Limit Registers"),)),
    _m("block_limit_shared", "block", "launch__occupancy_limit_shared_mem", ((OCC, "Block Limit Shared Mem"),)),
    _m("block_limit_warps", "block", "launch__occupancy_limit_warps", ((OCC, "Block Limit Warps"),)),
    _m("block_limit_sm", "block", "launch__occupancy_limit_blocks", ((OCC, "Block Limit SM"),)),
    # -- Launch Statistics
    _m("block_size", "thread", "launch__block_size", ((LAUNCH, "Block Size"),)),
    _m("grid_size", "block", "launch__grid_size", ((LAUNCH, "Grid Size"),)),
    _m("registers_per_thread", "register", "launch__registers_per_thread", ((LAUNCH, "Registers Per Thread"),)),
    _m("static_shared_per_block", "byte", "launch__shared_mem_per_block_static",
       ((LAUNCH, "Static Shared Memory Per Block"),)),
    _m("dynamic_shared_per_block", "byte", "launch__shared_mem_per_block_dynamic",
       ((LAUNCH, "Dynamic Shared Memory Per Block"),)),
    _m("threads", "thread", "launch__thread_count", ((LAUNCH, "Threads"),)),
    _m("waves_per_sm", "wave", "launch__waves_per_multiprocessor", ((LAUNCH, "Waves Per SM"),)),
    _m("sm_count", "SM", "device__attribute_multiprocessor_count", ((LAUNCH, "# SMs"),)),
    # -- Warp State Statistics
    _m("warp_cycles_per_issued", "cycle", "smsp__average_warp_latency_per_inst_issued.ratio",
       ((WARP, "Warp Cycles Per Issued Instruction"),), "Average cycles between two issued instructions of a warp"),
    _m("warp_cycles_per_executed", "cycle", "smsp__average_warps_active_per_inst_executed.ratio",
       ((WARP, "Warp Cycles Per Executed Instruction"),)),
    _m("active_threads_per_warp", "thread", "smsp__thread_inst_executed_per_inst_executed.ratio",
       ((WARP, "Avg. Active Threads Per Warp"),)),
    # -- Scheduler Statistics
    _m("sched_active_warps", "warp", "smsp__warps_active.avg.per_cycle_active",
       ((SCHED, "Active Warps Per Scheduler"),)),
    _m("sched_eligible_warps", "warp", "smsp__warps_eligible.avg.per_cycle_active",
       ((SCHED, "Eligible Warps Per Scheduler"),), "Warps ready to issue per scheduler per cycle"),
    _m("sched_issued_warps", "warp", "smsp__issue_active.avg.per_cycle_active",
       ((SCHED, "Issued Warp Per Scheduler"),)),
    _m("sched_no_eligible_pct", "%", "smsp__issue_inst0.avg.pct_of_peak_sustained_active",
       ((SCHED, "No Eligible"),), "Cycles in which no warp could issue"),
    _m("sched_one_or_more_eligible_pct", "%", "smsp__issue_active.avg.pct_of_peak_sustained_active",
       ((SCHED, "One or More Eligible"),)),
    *(_m(f"stall_{r}", "cycle", stall_raw(r), (), f"Cycles per issued instruction stalled on {r.replace('_', ' ')}")
      for r in STALL_REASONS),
)

BY_KEY: dict[str, MetricDef] = {m.key: m for m in METRICS}
BY_RAW: dict[str, MetricDef] = {r: m for m in METRICS for r in m.raw}
BY_LABEL: dict[tuple[str, str], MetricDef] = {lab: m for m in METRICS for lab in m.labels}

# Raw metrics requested on top of the sections: the ones no section prints in the CSV header rows
# (DRAM bytes for the formula check, sectors per request, pipe utilisation, stall reasons).
EXTRA_RAW_METRICS: tuple[str, ...] = tuple(
    m.raw[0] for m in METRICS if m.raw and not m.labels)


def lookup(section: str, label: str) -> MetricDef | None:
    """The canonical metric of a CSV row: raw names first (command-line `--metrics` rows), then labels."""
    if label in BY_RAW:
        return BY_RAW[label]
    m = BY_LABEL.get((section, label))
    if m is None:  # rule rows and some versions print the section identifier instead of its display name
        m = BY_LABEL.get((SECTION_NAMES.get(section, section), label))
    return m


# -- units -------------------------------------------------------------------------------------------------

_SI = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_BIN = {"ki": 2.0 ** 10, "mi": 2.0 ** 20, "gi": 2.0 ** 30, "ti": 2.0 ** 40}
_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "nanosecond": 1.0, "us": 1e3, "usecond": 1e3, "microsecond": 1e3,
            "ms": 1e6, "msecond": 1e6, "millisecond": 1e6, "s": 1e9, "second": 1e9, "sec": 1e9}


def _byte_scale(prefix: str) -> float | None:
    p = prefix.lower()
    if p in _BIN:
        return _BIN[p]
    return _SI.get(p)


def normalize(value: float, unit: str) -> tuple[float, str]:
    """(value, unit) in the canonical unit of its dimension: ns, byte, byte/s, hz; other units unchanged.

    Handles the spellings of `--print-units auto` ('usecond', 'Kbyte', 'Gbyte/second', 'Mhz',
    'cycle/nsecond') so profiles read with any unit setting compare equal.
    """
    u = unit.strip()
    low = u.lower()
    if low in _TIME_NS:
        return value * _TIME_NS[low], "ns"
    m = re.fullmatch(r"([kmgt]i?)?(?:byte|b)(/block|/thread)?", low)
    if m:
        scale = _byte_scale(m.group(1) or "")
        if scale is not None:
            return value * scale, "byte" + (m.group(2) or "")
    m = re.fullmatch(r"([kmgt]i?)?(?:byte|b)/(s|sec|second|ns|nsecond|us|usecond|ms|msecond)", low)
    if m:
        scale = _byte_scale(m.group(1) or "")
        per = _TIME_NS[m.group(2)] / 1e9  # seconds per unit of the denominator
        if scale is not None:
            return value * scale / per, "byte/s"
    m = re.fullmatch(r"([kmgt]?)hz", low)
    if m:
        return value * _SI[m.group(1)], "hz"
    m = re.fullmatch(r"cycle/(ns|nsecond|us|usecond|ms|msecond|s|second)", low)
    if m:
        return value / (_TIME_NS[m.group(1)] / 1e9), "hz"
    return value, u


__all__ = ["BY_KEY", "BY_LABEL", "BY_RAW", "EXTRA_RAW_METRICS", "METRICS", "MetricDef", "SECTIONS", "SECTION_NAMES",
           "STALL_REASONS", "lookup", "normalize", "stall_raw"]
