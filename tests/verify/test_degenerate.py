"""The degenerate-output check (core/verify/compare.py): constant or zero answers are WRONG_VALUES where the reference
varies in the output's dtype; a reference that spans less than one unit in the last place of that dtype has a
constant as its correctly rounded answer, which passes. Found by benchmarks/verify_stress.py: the honest tiled
gemm_bias_gelu kernel was judged degenerate on a held-out 17x1x1 near-zero case."""

import torch

from kernelloop.base.builtin import ops_dir
from kernelloop.base.records import Status, Workload
from kernelloop.core.reference.inputs import make_inputs
from kernelloop.core.reference.truth import truth
from kernelloop.core.spec import load_op
from kernelloop.core.verify.compare import check_outputs, is_degenerate


def _case(op: str, axes: dict, dtype: str, seed: int, dist: str):
    b = load_op(ops_dir() / op)
    w = Workload(op=op, axes=axes, dtype=dtype)
    x = make_inputs(b.spec, w, seed, "cpu", dist)
    return b.spec, w, x, truth(b.spec, b.folder / b.spec.reference, x, w)


def test_a_correctly_rounded_constant_answer_is_not_degenerate():
    spec, w, x, ref = _case("gemm_bias_gelu", {"M": 17, "N": 1, "K": 1}, "fp16", 3247249456357855427, "near_zero")
    out = [r.to(torch.float16) for r in ref]
    assert float(out[0].double().std()) == 0.0 and float(ref[0].std()) > 0   # the rounded truth is one value
    assert not is_degenerate(out[0], ref[0])
    assert check_outputs(spec, w, out, ref, x, x, "c").status is Status.PASSED


def test_constant_and_zero_answers_are_still_degenerate_where_the_reference_varies_in_the_dtype():
    # near-zero layernorm inputs: the outputs are O(1) after normalisation; a constant (the bias) is caught
    spec, w, x, ref = _case("layernorm", {"M": 8, "N": 64}, "fp16", 7, "near_zero")
    bias = x[2].to(torch.float16).expand(8, 64).contiguous()
    assert is_degenerate(bias[:, :1].expand(8, 64).contiguous(), ref[0])
    v = check_outputs(spec, w, [torch.full((8, 64), float(ref[0].mean()), dtype=torch.float16)], ref, x, x, "c")
    assert v.status is Status.WRONG_VALUES
    # a reference spanning a few output ulps, all within tolerance of a constant: the constant is degenerate
    r = 1.0 + torch.arange(64, dtype=torch.float64).reshape(8, 8) * 2e-3 / 64       # ~2 fp16 ulps at 1.0
    assert is_degenerate(torch.ones(8, 8, dtype=torch.float16), r)
    assert is_degenerate(torch.zeros(8, 8, dtype=torch.float16), r * 1e-3)        # a zero answer on a tiny range
    assert not is_degenerate(r.to(torch.float16), r)
