"""kernelloop: a closed loop that makes GPU kernels faster and proves it.

The delivery path, as a Python API (each name is imported on first use, so `import kernelloop` stays light):

    report = kernelloop.capture(model, example_inputs)      # operator cards (kernelloop.deliver.capture.CaptureReport)
    kernelloop.capture.write_workloads(report, "cards/")    # one workloads file per op the cards map onto
    # kernelloop optimize <op> --workloads cards/<op>.toml --out runs/<op>    (the loop, per op)
    kernelloop.export(["runs/rmsnorm", "runs/gemm_nt"], "pkg/")              # a verified, hashed package
    pkg = kernelloop.load_package("pkg/")
    with kernelloop.apply(model, pkg) as patched: ...        # the model calls the package's torch ops
    result = kernelloop.e2e(model, pkg, example_inputs)     # outputs within tolerance? faster?
    gen = kernelloop.e2e_generate(model, pkg, input_ids, new_tokens=16)   # same greedy tokens? tokens/s, p99 step

All of it in one call (kernelloop.deliver.accelerate; docs/api.md):

    result = kernelloop.accelerate(model, example_inputs, budget=2, out="fast")   # patched in place, resumable
    result.summary                                           # what was patched, and why the rest was not

The loop itself (kernelloop.deliver.api; docs/api.md):

    run = kernelloop.optimize("layernorm", budget=4, device="interpret", out="runs/ln")   # -> kernelloop.Run
    run = kernelloop.Run.load("runs/ln")
    run.best("layernorm[64x256]:fp16"), run.trials(status="PASSED"), run.front(WORKLOAD), run.summary()
"""

from __future__ import annotations

import importlib

from .base.version import __version__

__all__ = ["Run", "UsageError", "accelerate", "apply", "capture", "e2e", "e2e_generate", "export", "load_package", "optimize"]


def export(runs, out, **options):
    """Package runs' PASSED winners (see kernelloop.deliver.package.export.ExportOptions for the options)."""
    from pathlib import Path

    from .deliver.package.export import ExportOptions, export_package
    return export_package([Path(r) for r in runs], ExportOptions(out=Path(out), **options))


def __getattr__(name: str):
    if name in ("cli", "deliver", "tune", "core", "base"):   # the floors: `kernelloop.core.spec` after `import kernelloop`
        return importlib.import_module(f".{name}", __name__)
    if name == "capture":
        return importlib.import_module(".deliver.capture", __name__)   # a module that is also callable: capture(model, x)
    if name == "accelerate":
        from .deliver.accelerate import accelerate
        return accelerate
    if name == "apply":
        from .deliver.integrate.apply import apply
        return apply
    if name == "e2e":
        from .deliver.integrate.e2e import e2e
        return e2e
    if name == "e2e_generate":
        from .deliver.integrate.generate import e2e_generate
        return e2e_generate
    if name == "api":
        return importlib.import_module(".deliver.api", __name__)
    if name in ("optimize", "Run", "UsageError"):
        from .deliver import api
        return getattr(api, name)
    if name == "load_package":
        from .deliver.package.runtime import load_package
        return load_package
    raise AttributeError(f"module 'kernelloop' has no attribute {name!r}")
