"""Model capture: run a model once, record every ATen call per module call site, map the call sites onto
kernelloop ops (operator cards), and write the mapped ones as workload files.

    report = capture(model, example_inputs)          # CaptureReport: cards, unmapped census, device times
    write_workloads(report, "captured/", "ops")       # captured/<op>.toml for each mapped op

The package itself is callable as well (`kernelloop.capture(model, example_inputs)` is `capture(...)`), as the
top-level API in kernelloop/__init__.py documents.
"""

import sys
import types

from .core import CaptureError, capture
from .mapping import default_ops_root
from .records import AtenVariant, CaptureReport, CensusEntry, OperatorCard, TensorInfo
from .workloads import card_weight, write_workloads

__all__ = ["AtenVariant", "CaptureError", "CaptureReport", "CensusEntry", "OperatorCard", "TensorInfo", "capture",
           "card_weight", "default_ops_root", "write_workloads"]


class _CallableModule(types.ModuleType):
    """This package's module type: calling it calls capture()."""

    def __call__(self, model, example_inputs, **options) -> CaptureReport:
        return capture(model, example_inputs, **options)


sys.modules[__name__].__class__ = _CallableModule


def __getattr__(name: str):
    if name == "models":   # kernelloop.deliver.capture.models.build("llama-tiny") without importing transformers up front
        import importlib
        return importlib.import_module(".models", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
