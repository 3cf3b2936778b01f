"""Shared by the sandbox tests (test_sandbox.py, test_sandbox_view.py): their evaluator, the honest rowwise LayerNorm
with code added, and a real sm_90 ahead-of-time build of one LayerNorm configuration."""

import os
import textwrap
from pathlib import Path

import pytest

from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.base.records import Candidate, Workload

ROWWISE_CONFIG = {"BLOCK_N": 256, "ROWS": 2, "num_warps": 4, "EVICT_FIRST": 0}


@pytest.fixture(scope="module")
def sandbox_evaluator(layernorm, evaluator_for, request):
    """The sandbox tests' evaluator, one per test module: the sandbox on (the worker's default), the static rules
    off (the candidates stand for code the rules cannot see), 2 checks, 3 timing samples, 60 s deadlines."""
    return evaluator_for(layernorm, request.module.__name__.rsplit(".", 1)[-1], samples=3, checks=2,
                         timeouts=Timeouts(check=60.0, bench=60.0), static_rules=False)


@pytest.fixture
def with_code(layernorm):
    """with_code(module_code="", launch_code=""): the honest rowwise LayerNorm with code added at import and at the
    top of every launch."""
    def make(module_code: str = "", launch_code: str = "") -> Candidate:
        src = layernorm.template_sources["rowwise"]
        src = src.replace("\ndef launch(", "\n" + module_code + "\ndef launch(", 1)
        head, sep, rest = src.partition("\ndef launch(")
        sig, colon, body = rest.partition(":\n")
        indent = " " * (len(body) - len(body.lstrip(" ")))
        src = head + sep + sig + colon + textwrap.indent(launch_code, indent) + "\n" + body if launch_code else src
        return Candidate(op="layernorm", template="custom", source=src, config=ROWWISE_CONFIG)
    return make


def aot_build(layernorm, path: Path, cache: Path):
    """Build the rowwise LayerNorm in `path` for sm_90 with a cold Triton cache (ptxas really runs) through the
    ahead-of-time build process, which runs under the sandbox; returns its one result."""
    from kernelloop.core.build.aot import build_configs
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


@pytest.fixture
def real_sm90_build(layernorm, tmp_path):
    """The rowwise LayerNorm built for sm_90 through the sandboxed build process (ptxas and cuobjdump ran, the cubin
    is in the cold cache tmp_path/cache); skipped where this Triton has no ptxas."""
    from kernelloop.core.sandbox import policy as sandbox
    if not any(t.endswith("ptxas") for t in sandbox.default_policy([tmp_path]).tools):
        pytest.skip("no ptxas here")
    out = aot_build(layernorm, layernorm.folder / "kernel.py", tmp_path / "cache")
    assert out.status == "built", out.error
    assert out.kernels and out.kernels[0].get("REG") and "usage_error" not in out.kernels[0]   # cuobjdump ran
    assert any((tmp_path / "cache").rglob("*.cubin"))
    return out
