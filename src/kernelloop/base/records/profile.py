"""Why a kernel is slow: profile, bottleneck class, roofline position, build resources, hypotheses.

These are the records of issue 4. A `ProfileReport` is what the controller archives next to a trial (table
`profiles`): the Nsight Compute metrics of the candidate's kernel in canonical units, the bottleneck class with
the few metrics that matter for it, the roofline position computed from the spec's formulas, the resources
read from the build (registers, spills, local memory, global access widths in the SASS), and the hypotheses
the proposer stated with their outcomes after measurement.

Metric keys are snake_case identifiers (see `kernelloop.tune.profile.metrics`), so the planner's conditions can
name them in expressions and hypotheses can name them as their metric.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import Field, model_validator

from .base import Record, content_hash

Value = float | str

LATENCY = "latency_us"
"""Metric name of the kernel-time median (microseconds)."""
"""A metric value: a number in its canonical unit, or a string (e.g. a cache configuration)."""


class BottleneckClass(str, Enum):
    """What limits a kernel, after CUDAMaster's three classes plus one for kernels near a hardware limit."""

    COMPUTE = "compute-bound"
    MEMORY_BANDWIDTH = "memory-bandwidth-bound"
    MEMORY_LATENCY = "memory-latency-bound"
    NEAR_LIMIT = "balanced-near-limit"
    UNKNOWN = "unclassified"


class RuleHit(Record):
    """One Nsight Compute guided-analysis rule result (a CSV row with an empty metric name)."""

    section: str = Field(description="Section identifier or name the rule belongs to, e.g. 'SpeedOfLight'.")
    name: str = Field(description="Rule name, e.g. 'SOLBottleneck', 'AchievedOccupancy'.")
    type: str = Field("", description="Rule type: OPT (optimisation opportunity), INF, WRN, ERR.")
    message: str = Field("", description="The rule's text.")
    speedup_type: str = Field("", description="'local' or 'global' estimated speed-up, empty when none.")
    speedup_pct: float | None = Field(None, description="Estimated speed-up in percent, when the rule gives one.")


class KernelProfile(Record):
    """The metrics of one profiled kernel launch, in canonical keys and units."""

    kernel: str = Field(description="Kernel name as Nsight Compute reports it (demangled).")
    launch_id: int = Field(0, ge=0, description="Launch index in the report (the CSV 'ID' column).")
    block: list[int] = Field(default_factory=list, description="Block size (x, y, z).")
    grid: list[int] = Field(default_factory=list, description="Grid size (x, y, z).")
    device: str = Field("", description="Device index or name the report names.")
    cc: str = Field("", description="Compute capability, e.g. '9.0'.")
    metrics: dict[str, Value] = Field(default_factory=dict,
                                      description="Canonical key -> value in the key's canonical unit.")
    extra: dict[str, Value] = Field(default_factory=dict,
                                    description="Metrics without a canonical key: 'Section / Name [unit]' -> value.")
    rules: list[RuleHit] = Field(default_factory=list, description="Guided-analysis rule results.")
    source: Literal["ncu_report", "csv"] = Field(description="How the report was read.")
    tool: str = Field("", description="Nsight Compute version, when known.")

    def number(self, key: str) -> float | None:
        """The metric as a float, or None when absent or not numeric."""
        v = self.metrics.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class EvidenceItem(Record):
    """One kept metric: its value and what it says about the bottleneck."""

    key: str = Field(description="Canonical metric key (or build-resource name).")
    value: Value = Field(description="Value in the canonical unit.")
    unit: str = Field("", description="Canonical unit.")
    why: str = Field("", description="What the metric indicates for this class.")


class Classification(Record):
    """The bottleneck class with the thresholds that decided it and the evidence kept for it."""

    bottleneck: BottleneckClass = Field(description="The class.")
    reason: str = Field(description="Which comparison decided the class, with the numbers.")
    compute_pct: float | None = Field(None, description="Compute (SM) throughput, % of peak.")
    memory_pct: float | None = Field(None, description="Memory throughput (max over units), % of peak.")
    dram_pct: float | None = Field(None, description="DRAM throughput, % of peak.")
    thresholds: dict[str, float] = Field(default_factory=dict, description="Threshold parameters used.")
    evidence: list[EvidenceItem] = Field(default_factory=list, description="The metrics that matter for the class.")
    missing: list[str] = Field(default_factory=list,
                               description="Evidence keys the class wants that the profile does not have.")
    rules: list[RuleHit] = Field(default_factory=list, description="The class's most relevant rule results.")


