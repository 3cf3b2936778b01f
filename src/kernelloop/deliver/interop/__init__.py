"""Import and export of the FlashInfer-Trace format (Definition / Workload / Solution / Trace).

Records: `flashinfer_trace` (the schema of flashinfer-bench 40e6ca7844b5, typed). kernelloop -> FlashInfer:
`export` (and `solution_code` for a solution's file); a whole run archive: `dataset.export_run`. FlashInfer ->
kernelloop: `importer` (with `import_code` for the files it writes). Everything that does not fit is an
`InteropError` naming the field.
"""

from . import flashinfer_trace
from .dataset import Dataset, ExportReport, export_run, load_dataset
from .errors import InteropError, parse, read_json, read_jsonl
from .export import (STATUS_MAP, definition_name, export_definition, export_definitions, export_solution,
                     export_trace, export_workload, export_workloads, solution_name)
from .flashinfer_trace import FLASHINFER_BENCH_COMMIT, Definition, Solution, Trace
from .flashinfer_trace import Workload as FiWorkload
from .importer import import_definition, import_workloads

__all__ = [
    "FLASHINFER_BENCH_COMMIT", "STATUS_MAP", "Dataset", "Definition", "ExportReport", "FiWorkload", "InteropError",
    "Solution", "Trace", "definition_name", "export_definition", "export_definitions", "export_run",
    "export_solution", "export_trace", "export_workload", "export_workloads", "flashinfer_trace", "import_definition",
    "import_workloads", "load_dataset", "parse", "read_json", "read_jsonl", "solution_name",
]
