"""The run summary as records: what `kernelloop show --json` and `optimize --json` print and what `kernelloop.Run`
returns. One name per quantity: `roofline_fraction` is the copy-roof time over the kernel median everywhere (the
`Measurement` field of the same name); `agent submit`, `agent status` and the LLM context use it too.

`deliver/report/summary.py`'s `run_summary` reads the archive and builds this record directly; the terminal, HTML and
JSON writers render it. Keys that do not apply (a workload without a passing candidate has no `best`) are left out
of the JSON.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import ConfigDict, Field, model_serializer, model_validator

from .base import Record
from .confirm import CrossProcessConfirmation, SanitizerOutcome
from .integrity import RunIntegrity
from .llm import LLMSection
from .measurement import Comparison, Measurement
from .run import RunStatus, Throughput


class SummaryRecord(Record):
    """A record whose optional keys named in `omit_if_none` are absent from its JSON when they are None."""

    omit_if_none: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit(self, handler):
        data = handler(self)
        for key in self.omit_if_none:
            if data.get(key, 0) is None:
                del data[key]
        return data


class SpeedupSummary(Record):
    speedup: float = Field(description="Baseline median over subject median (>1 = subject faster).")
    ci: tuple[float, float] = Field(description="Bootstrap confidence interval of the speed-up.")
    verdict: Comparison = Field(description="FASTER/SLOWER only when the interval excludes 1 ± the margin.")


class MeasurementSummary(Record):
    """The figures of one measurement (search trial, confirmation or baseline)."""

    kernel_us: float = Field(description="Kernel-time median, µs.")
    kernel_ci_us: tuple[float, float] = Field(description="Confidence interval of the kernel median, µs.")
    call_us: float = Field(description="Call-time (host launch included) median, µs.")
    call_ci_us: tuple[float, float] = Field(description="Confidence interval of the call median, µs.")
    gbps: float = Field(description="Bytes moved (the spec's formula) over the kernel median, GB/s.")
    roofline_fraction: float | None = Field(description="Copy-roof time over kernel median (1.0 = copy speed).")
    speedups: dict[str, SpeedupSummary] = Field(description="Speed-up over each baseline measured beside it.")
    policy: str = Field(description="Timing policy name.")
    samples: int = Field(description="Kernel-time samples.")

    @classmethod
    def of(cls, m: Measurement) -> "MeasurementSummary":
        return cls(kernel_us=m.kernel.median_us, kernel_ci_us=(m.kernel.ci_low_us, m.kernel.ci_high_us),
                   call_us=m.call.median_us, call_ci_us=(m.call.ci_low_us, m.call.ci_high_us), gbps=m.gbps,
                   roofline_fraction=m.roofline_fraction, policy=m.policy.name, samples=m.kernel.n,
                   speedups={r.baseline: SpeedupSummary(speedup=r.speedup, ci=(r.ci_low, r.ci_high),
                                                        verdict=r.verdict) for r in m.ratios})


class RunnerUp(Record):
    """The next-fastest candidate beside a workload's best."""

    candidate: str
    label: str
    trial: str
    kernel_us: float
    kernel_ci_us: tuple[float, float]
    overlaps: bool = Field(description="Its kernel interval overlaps the best's: the ranking is not resolved.")


class BestSummary(SummaryRecord):
    """A workload's fastest PASSED candidate in the search."""

    omit_if_none: ClassVar[tuple[str, ...]] = ("runner_up",)
    candidate: str = Field(description="Candidate id.")
    label: str = Field(description="Template and configuration, e.g. 'row(BLOCK_N=1024,num_warps=4)'.")
    trial: str = Field(description="Trial id.")
    search: MeasurementSummary = Field(description="The search trial's measurement.")
    registers: int | None = Field(None, description="Registers per thread (None in the interpreter).")
    spills: int | None = Field(None, description="Register spills (None in the interpreter).")
    runner_up: RunnerUp | None = None


