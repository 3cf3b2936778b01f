"""One call from a model to a patched model: `kernelloop.accelerate(model, example_inputs, budget=2, out=DIR)`.

    result = kernelloop.accelerate(model, (ids,), budget=2, out="llama-fast", device="cpu")
    result.summary            # AccelerateSummary: per card patched or why not, per op its run, package, e2e, verdict
    result.applied            # the package's patches left on `model` (result.applied.undo() restores it)
    result.fused              # fuse=True: the fused graph fusion kept (inference only), else None; summary.fusion

capture -> one workloads file per mapped op -> the loop per op (`api.plan` + `kernelloop.tune.loop.run`, as
`kernelloop.optimize`) -> export -> e2e -> (fuse=True: `kernelloop.fuse`, fusion.py) -> apply; resumable in its
folder (pipeline.py says how)."""

from .pipeline import Accelerated, accelerate
from .records import (AccelerateSummary, CardOutcome, CardStatus, FolderState, FusedPattern, FusionOutcome,
                      FusionStatus, OpOutcome, OpState, Verdict)

__all__ = ["AccelerateSummary", "Accelerated", "CardOutcome", "CardStatus", "FolderState", "FusedPattern",
           "FusionOutcome", "FusionStatus", "OpOutcome", "OpState", "Verdict", "accelerate"]
