"""benchmarks/gemm_timing_gap.py: its configurations are accepted by the tiled template's launch, its timing
policies are the loop's own with only the flush changed, and without a GPU it says so."""

import inspect
import runpy
from pathlib import Path

import pytest
import torch

from kernelloop.base.builtin import ops_dir

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gemm_timing_gap.py"


def test_configurations_bind_to_the_tiled_launch():
    ns = runpy.run_path(str(SCRIPT))
    kernel = ns["_load"](ops_dir() / "gemm" / "kernel.py", "gemm_kernel_gap_test")
    a = torch.empty(8, 8)
    assert {cfg["TMA"] for cfg in ns["CONFIGS"].values()} == {0, 1}
    for cfg in ns["CONFIGS"].values():
        inspect.signature(kernel.launch).bind(a, a, a, **cfg)


def test_without_a_gpu_it_says_so(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the script would run")
    with pytest.raises(SystemExit, match="CUDA"):
        runpy.run_path(str(SCRIPT))["main"](["--out", str(tmp_path / "gap.json"), "--configs", "{}"])
    assert not (tmp_path / "gap.json").exists()
