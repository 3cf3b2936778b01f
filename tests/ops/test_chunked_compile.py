"""The chunk-resident templates compile for sm_90 (ahead of time, no GPU needed) when Triton turns integer
arguments equal to 1 into constants (N == 1 with unit strides, M == 1): the interpreter never does that, so an
interpreter-only test cannot catch a hint such as tl.multiple_of applied to a constant."""

import importlib.util
from pathlib import Path

import pytest

OPS = Path(__file__).resolve().parents[2] / "ops"

ROW = {"M": "i32", "N": "i32", "stride_x": "i32", "stride_y": "i32"}
# op -> [(kernel, runtime signature, extra constexprs beyond the resident ones)]
KERNELS = {
    "layernorm": [("_ln_resident", {"X": "*fp16", "W": "*fp16", "B": "*fp16", "Y": "*fp16", **ROW, "eps": "fp32"},
                   {"WB_FIRST": 1}),
                  ("_ln_streaming", {"X": "*fp16", "W": "*fp16", "B": "*fp16", "Y": "*fp16", **ROW, "eps": "fp32"},
                   None)],
    "rmsnorm": [("_rmsnorm_chunked", {"X": "*fp16", "W": "*fp16", "Y": "*fp16", **ROW, "eps": "fp32"}, {})],
    "softmax": [("_softmax_chunked", {"X": "*fp16", "Y": "*fp16", **ROW}, {})],
}


@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
def test_compiles_for_hopper_with_constant_ones(op, monkeypatch):
    triton = pytest.importorskip("triton")
    try:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.compiler.errors import CompilationError
    except ImportError as e:
        pytest.skip(f"no ahead-of-time compiler API in this triton: {e}")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # a real JITFunction, not the interpreter's
    spec = importlib.util.spec_from_file_location(f"_aot_{op}_chunked", OPS / op / "chunked.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name, base, extra in KERNELS[op]:
        fn = getattr(mod, name)
        for ones in (["N", "stride_x", "stride_y"], ["M"], []):
            n1 = "N" in ones
            if extra is None:  # the streaming path: a chunk and the vector width only
                consts = {"CHUNK": 64, "VEC": 1 if n1 else 8}
            else:
                consts = {"CHUNK": 1 if n1 else 1024, "NCHUNK": 1 if n1 else 5, "TAIL": not n1, "ROWS": 2,
                          "VEC": 1 if n1 else 8, **extra}
            sig = {**{k: "constexpr" if k in ones else t for k, t in base.items()}, **{k: "constexpr" for k in consts}}
            values = {**{k: 1 for k in ones}, **consts}
            src = ASTSource(fn=fn, signature=sig, constexprs={(list(sig).index(k),): v for k, v in values.items()})
            try:
                triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
            except CompilationError:
                raise
            except Exception as e:  # noqa: BLE001 - no CUDA backend or ptxas here: the frontend part cannot run
                pytest.skip(f"cannot compile for sm_90 here: {type(e).__name__}: {str(e)[:200]}")
