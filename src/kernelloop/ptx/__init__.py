"""Compiled kernels at the PTX level: recover a Triton kernel's PTX, round-trip it through Triton's own ptxas,
and check an edited PTX statically before it goes anywhere near a GPU (docs/ptx.md)."""

from .checks import check_edit
from .mutate import mutations
from .recover import from_cache_dir, from_candidate, from_cubin, from_ptx, recover
from .records import (Difference, KernelReport, Mutation, PtxEntry, PtxParam, RecoveredKernel, Recovery, RoundTrip,
                      Violation)
from .roundtrip import round_trip

__all__ = ["Difference", "KernelReport", "Mutation", "PtxEntry", "PtxParam", "RecoveredKernel", "Recovery",
           "RoundTrip", "Violation", "check_edit", "from_cache_dir", "from_candidate", "from_cubin", "from_ptx",
           "mutations", "recover", "round_trip"]
