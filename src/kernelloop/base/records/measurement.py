"""Measurement: timing samples with the policy that produced them, and A/B comparisons."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import Field, field_validator

from .base import Record, content_hash


SAME_MARGIN = 0.02
"""The default SAME band: a ratio r is SAME unless its interval lies above 1 + m or below 1 / (1 + m)
(`kernelloop.core.bench.stats.verdict_for`, the one rule every comparison in kernelloop applies)."""


class TimingPolicy(Record):
    """How a number was measured. Stored with every measurement; part of the run manifest."""

    name: str = Field(description="Policy name, e.g. 'cold-l2-events' or 'interpreter-wallclock'.")
    clock: Literal["cuda-events", "wallclock"] = Field(description="What the samples were read from.")
    warmup: int = Field(ge=0, description="Untimed calls before sampling.")
    samples: int = Field(ge=3, description="Timed samples per subject.")
    flush_bytes: int = Field(ge=0, description="L2 flush buffer written before every sample (0 = none).")
    flush_mode: Literal["write", "read"] = Field(
        "write", description="How the flush buffer evicts L2: 'write' zeroes it (L2 left full of dirty lines), "
                             "'read' reduces over it (L2 left full of clean lines).")
    sleep_cycles: int = Field(ge=0, description="Device-side sleep before kernel-time samples to hide the launch.")
    interleave: Literal["random-rounds"] = Field(
        "random-rounds", description="Subjects sampled in rounds, in a fresh random order each round.")
    bootstrap: int = Field(ge=100, description="Bootstrap resamples for confidence intervals.")
    confidence: float = Field(0.95, gt=0, lt=1, description="Confidence level of intervals.")
    margin: float = Field(SAME_MARGIN, ge=0, description="Relative margin inside which a ratio counts as SAME.")
    output_sets: int = Field(
        1, ge=1, le=7, description="Output buffer sets the candidate-kind subjects (candidate and its A/A twins) "
                                   "write in turn, one set per call, each subject starting at its own offset: "
                                   "1 = each subject keeps its own buffers; > 1 spreads where the outputs lie "
                                   "in memory evenly over the subjects. Odd: a subject makes two calls per "
                                   "round (kernel time, call time), so an even count would tie its kernel-time "
                                   "samples to half of the sets.")

    @field_validator("output_sets")
    @classmethod
    def _odd_output_sets(cls, v: int) -> int:
        if v % 2 == 0:
            raise ValueError(f"output_sets must be odd (1, 3, 5, 7), got {v}: two calls per round would tie each "
                             f"subject's kernel-time samples to half of the sets")
        return v

    @property
    def id(self) -> str:
        return "p-" + content_hash(self.model_dump(mode="json"))

    @property
    def calls_per_sample(self) -> int:
        """Timed calls of each subject per round: kernel time and call time on CUDA, one wall-clock call otherwise."""
        return 2 if self.clock == "cuda-events" else 1


class Stats(Record):
    """Summary of one sample set (microseconds)."""

    median_us: float
    ci_low_us: float
    ci_high_us: float
    iqr_us: float
    n: int


class Comparison(str, Enum):
    FASTER = "FASTER"
    SAME = "SAME"
    SLOWER = "SLOWER"


class Ratio(Record):
    """Speed-up of the subject over a baseline: median(baseline)/median(subject), with a bootstrap CI."""

    baseline: str = Field(description="Baseline name, e.g. 'eager' or 'torch.compile'.")
    speedup: float = Field(description="Baseline median over subject median (>1 = subject faster).")
    ci_low: float
    ci_high: float
    verdict: Comparison = Field(description="FASTER/SLOWER only when the CI excludes 1±margin.")


class Measurement(Record):
    """Kernel time (cold L2, launch hidden) and call time (host overhead included) of one subject."""

    subject: str = Field(description="Candidate id or baseline name.")
    workload_id: str
    policy: TimingPolicy
    kernel_samples_us: list[float] = Field(description="Raw kernel-time samples, unrounded.")
    call_samples_us: list[float] = Field(description="Raw call-time samples, unrounded.")
    kernel: Stats
    call: Stats
    bytes_moved: float = Field(description="From the spec's formula.")
    gbps: float = Field(description="bytes_moved / kernel median.")
    roofline_fraction: float | None = Field(None, description="Copy-roof time over kernel median (1.0 = copy speed).")
    ratios: list[Ratio] = Field(default_factory=list, description="Speed-ups over each baseline (kernel time).")
    environment: dict = Field(default_factory=dict, description="Clocks/temperature snapshot when available.")
