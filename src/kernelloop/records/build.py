"""Results of compiling a candidate for one workload specialisation."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Record


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
    compile_s: float = Field(ge=0, description="Seconds spent compiling (first call).")
    toolchain: str = Field(description="Compiler identity, e.g. 'triton 3.6.0 / sm_90'.")
    binary_hash: str | None = Field(None, description="sha256 of the compiled binary, when there is one.")


class BuildFailure(Record):
    """A failed build: the log is kept and fed back to the proposer."""

    kind: Literal["failure"] = "failure"
    stage: Literal["import", "compile", "launch-config"] = Field(description="Where it failed.")
    log: str = Field(description="Compiler or import error text (truncated to 20 kB).")
    compile_s: float = Field(0.0, ge=0, description="Seconds spent before failing.")
    toolchain: str = Field(description="Compiler identity.")
