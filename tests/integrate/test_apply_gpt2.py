"""A second model family through the delivery path: transformers' GPT-2 (Conv1D projections as gemm_bias, LayerNorm)
captured, its layernorm and gemm_bias cards optimized in the interpreter, exported, applied and checked end to end.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelloop.base.builtin import ops_dir
import kernelloop  # noqa: E402

pytest.importorskip("transformers")
ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter tests")]


def test_gpt2_conv1d_and_layernorm_run_from_the_package(tmp_path, side_by_side):
    model, inputs = kernelloop.capture.models.build("gpt2-tiny")
    report = kernelloop.capture(model, inputs)
    files = kernelloop.capture.write_workloads(report, tmp_path / "cards", ops_dir())
    assert {"layernorm", "gemm_bias"} <= set(files)
    runs = [tmp_path / op for op in ("layernorm", "gemm_bias")]
    side_by_side([(op, files[op], tmp_path / op, []) for op in ("layernorm", "gemm_bias")], tmp_path)
    kernelloop.export(runs, tmp_path / "pkg", ops_root=ops_dir(), ranges=False)
    pkg = kernelloop.load_package(tmp_path / "pkg")
    result = kernelloop.e2e(model, pkg, inputs, seeds=(0, 1))
    sites = result.sites["sites"]
    replaced = [s for s in sites if s["replaced"]]
    assert sum(s["kind"].endswith("Conv1D") for s in replaced) == 8    # c_attn, c_proj, c_fc, mlp.c_proj x 2 layers
    assert sum(s["kind"].endswith("LayerNorm") for s in replaced) == 5  # ln_1, ln_2 x 2, ln_f
    left = {s["path"]: s["reason"] for s in sites if not s["replaced"]}
    assert "the package has no gemm_nt" == left["lm_head"]
    assert result.outputs_ok, result.checks
    assert result.counts["ops"]["gemm_bias"]["fallbacks"] == {}
    assert sum(result.counts["ops"]["gemm_bias"]["entries"].values()) == 16   # 8 call sites x 2 seeds
