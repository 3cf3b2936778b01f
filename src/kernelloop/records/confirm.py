"""Confirmation across processes: a winner and its baselines re-measured in several fresh worker processes, the
spread between them, and the interval stated for the winner (widened to cover that spread: docs/timing.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Record
from .measurement import Comparison


class ProcessRun(Record):
    """One fresh worker process of a confirmation."""

    index: int = Field(description="0-based order of the process in the confirmation.")
    pid: int | None = Field(None, description="The worker's process id (distinct processes: distinct ids).")
    kernel_us: dict[str, float] = Field(description="Kernel-time median of every subject (candidate, baselines).")
    ci_us: dict[str, tuple[float, float]] = Field(description="Bootstrap interval of each median, this process.")
    speedups: dict[str, float] = Field(default_factory=dict, description="Candidate's speed-up over each baseline.")
    speedup_ci: dict[str, tuple[float, float]] = Field(default_factory=dict,
                                                       description="Paired bootstrap interval of each speed-up.")


class StatedSpeedup(Record):
    speedup: float = Field(description="Median of the per-process speed-ups.")
    interval: tuple[float, float] = Field(description="Stated interval: covers every process's speed-up and CI.")
    verdict: Comparison = Field(description="FASTER/SLOWER only when the stated interval excludes 1 ± the margin.")


class CrossProcessConfirmation(Record):
    """What the confirmation of one workload's winner states, and the figures it rests on."""

    workload_id: str
    candidate_id: str
    policy: str = Field(description="Timing policy name of every process's samples.")
    processes: list[ProcessRun] = Field(min_length=1)
    spread: dict[str, float] = Field(description="(max - min) / median of each subject's per-process medians.")
    within: float = Field(description="Widest relative half-width of a per-process bootstrap interval (candidate).")
    half_width: float = Field(description="Relative half-width of the stated interval: max(within, spread).")
    kernel_us: float = Field(description="Median of the candidate's per-process medians.")
    interval_us: tuple[float, float] = Field(
        description="Stated interval: kernel_us x (1 -/+ half_width), stretched to the extreme per-process medians.")
    speedups: dict[str, StatedSpeedup] = Field(default_factory=dict)


class Reproduction(Record):
    """`kernelloop reproduce`: an archived measurement re-measured cold in a fresh worker process."""

    run: str
    trial: str
    candidate: str
    workload: str = Field(description="Workload label.")
    device: str
    source: Literal["confirmation", "trial"] = Field(
        description="What the recorded figure is: the cross-process confirmation, or the trial's own measurement.")
    recorded_us: float = Field(description="Recorded kernel-time median.")
    interval_us: tuple[float, float] = Field(description="The interval stated with it.")
    measured_us: float = Field(description="Kernel-time median re-measured now, in a fresh process.")
    measured_ci_us: tuple[float, float]
    policy: str
    reproduced: bool = Field(description="measured_us lies inside interval_us.")
