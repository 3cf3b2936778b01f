"""Compiled kernels at the PTX level: recover a Triton kernel's PTX, round-trip it through Triton's own ptxas,
find its hot windows, propose edits of them, check them statically and prove them against the original kernel
before timing (docs/ptx.md)."""

from .checks import check_edit
from .mutate import mutations, wrong_edits
from .recover import from_cache_dir, from_candidate, from_cubin, from_ptx, recover
from .records import (Difference, HotWindow, KernelReport, Mutation, PtxCandidate, PtxEntry, PtxHunk, PtxParam,
                      RecoveredKernel, Recovery, RoundTrip, Violation)
from .roundtrip import round_trip
from .rules import propose
from .windows import hot_windows

__all__ = ["Difference", "HotWindow", "KernelReport", "Mutation", "PtxCandidate", "PtxEntry", "PtxHunk", "PtxParam",
           "RecoveredKernel", "Recovery", "RoundTrip", "Violation", "check_edit", "from_cache_dir", "from_candidate",
           "from_cubin", "from_ptx", "hot_windows", "mutations", "propose", "recover", "round_trip", "wrong_edits"]
