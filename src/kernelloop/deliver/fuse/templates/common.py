"""Helpers every fused template uses, written into each generated template where it says `# {COMMON}` (a
candidate's source is one self-contained file)."""

import triton
import triton.language as tl


@triton.jit
def _round(x, dtype: tl.constexpr, INTERPRETER: tl.constexpr):
    """fp32 -> dtype, rounded to nearest even as a GPU does (the CPU interpreter truncates to bf16: the rounding
    increment is added to the bits first there)."""
    if INTERPRETER and dtype == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        x = (bits + 0x7FFF + ((bits >> 16) & 1)).to(tl.float32, bitcast=True)
    return x.to(dtype)


@triton.jit
def _tanh(x):
    """tanh through exp, overflow-safe: sign(x) (1 - e) / (1 + e), e = exp(-2|x|)."""
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)
