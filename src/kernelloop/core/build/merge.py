"""A trial's build record from the build stage's artifact and the worker's first call."""

from __future__ import annotations

from ...base.records import BuildArtifact, BuildFailure, Built


def merge_build(worker: BuildArtifact | BuildFailure | None, built: Built | None, cubins: list[str] | None
                ) -> BuildArtifact | BuildFailure | None:
    """The trial's build record: what the worker's first call found (its kernels' registers, spills, shared
    memory), with the compile seconds, the build's usage and 'build stage' from an artifact the build stage made,
    and whether the worker ran its binaries (`cubins`: the worker's, compared with the build stage's)."""
    ahead = built.artifact if built is not None else None
    if ahead is None or not isinstance(worker, BuildArtifact):
        return worker if worker is not None else ahead
    used = bool(cubins) and set(cubins) <= set(built.cubins) if cubins is not None else None
    return worker.model_copy(update={
        "compile_s": ahead.compile_s, "compiled_by": "build stage", "usage": ahead.usage, "ahead_used": used,
        "registers": worker.registers if worker.registers is not None else ahead.registers,
        "shared_bytes": worker.shared_bytes if worker.shared_bytes is not None else ahead.shared_bytes,
        "warps": worker.warps if worker.warps is not None else ahead.warps})
