"""Results of compiling a candidate for one workload specialisation."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Record
from .verdict import Verdict


COMPILED_BY = ("build stage", "first call", "interpreter")


class BuildUsage(Record):
    """What a build cost the host that made it: the build process's CPU time and memory."""

    process: int = Field(description="Which build process of the build stage made it (0-based).")
    wall_s: float = Field(ge=0, description="Wall seconds of the build request, imports of the source included.")
    cpu_s: float = Field(ge=0, description="CPU seconds (user + system) the build process spent on it.")
    max_rss_bytes: int = Field(ge=0, description="Peak resident memory of the build process so far.")
    workloads: int = Field(ge=0, description="Shapes it was built for (the trial's workload and held-out shapes "
                                             "that specialise differently are built alike).")


class BuildArtifact(Record):
    """A successful build: resources of each compiled kernel, compile time and toolchain."""

    kind: Literal["artifact"] = "artifact"
    kernel_names: list[str] = Field(default_factory=list, description="Kernels compiled for the call.")
    registers: int | None = Field(None, description="Registers per thread (max over kernels); None in the interpreter.")
    spills: int | None = Field(None, description="Spilled registers (max over kernels); None in the interpreter.")
    shared_bytes: int | None = Field(None, description="Shared memory per program in bytes (max over kernels).")
    warps: int | None = Field(None, description="Warps per program as compiled (max over kernels): more than the "
                                                "config's num_warps where Triton warp-specialized a loop; None in "
                                                "the interpreter and in records made before it was kept.")
    compile_s: float = Field(ge=0, description="Seconds spent compiling: by the build stage, its build process's "
                                               "compile seconds; by the first call, that call's seconds (possibly "
                                               "a disk-cache hit); in the interpreter 0 (nothing is compiled).")
    toolchain: str = Field(description="Compiler identity, e.g. 'triton 3.6.0 / sm_90'.")
    binary_hash: str | None = Field(None, description="sha256 of the compiled binary, when there is one.")
    compiled_by: Literal["build stage", "first call", "interpreter"] = Field(
        "first call", description="Who compiled it: 'build stage' (a build process on the host's CPU, ahead of "
                                  "the GPU stage), 'first call' (the worker's first verification call), "
                                  "'interpreter' (nothing: the Triton interpreter runs the source).")
    first_call_s: float | None = Field(None, ge=0, description="Seconds of the worker's first call (loading what "
                                                               "the build stage built; in the interpreter, the "
                                                               "first interpreted call); None in older records.")
    usage: BuildUsage | None = Field(None, description="What the build cost the host (build stage only).")
    ahead_used: bool | None = Field(None, description="The worker ran binaries the build stage built (cubin "
                                                      "hashes equal); None when not compared.")


class BuildFailure(Record):
    """A failed build: the log is kept and fed back to the proposer."""

    kind: Literal["failure"] = "failure"
    stage: Literal["import", "compile", "launch-config"] = Field(description="Where it failed.")
    log: str = Field(description="Compiler or import error text (truncated to 20 kB).")
    compile_s: float = Field(0.0, ge=0, description="Seconds spent before failing.")
    toolchain: str = Field(description="Compiler identity.")


class BuildStepRecord(Record):
    """One step of the build stage for one trial (kernelloop.core.build.steps)."""

    step: str = Field(description="The step's name, e.g. 'static rules', 'triton compile'.")
    seconds: float = Field(ge=0, description="Wall seconds of the step.")
    outcome: str = Field(description="'passed', 'rejected', 'compile error', 'skipped' or what else the step says.")
    note: str = Field("", description="Why, in a sentence (a build that failed without a verdict: the worker "
                                      "decides).")


class Built(Record):
    """What the build stage made of one candidate on one workload, before any GPU work: the steps it ran and either
    a verdict that ends the trial there (REJECTED by a rule or a gate, COMPILE_ERROR with the compiler's log) or
    the artifact the GPU stage starts from (None where nothing was compiled ahead: the interpreter)."""

    steps: list[BuildStepRecord] = Field(default_factory=list)
    verdict: Verdict | None = None
    failure: BuildFailure | None = Field(None, description="A compile failure (with `verdict` COMPILE_ERROR).")
    artifact: BuildArtifact | None = None
    cubins: list[str] = Field(default_factory=list, description="sha256 of every cubin the build stage made.")
    queued_s: float = Field(0.0, ge=0, description="Seconds it waited for a build process.")
    seconds: float = Field(0.0, ge=0, description="Wall seconds from its submission to the build stage to done.")
