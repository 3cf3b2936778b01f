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


class SanitizerToolOutcome(Record):
    """One compute-sanitizer tool's run, in brief (the full text is in `SanitizerOutcome.report`)."""

    tool: str = Field(description="memcheck, racecheck, synccheck or initcheck.")
    status: Literal["clean", "findings", "error", "not_run"]
    reason: str = Field("", description="Why it is not clean, in words.")
    error_count: int | None = Field(None, description="From the tool's ERROR SUMMARY (None: none printed).")


class SanitizerOutcome(Record):
    """compute-sanitizer over one candidate on a small shape (kernelloop.core.verify.sanitizer), before its confirmation
    or packaging. Only `clean` says the tools looked and found nothing; `not_run` (no compute-sanitizer, no CUDA,
    Triton's interpreter), `error` (a tool's run failed otherwise) and `off` (--no-sanitize) are no pass."""

    status: Literal["clean", "findings", "error", "not_run", "off"]
    candidate_id: str
    workload: dict[str, int] = Field(default_factory=dict, description="Axes of the small shape it ran on.")
    case: str = Field("", description="The small shape's label and input seed.")
    reason: str = Field("", description="Why it did not run, or why a tool's run failed.")
    verdict: str = Field("", description="findings: the REJECTED verdict's message (tool and first finding).")
    tools: list[SanitizerToolOutcome] = Field(default_factory=list)
    report: str = Field("", description="findings and error: the tools' reports (head and tail).")


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
    sanitizer: SanitizerOutcome | None = Field(
        None, description="compute-sanitizer over the winner before it was confirmed: clean, not_run with the "
                          "reason, error, or off (--no-sanitize); a winner with findings is never confirmed "
                          "(None: archived before the sanitizer ran at confirmation).")
    sanitizer_rejected: list[str] = Field(
        default_factory=list, description="Faster candidates of the workload that compute-sanitizer rejected "
                                          "before this one was confirmed (their reports are archived events).")


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
