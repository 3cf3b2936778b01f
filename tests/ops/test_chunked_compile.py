"""The chunk-resident templates compile for sm_90 (ahead of time, no GPU needed) when Triton turns integer
arguments equal to 1 into constants (N == 1 with unit strides, M == 1): the interpreter never does that, so an
interpreter-only test cannot catch a hint such as tl.multiple_of applied to a constant. The builds run in a fresh
interpreter (fresh_build.py)."""

import json
from pathlib import Path

import pytest
from fresh_build import run_build
from kernelloop.base.builtin import ops_dir

OPS = ops_dir()

BUILD = r'''
path, kernels = sys.argv[1], json.loads(sys.argv[2])
mod = load(path, "chunked_aot")
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
        build(getattr(mod, name), sig, {**{k: 1 for k in ones}, **consts}, num_warps=4)
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
    "rmsnorm": [("_rmsnorm_chunked", {"X": "*fp16", "W": "*fp16", "Y": "*fp16", **ROW, "eps": "fp32",
                                      "offset": "fp32"}, {})],
    "softmax": [("_softmax_chunked", {"X": "*fp16", "Y": "*fp16", **ROW}, {})],
}


@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
def test_compiles_for_hopper_with_constant_ones(op):
    pytest.importorskip("triton")
    built = run_build(BUILD, str(OPS / op / "chunked.py"), json.dumps(KERNELS[op]))
    assert len(built) == 3 * len(KERNELS[op])
