"""Model capture: run a model once, record every ATen call per module call site, map the call sites onto
kernelloop ops (operator cards), and write the mapped ones as workload files.

    report = capture(model, example_inputs)          # CaptureReport: cards, unmapped census, device times
    write_workloads(report, "captured/", "ops")       # captured/<op>.toml for each mapped op
"""

from .core import CaptureError, capture
from .mapping import default_ops_root
from .records import AtenVariant, CaptureReport, CensusEntry, OperatorCard, TensorInfo
from .workloads import card_weight, write_workloads

__all__ = ["AtenVariant", "CaptureError", "CaptureReport", "CensusEntry", "OperatorCard", "TensorInfo", "capture",
           "card_weight", "default_ops_root", "write_workloads"]