class Ceilings(Record):
    """Measured ceilings of one device under one driver and torch version (the roofs of the roofline)."""

    device: str = Field(description="GPU name, e.g. 'NVIDIA H200'.")
    driver: str = Field("", description="Driver version.")
    torch: str = Field(description="torch version the measurement ran under.")
    cuda: str = Field("", description="CUDA runtime torch was built with.")
    copy_gbps: float = Field(gt=0, description="Device-to-device copy: (read + written bytes) / time, GB/s.")
    matrix_tflops: dict[str, float] = Field(default_factory=dict,
                                            description="Dense matmul throughput per dtype (fp16, bf16, tf32, fp32).")
    vector_tflops: dict[str, float] = Field(default_factory=dict,
                                            description="Elementwise FMA throughput per dtype (fp16, bf16, fp32).")
    method: str = Field("", description="How each number was measured (sizes, repetitions, statistic).")
    measured_at: float = Field(0.0, description="Unix time of the measurement.")

    @property
    def key(self) -> str:
        """Cache key: device name + driver + torch version."""
        return ceilings_key(self.device, self.driver, self.torch)


def ceilings_key(device: str, driver: str, torch_version: str) -> str:
    """The cache key of ceilings: they are only valid for this device, driver and torch version."""
    return f"{device}|driver={driver}|torch={torch_version}"


class Roofline(Record):
    """Where a measured kernel sits under the roofs, from the spec's bytes and FLOPs formulas."""

    flops: float = Field(ge=0, description="FLOPs from the spec's formula.")
    bytes: float = Field(ge=0, description="Minimum DRAM bytes from the spec's formula.")
    arithmetic_intensity: float = Field(ge=0, description="flops / bytes.")
    kernel_us: float | None = Field(None, description="Kernel time the position is computed for.")
    achieved_gbps: float | None = Field(None, description="bytes / kernel time, GB/s.")
    achieved_tflops: float | None = Field(None, description="flops / kernel time, TFLOP/s.")
    ceiling_source: str = Field("", description="Where the roofs come from (ceilings cache key, copy baseline...).")
    bandwidth_gbps: float | None = Field(None, description="Memory roof, GB/s.")
    peak_tflops: float | None = Field(None, description="Compute roof, TFLOP/s.")
    peak_name: str = Field("", description="Which compute roof, e.g. 'vector fp32' or 'matrix fp16'.")
    ridge_intensity: float | None = Field(None, description="peak / bandwidth: FLOP/byte where the roofs meet.")
    bound: Literal["memory", "compute", "unknown"] = Field(
        "unknown", description="Which roof applies; unknown unless both roofs are known (or the op has no FLOPs).")
    roof_us: float | None = Field(None, description="Time at the roof: max(bytes / bandwidth, flops / peak).")
    fraction: float | None = Field(None, description="roof_us / kernel_us (1.0 = at the roof).")
    dram_bytes_profiled: float | None = Field(None, description="DRAM bytes Nsight Compute counted.")
    dram_ratio: float | None = Field(None, description="Profiled DRAM bytes / formula bytes.")
    dram_check: Literal["ok", "re-reads", "below-formula", "not-profiled"] = Field(
        "not-profiled", description="Verdict of the formula check.")
    dram_note: str = Field("", description="Explanation of the check.")


