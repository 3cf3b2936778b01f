"""Packaging: dispatch tables with proved guards, the export of a run's winners, and the runtime that loads them."""

from .guards import AxisRange, Guard, PartitionError, check_partition
from .runtime import Kernel, Package, PackageError, load_package
from .table import DispatchEntry, DispatchTable, Dispatcher, ShapeClaim

__all__ = ["AxisRange", "DispatchEntry", "DispatchTable", "Dispatcher", "Guard", "Kernel", "Package", "PackageError",
           "PartitionError", "ShapeClaim", "check_partition", "load_package"]
