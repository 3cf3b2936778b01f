"""The chunk-resident templates compile for sm_90 (ahead of time, no GPU needed) when Triton turns integer
arguments equal to 1 into constants (N == 1 with unit strides, M == 1): the interpreter never does that, so an
interpreter-only test cannot catch a hint such as tl.multiple_of applied to a constant. The build runs in a fresh
interpreter: a Triton that has run interpreted kernels in this process is not a clean compiler (in a full CPU run
the language's interpreter patches were once found still in place here)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

OPS = Path(__file__).resolve().parents[2] / "ops"

BUILD = r'''
import importlib.util, json, sys
import triton
try:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
except ImportError as e:
    print(json.dumps({"skip": f"no ahead-of-time compiler API: {e}"})); sys.exit(0)
path, kernels = sys.argv[1], json.loads(sys.argv[2])
spec = importlib.util.spec_from_file_location("chunked_aot", path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
built = []
for name, base, extra in kernels:
    for ones in (["N", "stride_x", "stride_y"], ["M"], []):
        n1 = "N" in ones
        if extra is None:  # the streaming path: a chunk and the vector width only
            consts = {"CHUNK": 64, "VEC": 1 if n1 else 8}
        else:
            consts = {"CHUNK": 1 if n1 else 1024, "NCHUNK": 1 if n1 else 5, "TAIL": not n1, "ROWS": 2,
                      "VEC": 1 if n1 else 8, **extra}
        sig = {**{k: "constexpr" if k in ones else t for k, t in base.items()}, **{k: "constexpr" for k in consts}}
        values = {**{k: 1 for k in ones}, **consts}
        src = ASTSource(fn=getattr(mod, name), signature=sig,
                        constexprs={(list(sig).index(k),): v for k, v in values.items()})
        try:
            triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
        except Exception as e:
            if type(e).__name__ == "CompilationError":
                raise
            print(json.dumps({"skip": f"cannot compile for sm_90 here: {type(e).__name__}: {str(e)[:200]}"}))
            sys.exit(0)
        built.append([name, ones])
print(json.dumps({"built": built}))
'''

ROW = {"M": "i32", "N": "i32", "stride_x": "i32", "stride_y": "i32"}
# op -> [(kernel, runtime signature, extra constexprs beyond the resident ones; None: the streaming kernel)]
KERNELS = {
    "layernorm": [("_ln_resident", {"X": "*fp16", "W": "*fp16", "B": "*fp16", "Y": "*fp16", **ROW, "eps": "fp32"},
                   {"WB_FIRST": 1}),
                  ("_ln_streaming", {"X": "*fp16", "W": "*fp16", "B": "*fp16", "Y": "*fp16", **ROW, "eps": "fp32"},
                   None)],
    "rmsnorm": [("_rmsnorm_chunked", {"X": "*fp16", "W": "*fp16", "Y": "*fp16", **ROW, "eps": "fp32"}, {})],
    "softmax": [("_softmax_chunked", {"X": "*fp16", "Y": "*fp16", **ROW}, {})],
}


@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
def test_compiles_for_hopper_with_constant_ones(op):
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", BUILD, str(OPS / op / "chunked.py"), json.dumps(KERNELS[op])],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if "skip" in result:
        pytest.skip(result["skip"])
    assert len(result["built"]) == 3 * len(KERNELS[op])
