"""The persistent templates compile for sm_90 ahead of time (no GPU needed), with and without the prefetch, also
when Triton turns integer arguments equal to 1 into constants (N == 1 with unit strides, M == 1), which the
interpreter never does. The build runs in a fresh interpreter: a Triton that has run interpreted kernels in this
process is not a clean compiler."""

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
path, name, base = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
spec = importlib.util.spec_from_file_location("persistent_aot", path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
built = []
for prefetch in (0, 1):
    for ones in (["N", "stride_x", "stride_y"], ["M"], []):
        consts = {"BLOCK_N": 1 if "N" in ones else 4096, "PREFETCH": prefetch}
        sig = {**{k: "constexpr" if k in ones else t for k, t in base.items()}, **{k: "constexpr" for k in consts}}
        values = {**{k: 1 for k in ones}, **consts}
        src = ASTSource(fn=getattr(mod, name), signature=sig,
                        constexprs={(list(sig).index(k),): v for k, v in values.items()})
        try:
            triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
        except Exception as e:
            if type(e).__name__ == "CompilationError":
                raise
            print(json.dumps({"skip": f"cannot compile for sm_90 here: {type(e).__name__}: {str(e)[:200]}"}))
            sys.exit(0)
        built.append([prefetch, ones])
print(json.dumps({"built": built}))
'''

ROW = {"M": "i32", "N": "i32", "stride_x": "i32", "stride_y": "i32"}
KERNELS = {
    "layernorm": ("_ln_persistent", {"X": "*fp16", "W": "*fp16", "B": "*fp16", "Y": "*fp16", **ROW, "eps": "fp32"}),
    "rmsnorm": ("_rmsnorm_persistent", {"X": "*fp16", "W": "*fp16", "Y": "*fp16", **ROW, "eps": "fp32"}),
    "softmax": ("_softmax_persistent", {"X": "*fp16", "Y": "*fp16", **ROW}),
}


@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
def test_persistent_compiles_for_hopper_with_constant_ones(op):
    pytest.importorskip("triton")
    name, base = KERNELS[op]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", BUILD, str(OPS / op / "persistent.py"), name, json.dumps(base)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if "skip" in result:
        pytest.skip(result["skip"])
    assert len(result["built"]) == 6