class BuildResources(Record):
    """Resources of one compiled kernel: from the Triton build and its SASS."""

    kernel: str = Field("", description="Kernel (SASS function) name.")
    registers: int | None = Field(None, description="Registers per thread.")
    spills: int | None = Field(None, description="Spilled registers (Triton's n_spills).")
    shared_bytes: int | None = Field(None, description="Shared memory per program (bytes).")
    stack_bytes: int | None = Field(None, description="Per-thread stack frame (bytes): non-zero means local memory.")
    local_loads: int | None = Field(None, description="LDL instructions in the SASS (spill reloads, local arrays).")
    local_stores: int | None = Field(None, description="STL instructions in the SASS.")
    global_loads: dict[int, int] = Field(default_factory=dict,
                                         description="LDG instructions by access width in bits.")
    global_stores: dict[int, int] = Field(default_factory=dict,
                                          description="STG instructions by access width in bits.")
    shared_loads: int | None = Field(None, description="LDS/LDSM instructions.")
    shared_stores: int | None = Field(None, description="STS instructions.")
    tensor_instructions: int | None = Field(None, description="HMMA/HGMMA/IMMA/... instructions.")
    instructions: int | None = Field(None, description="SASS instructions (NOP padding excluded).")
    source: str = Field("", description="Where the numbers came from, e.g. 'triton metadata + cuobjdump sass'.")

    @property
    def ldg128_fraction(self) -> float | None:
        """Share of global load instructions that are 128-bit wide; None without SASS or loads."""
        total = sum(self.global_loads.values())
        return None if not total else self.global_loads.get(128, 0) / total

    @property
    def stg128_fraction(self) -> float | None:
        """Share of global store instructions that are 128-bit wide."""
        total = sum(self.global_stores.values())
        return None if not total else self.global_stores.get(128, 0) / total


class Direction(str, Enum):
    """Which way a metric is expected to (or did) move."""

    UP = "up"
    DOWN = "down"
    SAME = "same"


class Hypothesis(Record):
    """A falsifiable expectation: metric `metric` moves `direction`, optionally by `magnitude`.

    `magnitude` is a signed relative change (-0.20 = 20 % lower); its sign must agree with the direction.
    The metric is a canonical profile key (e.g. 'sol_dram_pct') or 'latency_us' (kernel median).
    """

    metric: str = Field(min_length=1, description="Canonical metric key or 'latency_us'.")
    direction: Direction = Field(description="Expected direction.")
    magnitude: float | None = Field(None, description="Expected signed relative change, e.g. -0.2.")
    note: str = Field("", description="Why the proposer expects it.")

    @model_validator(mode="after")
    def _consistent(self) -> "Hypothesis":
        m = self.magnitude
        if m is not None:
            if self.direction is Direction.SAME:
                raise ValueError("a 'same' hypothesis takes no magnitude")
            if (self.direction is Direction.UP) != (m > 0):
                raise ValueError(f"magnitude {m} contradicts direction {self.direction.value!r}")
        return self


class HypothesisOutcome(Record):
    """What happened to a hypothesis' metric between parent and child."""

    hypothesis: Hypothesis
    parent: float | None = Field(None, description="Parent's value (None: not observed).")
    child: float | None = Field(None, description="Child's value (None: not observed).")
    change: float | None = Field(None, description="Relative change child/parent - 1.")
    observed: Direction | None = Field(None, description="Direction it moved, beyond noise; None if unobserved.")
    status: Literal["confirmed", "refuted", "inconclusive"] = Field(
        description="confirmed: moved as predicted; refuted: did not; inconclusive: not observed on both sides.")
    magnitude_met: bool | None = Field(None, description="Whether the predicted magnitude was reached.")
    note: str = Field("", description="How the decision was made (noise band, intervals).")


class KernelShare(Record):
    """One launch of a profile that holds several (a baseline such as eager RMSNorm may launch a few kernels)."""

    kernel: str = Field(description="Kernel name as Nsight Compute reports it.")
    launch_id: int = Field(0, ge=0, description="Launch index in the report.")
    duration_ns: float | None = Field(None, description="Nsight Compute's duration of this launch.")
    dram_bytes: float | None = Field(None, description="DRAM bytes read + written by this launch.")
    share: float | None = Field(None, description="This launch's share of the summed duration.")
    bottleneck: BottleneckClass = Field(BottleneckClass.UNKNOWN, description="This launch's class.")
    reason: str = Field("", description="The comparison that decided the class.")
    compute_pct: float | None = Field(None, description="Compute (SM) throughput, % of peak.")
    memory_pct: float | None = Field(None, description="Memory throughput, % of peak.")
    dram_pct: float | None = Field(None, description="DRAM throughput, % of peak.")


