"""What one `Controller.run` returns (`RunResult`) and how fast a run went (`Throughput`).

`Throughput` is computed from the archive alone (`kernelloop.tune.loop.throughput.throughput`), so `Controller.run`,
`kernelloop show` and `kernelloop.Run.summary()` report the same figures for the same archive. What is measured:

- wall time: the search phase of each invocation of the controller, from its first ask to the end of its last trial
  (confirmation and compute-sanitizer over the winners excluded), summed over invocations. Each invocation archives
  it as a `search-session` event; trials no session covers (an archive written before these events, or an
  invocation killed before logging its session) add the span from the first one's start to the last one's end.
- trials per minute: the archived trials over that wall time (trials replayed from the archive on resume are not
  counted again).
- device busy: per device (each worker's GPU, MIG slice or interpreter worker; trials name it), the seconds it spent
  verifying and timing candidates, over the wall time. Compilation is not device time when the build stage compiled
  ahead (on the host's CPU) or nothing was compiled (the interpreter); when the worker's first call compiled, that
  call's seconds are taken out of verification.
- build wait: the seconds the devices sat idle while candidates were still being built (measured by the executor and
  archived with each search session), plus compilation in a first call (in the critical path). Archives from before
  the build stage have no measured wait: there every build was in the critical path and it is the sum of the
  trials' `compile_s`.
"""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from .base import Record


class DeviceBusy(Record):
    """One device's share of the run's wall time spent on candidates."""

    device: str = Field(description="The device ('cuda', 'cuda:1', 'interpret:0', ...; in archives from before "
                                    "devices were recorded, the model's name).")
    model: str = Field("", description="The GPU's name, or 'interpret' (the Triton interpreter, on the CPU).")
    trials: int = Field(0, description="Trials it verified (and timed when they passed).")
    transports: dict[str, int] = Field(default_factory=dict, description="Its trials by how the worker's tensors "
                                       "reached the controller (Trial.transport: arena, cuda-ipc, host-arena).")
    verify_s: float = Field(description="Seconds verifying candidates (the build inside verification excluded).")
    bench_s: float = Field(description="Seconds timing candidates.")
    busy_fraction: float | None = Field(description="(verify_s + bench_s) / wall_s; None when no wall time was "
                                                    "measured.")


class Throughput(Record):
    """How fast the search went: trials per minute, the devices' busy share, the time lost waiting for builds."""

    trials: int = Field(description="Trials archived (evaluated) in the measured wall time.")
    wall_s: float = Field(description="Wall seconds of the search phase, summed over invocations.")
    sessions: int = Field(description="Invocations whose search phase was archived as a `search-session` event.")
    trials_per_minute: float | None = Field(description="trials / (wall_s / 60); None without wall time.")
    devices: list[DeviceBusy] = Field(description="Per device.")
    build_wait_s: float = Field(description="Seconds the devices waited for builds (see the module's text).")
    build_wait_fraction: float | None = Field(description="build_wait_s / wall_s; None without wall time.")


class WorkloadResult(Record):
    """One workload after a run: its trials and its fastest PASSED one (None: nothing passed)."""

    workload_id: str
    label: str
    trials: int
    passed: int
    best_trial: str | None = Field(None, description="Trial id of the fastest PASSED trial the search kept.")
    best_candidate: str | None = None
    best_kernel_us: float | None = Field(None, description="Its kernel-time median, µs.")
    confirmed: bool = Field(False, description="The best was confirmed beside the baselines.")


class RunStatus(str, Enum):
    """A run's archived status: `running` from its creation until the controller finishes it (an interrupted or
    crashed run stays `running`; `--resume` continues it), then `complete`."""

    RUNNING = "running"
    COMPLETE = "complete"

    def __str__(self) -> str:
        return self.value


class StopReason(str, Enum):
    """Why the search of one invocation stopped (the JSON keeps the text values)."""

    EVALUATIONS = "evaluation budget"
    SPACE = "space exhausted"
    WALL_TIME = "wall-time budget"
    GPU_SECONDS = "gpu-seconds budget"

    def __str__(self) -> str:
        return self.value


STOP_REASONS = tuple(r.value for r in StopReason)


class RunResult(Record):
    """What `Controller.run` returns: the run, where it is archived, why this invocation stopped, what it found."""

    run_id: str
    run_dir: str
    archive: str = Field(description="Path of the run's archive.sqlite.")
    status: RunStatus = Field(description="The archived run status.")
    stop_reason: StopReason = Field(description="Why the search of this invocation stopped.")
    evaluated: int = Field(description="Trials this invocation evaluated.")
    replayed: int = Field(description="Trials this invocation read back from the archive (a resumed run).")
    counts: dict[str, int] = Field(description="Trials of the whole run per verdict status.")
    workloads: list[WorkloadResult]
    throughput: Throughput

    def workload(self, key: str) -> WorkloadResult:
        """A workload by id or label (KeyError naming them otherwise)."""
        for w in self.workloads:
            if key in (w.workload_id, w.label):
                return w
        raise KeyError(f"no workload {key!r} in run {self.run_id}; it has: "
                       f"{', '.join(w.label for w in self.workloads)}")


__all__ = ["DeviceBusy", "RunResult", "RunStatus", "STOP_REASONS", "StopReason", "Throughput", "WorkloadResult"]
