"""The persistent templates compile for sm_90 ahead of time (no GPU needed), with and without the prefetch, also
when Triton turns integer arguments equal to 1 into constants (N == 1 with unit strides, M == 1), which the
interpreter never does. The builds run in a fresh interpreter (fresh_build.py)."""

import json
from pathlib import Path

import pytest
from fresh_build import run_build
from kernelloop.base.builtin import ops_dir

OPS = ops_dir()

BUILD = r'''
path, name, base = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
mod = load(path, "persistent_aot")
built = []
for prefetch in (0, 1):
    for ones in (["N", "stride_x", "stride_y"], ["M"], []):
        consts = {"BLOCK_N": 1 if "N" in ones else 4096, "PREFETCH": prefetch}
        sig = {**{k: "constexpr" if k in ones else t for k, t in base.items()}, **{k: "constexpr" for k in consts}}
        build(getattr(mod, name), sig, {**{k: 1 for k in ones}, **consts}, num_warps=8)
        built.append([prefetch, ones])
print(json.dumps({"built": built}))
'''

ROW = {"M": "i32", "N": "i32", "stride_x": "i32", "stride_y": "i32"}
KERNELS = {
    "layernorm": ("_ln_persistent", {"X": "*fp16", "W": "*fp16", "B": "*fp16", "Y": "*fp16", **ROW, "eps": "fp32"}),
    "rmsnorm": ("_rmsnorm_persistent", {"X": "*fp16", "W": "*fp16", "Y": "*fp16", **ROW, "eps": "fp32",
                                        "offset": "fp32"}),
    "softmax": ("_softmax_persistent", {"X": "*fp16", "Y": "*fp16", **ROW}),
}


@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax"])
def test_persistent_compiles_for_hopper_with_constant_ones(op):
    pytest.importorskip("triton")
    name, base = KERNELS[op]
    built = run_build(BUILD, str(OPS / op / "persistent.py"), name, json.dumps(base))
    assert len(built) == 6