class ProfileAggregate(Record):
    """Every launch profiled inside the NVTX range, summed: what one call of the subject costs."""

    launches: int = Field(ge=0, description="Launches profiled.")
    duration_ns: float | None = Field(None, description="Sum of the launches' durations (None if one lacks it).")
    dram_bytes: float | None = Field(None, description="Sum of the launches' DRAM bytes (None if one lacks it).")
    dram_pct: float | None = Field(None, description="Duration-weighted mean of the launches' DRAM throughput %.")
    dominant: int = Field(0, ge=0, description="Index in `kernels` of the longest launch (its class is the class).")
    kernels: list[KernelShare] = Field(default_factory=list, description="Every launch, in report order.")


class RooflineAgreement(Record):
    """The fraction of the bandwidth roof seen by Nsight Compute and by the timer, under one and the same roof.

    profile fraction = (the spec's bytes formula / Nsight Compute's duration) / roof;
    timing fraction  = (the spec's bytes formula / timed kernel median) / roof;
    difference       = |profile - timing| / timing.
    Both use the formula's bytes, as the roofline does (the arithmetic intensity comes from the spec): the
    profiled DRAM bytes are a separate check (re-reads, or a wrong formula; writes still held in L2 when the
    kernel ends are not DRAM traffic yet, so a streaming kernel's DRAM bytes fall between its reads and the
    formula), reported as profile_gbps and in the note.
    """

    bandwidth_gbps: float | None = Field(None, description="The bandwidth roof both fractions use, GB/s.")
    ceiling_source: str = Field("", description="Where the roof comes from.")
    profile_bytes: float | None = Field(None, description="DRAM bytes Nsight Compute counted (all launches).")
    profile_us: float | None = Field(None, description="Nsight Compute's duration (all launches), us.")
    profile_gbps: float | None = Field(None, description="profile_bytes / profile_us: DRAM throughput, GB/s.")
    profile_fraction: float | None = Field(None, description="(timing_bytes / profile_us) / bandwidth_gbps.")
    timing_bytes: float = Field(0.0, ge=0, description="Bytes from the spec's formula.")
    timing_us: float | None = Field(None, description="Timed kernel median, us.")
    timing_source: str = Field("", description="Which measurement the timed median comes from.")
    timing_gbps: float | None = Field(None, description="timing_bytes / timing_us, GB/s.")
    timing_fraction: float | None = Field(None, description="timing_gbps / bandwidth_gbps.")
    difference: float | None = Field(None, description="|profile_fraction - timing_fraction| / timing_fraction.")
    tolerance: float = Field(0.05, ge=0, description="Largest difference that counts as agreement.")
    agrees: bool | None = Field(None, description="difference <= tolerance; None when a fraction is unknown.")
    note: str = Field("", description="What is missing, or what the two numbers say.")


class ProfileReport(Record):
    """Everything issue 4 knows about one trial's kernel. Archived in table `profiles`."""

    trial_id: str = Field(description="Trial the profile belongs to ('' for a baseline's profile).")
    candidate_id: str = Field("", description="Candidate profiled.")
    workload_id: str = Field("", description="Workload profiled.")
    kernel: KernelProfile | None = Field(None, description="The Nsight Compute profile; None when none was taken.")
    classification: Classification | None = Field(None, description="Bottleneck class and kept evidence.")
    roofline: Roofline | None = Field(None, description="Roofline position.")
    build: BuildResources | None = Field(None, description="Resources from the build and the SASS.")
    hypotheses: list[Hypothesis] = Field(default_factory=list, description="What the proposer predicted.")
    outcomes: list[HypothesisOutcome] = Field(default_factory=list, description="How the predictions fared.")
    cites: list[str] = Field(default_factory=list, description="Knowledge-base entry ids the proposal cited.")
    artifact: str = Field("", description="The .ncu-rep file, relative to the run folder ('' if none).")
    command: list[str] = Field(default_factory=list, description="The ncu command line that produced it.")
    notes: list[str] = Field(default_factory=list, description="Anything a reader must know (fallbacks, errors).")
    baseline: str = Field("", description="The baseline profiled (eager, copy, liger, ...); '' for a trial.")
    aggregate: ProfileAggregate | None = Field(
        None, description="All launches of the profiled call summed; `kernel` is the longest (dominant) one.")
    agreement: RooflineAgreement | None = Field(
        None, description="Fraction of the bandwidth roof from the profile vs from the timing.")

    @property
    def id(self) -> str:
        return "pr-" + content_hash(self.model_dump(mode="json"))
