"""What the worker's request handlers share: module import from a file, device sync, CUDA fault markers and the stage
file (where the worker is). The thread census is core/sandbox/census.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

CUDA_FAULT_MARKERS = ("illegal memory access", "unspecified launch failure", "CUDA error", "cudaError",
                      "misaligned address", "device-side assert", "an illegal instruction",
                      # device memory exhausted (torch.OutOfMemoryError: "CUDA out of memory"): a fresh worker
                      # starts with all of it, whatever this one still holds
                      "out of memory")


def _import_file(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _sync(device) -> None:
    """Wait for the device (a records.Device) to finish its work; nothing to wait for in the interpreter."""
    if device.is_cuda:
        import torch
        torch.cuda.synchronize()


STAGE_FILE = "stage"


def mark_stage(root: Path | str, text: str) -> None:
    """Record where the worker is (import, build, verify case k, timing) in its job folder, so that a crash that
    kills the process still says where it happened (the controller reads the file after the worker died)."""
    try:
        (Path(root) / STAGE_FILE).write_text(text)
    except OSError:
        pass