class BaselineSummary(SummaryRecord):
    """A baseline measured beside the confirmed best; only a note when it could not be measured."""

    kernel_us: float | None = None
    kernel_ci_us: tuple[float, float] | None = None
    call_us: float | None = None
    call_ci_us: tuple[float, float] | None = None
    gbps: float | None = None
    roofline_fraction: float | None = None
    speedups: dict[str, SpeedupSummary] | None = None
    policy: str | None = None
    samples: int | None = None
    note: str = ""

    @model_serializer(mode="wrap")
    def _omit(self, handler):   # a measured baseline keeps every figure, a None roofline_fraction too
        data = handler(self)
        return data if self.kernel_us is not None else {"note": self.note}


class ConfirmedSummary(MeasurementSummary):
    """The best re-measured beside every baseline, interleaved, with more samples."""

    candidate: str
    baselines: dict[str, BaselineSummary] = Field(default_factory=dict)
    across_processes: CrossProcessConfirmation | None = Field(
        None, description="The confirmation in fresh worker processes: per-process medians, their spread, the "
                          "stated interval (tune/select/confirm.py); absent for runs confirmed in one process.")


class FrontEntry(Record):
    """One candidate on a workload's Pareto front (every objective minimised)."""

    model_config = ConfigDict(extra="allow")   # objectives of older archives load too
    candidate: str
    latency_us: float | None = None
    registers: float | None = None
    shared_bytes: float | None = None
    compile_s: float | None = None


class HypothesisSummary(Record):
    """How the planner's predictions fared on a workload's trials."""

    confirmed: int
    refuted: int
    inconclusive: int
    hit_rate: float | None = Field(description="confirmed / (confirmed + refuted); None when none was decided.")
    trials: int = Field(description="Trials whose report carried hypotheses.")
    reports: int
    profiled: int
    by_metric: dict[str, dict[str, int]]


class SanitizerCheck(SanitizerOutcome):
    """compute-sanitizer over one candidate of the workload (an archived `sanitize` event: tune/select/sanitize.py)."""

    stage: str = Field(description="confirm: before the winner's confirmation.")
    workload_id: str
    label: str = Field(description="The workload's label (the small shape is `workload` / `case`).")
    candidate: str
    candidate_label: str = ""
    trial: str | None = None


class WorkloadSummary(SummaryRecord):
    omit_if_none: ClassVar[tuple[str, ...]] = ("best", "confirmed", "hypotheses")
    id: str
    label: str
    axes: dict[str, int]
    dtype: str
    weight: float
    trials: int
    passed: int
    best: BestSummary | None = None
    confirmed: ConfirmedSummary | None = None
    front: list[FrontEntry] = Field(default_factory=list)
    hypotheses: HypothesisSummary | None = None
    sanitizer: list[SanitizerCheck] = Field(
        default_factory=list, description="compute-sanitizer's outcomes on the workload's candidates, in order; a "
                                          "candidate with findings is REJECTED and never the best.")


class CostSummary(SummaryRecord):
    """Seconds spent over every trial of the run (profile_s: the planner's profiling only)."""

    omit_if_none: ClassVar[tuple[str, ...]] = ("profile_s",)
    compile_s: float
    verify_s: float
    bench_s: float
    wall_s: float
    profile_s: float | None = None


class PruneSummary(Record):
    """One template's pruning on one workload: how many configurations, how many kept, removals by reason."""

    model_config = ConfigDict(extra="allow")   # prune events of older archives load too
    workload: str | None = None
    label: str | None = None
    template: str | None = None
    total: int | None = None
    kept: int | None = None
    pruned: int | None = None
    reasons: dict[str, int] = Field(default_factory=dict)


class FailedTrial(SummaryRecord):
    omit_if_none: ClassVar[tuple[str, ...]] = ("at", "signal", "exitcode")
    trial: str
    index: int
    candidate: str
    label: str
    workload_id: str
    stage: str | None = Field(description="Where it failed: import, build, verify case k, timing.")
    case: Any = Field(description="The failing case (shape, dtype, distribution, seed, check, held-out class).")
    case_label: str
    message: str
    at: str | None = None
    signal: str | None = None
    exitcode: int | None = None


