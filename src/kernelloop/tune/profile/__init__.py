"""Seeing why a kernel is slow: Nsight Compute adapter, bottleneck classification, roofline, build resources.

- `ncu`: run Nsight Compute on one candidate's kernel (subprocess, deadline, NVTX + kernel-name filter);
- `ncu_report_adapter` / `ncu_csv`: read the `.ncu-rep` with NVIDIA's module, or its CSV export;
- `metrics`: canonical metric keys and units;
- `classify`: compute / memory-bandwidth / memory-latency / near-limit, with the evidence each keeps;
- `aggregate`: several launches of one profiled call summed; profile-vs-timing roof-fraction agreement;
- `roofline` / `ceilings`: arithmetic intensity from the spec, measured and cached roofs, DRAM-bytes check;
- `sass`: registers, spills, local memory and global access widths from the cubin's SASS;
- `hypothesis`: expected moves of metrics and their outcomes parent -> child;
- `report`: the ProfileReport of a trial or a baseline, and profile-and-archive;
- `explain`: the records `kernelloop profile` prints for a run's trials and baselines; `on_demand`: its `--ncu`;
- `harness`: the process ncu profiles (a candidate's `launch`, or a baseline, inside an NVTX range).
"""

from .classify import DEFAULT_THRESHOLDS, Thresholds, classify
from .hypothesis import LATENCY, Noise, evaluate_hypotheses, format_hypotheses, observations, parse_hypotheses
from .ncu_csv import parse_details_csv, read_details_csv, select_kernel
from .report import make_report, roofline_for
from .roofline import DramTolerance, dram_check, roofline_from_ceilings, roofline_from_copy, roofline_position
from .sass import parse_sass, resources_from_cubin, resources_from_triton

__all__ = ["DEFAULT_THRESHOLDS", "DramTolerance", "LATENCY", "Noise", "Thresholds", "classify", "dram_check",
           "evaluate_hypotheses", "format_hypotheses", "make_report", "observations", "parse_details_csv",
           "parse_hypotheses", "parse_sass", "read_details_csv", "resources_from_cubin", "resources_from_triton",
           "roofline_for", "roofline_from_ceilings", "roofline_from_copy", "roofline_position", "select_kernel"]
