"""An elementwise tail of the model's graph over [M, N] -- SwiGLU's silu(x0) * x1 (N_IN=2), a GEMM's GELU chain
(N_IN=1) -- fused into one pass: each input read once, the result written once, the steps in between computed in
fp32 in registers. `_epilogue` below is written from the pattern's own steps (kernelloop.deliver.fuse.codegen); the
contiguous tensors are walked as one flat range.

launch(x0, [x1], out, *, BLOCK, num_warps, N_IN)
"""

import triton
import triton.language as tl

# {COMMON}

# {EPILOGUE}


@triton.jit
def _elementwise(X0, X1, Out, numel, BLOCK: tl.constexpr, TWO: tl.constexpr, INTERPRETER: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    x0 = tl.load(X0 + offs, mask=mask, other=0.0).to(tl.float32)
    if TWO:
        x1 = tl.load(X1 + offs, mask=mask, other=0.0).to(tl.float32)
    else:
        x1 = x0
    out = _epilogue(x0, x1)
    tl.store(Out + offs, _round(out, Out.dtype.element_ty, INTERPRETER), mask=mask)


def launch(*tensors, BLOCK, num_warps, N_IN):
    x0, x1, out = tensors if N_IN == 2 else (tensors[0], tensors[0], tensors[1])
    numel = out.numel()
    _elementwise[(triton.cdiv(numel, BLOCK),)](x0, x1, out, numel, BLOCK=BLOCK, TWO=N_IN == 2,
                                                INTERPRETER=not out.is_cuda, num_warps=num_warps)
