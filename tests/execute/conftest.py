"""Shared by the sandbox tests: a real sm_90 ahead-of-time build of one LayerNorm configuration."""

import os
from pathlib import Path

import pytest

from kernelloop.records import Workload


def aot_build(layernorm, path: Path, cache: Path):
    """Build the rowwise LayerNorm in `path` for sm_90 with a cold Triton cache (ptxas really runs) through the
    ahead-of-time build process, which runs under the sandbox; returns its one result."""
    from kernelloop.spec.aot import build_configs
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    try:
        return build_configs(layernorm.spec, {"rowwise": path}, Workload(op="layernorm", axes={"M": 64, "N": 1024},
                                                                           dtype="fp16"),
                             [{"template": "rowwise", "BLOCK_N": 1024, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0}],
                             jobs=1)[0]
    finally:
        os.environ.pop("TRITON_CACHE_DIR")


@pytest.fixture
def aot():
    return aot_build