class FailureGroup(Record):
    reason: str
    status: str
    count: int
    trials: list[FailedTrial]


class PriorFile(Record):
    """A recording a warm start learnt from."""

    path: str = Field(description="The path as given.")
    sha256: str = Field(description="sha256 of the file's bytes.")


class WarmStart(SummaryRecord):
    """What warm-started a run's search (`--prior`; tune/replay/prior.py's `RecordedPrior.as_dict`, archived with
    the options): the recordings and how many configurations the prior learnt from. A run of one recording also has
    its `path` and `sha256` at the top (the form archived before several recordings were allowed; such an archive,
    without `files`, still reads)."""

    omit_if_none: ClassVar[tuple[str, ...]] = ("path", "sha256")
    files: list[PriorFile] = Field(min_length=1, description="Each recording, in the order given.")
    configurations: int = Field(ge=0, description="Distinct configurations the prior learnt from.")
    path: str | None = Field(None, description="The only recording's path (one recording only).")
    sha256: str | None = Field(None, description="The only recording's sha256 (one recording only).")

    @model_validator(mode="before")
    @classmethod
    def _one_file_form(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("files") and "path" in data and "sha256" in data:
            return {**data, "files": [{"path": data["path"], "sha256": data["sha256"]}]}
        return data


class RunSummary(SummaryRecord):
    """One run, read from its archive."""

    omit_if_none: ClassVar[tuple[str, ...]] = ("run_dir", "integrity")
    run: str = Field(description="Run id.")
    op: str
    status: RunStatus = Field(description="running (not finished: interrupted, crashed, or still running) or complete.")
    manifest_hash: str
    device: str | None
    gpu: str | None
    torch: str | None
    triton: str | None
    interpreter: bool = Field(description="Timings are Triton-interpreter wall-clock times, not kernel performance.")
    prior: WarmStart | None = Field(description="What warm-started the search (None: nothing did).")
    counts: dict[str, int] = Field(description="Trials per verdict status.")
    costs: CostSummary
    throughput: Throughput = Field(description="Trials per minute, each device's busy share of the wall time, the "
                                               "time lost waiting for builds (base/records/run.py says what is measured).")
    pruning: list[PruneSummary]
    workloads: list[WorkloadSummary]
    failures: list[FailureGroup]
    llm: LLMSection | None = Field(description="LLM calls, tokens and prices (None without an LLM).")
    run_dir: str | None = Field(None, description="The run folder (optimize's output only).")
    integrity: RunIntegrity | None = Field(None, description="Whether the archive's rows carry good MACs under the "
                                                             "run key: authenticated, tampered (those trials are "
                                                             "TAMPERED, never PASSED or best), unauthenticated "
                                                             "(legacy) or unverifiable here.")

    def workload(self, key: str | None = None) -> WorkloadSummary:
        """A workload by id or label; without a key the only one (ValueError naming them when there are several)."""
        if key is None:
            if len(self.workloads) == 1:
                return self.workloads[0]
            raise ValueError(f"the run has {len(self.workloads)} workloads; name one of: "
                             f"{', '.join(w.label for w in self.workloads)}")
        for w in self.workloads:
            if key in (w.id, w.label):
                return w
        raise KeyError(f"no workload {key!r} in run {self.run}; it has: {', '.join(w.label for w in self.workloads)}")


__all__ = ["BaselineSummary", "BestSummary", "ConfirmedSummary", "CostSummary", "FailedTrial", "FailureGroup",
           "FrontEntry", "HypothesisSummary", "MeasurementSummary", "PriorFile", "PruneSummary", "RunSummary", "RunnerUp",
           "SanitizerCheck", "SpeedupSummary", "WarmStart", "WorkloadSummary"]
