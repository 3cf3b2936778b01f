"""benchmarks/gemm_timing_gap.py: its configurations are accepted by the tiled template's launch, its timing
policies are the loop's own with only the flush changed, and without a GPU it says so."""

import importlib.util
import inspect
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("_gemm_timing_gap", ROOT / "benchmarks" / "gemm_timing_gap.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_configurations_bind_to_the_tiled_launch():
    script = _script()
    kernel = script._load(ROOT / "ops" / "gemm" / "kernel.py", "gemm_kernel_gap_test")
    a = torch.empty(8, 8)
    assert {cfg["TMA"] for cfg in script.CONFIGS.values()} == {0, 1}
    for cfg in script.CONFIGS.values():
        inspect.signature(kernel.launch).bind(a, a, a, **cfg)


def test_without_a_gpu_it_says_so(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the script would run")
    with pytest.raises(SystemExit, match="CUDA"):
        _script().main(["--out", str(tmp_path / "gap.json")])
    assert not (tmp_path / "gap.json").exists()
