"""The Triton kernel behind the vector-throughput ceiling (imported only when measuring on a GPU)."""

import triton
import triton.language as tl

CHAINS = 8  # FMAs per loop iteration per element


@triton.jit
def fma_chains(X, Y, n_iter, BLOCK: tl.constexpr):
    """Eight independent FMA chains per element, in registers: latency hidden, the FMA pipe is the limit."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(X + offs)
    b = a * 0.0 + 0.999
    c = a * 0.0 + 0.001
    x0, x1, x2, x3 = a, a + 1, a + 2, a + 3
    x4, x5, x6, x7 = a + 4, a + 5, a + 6, a + 7
    for _ in range(n_iter):
        x0 = x0 * b + c
        x1 = x1 * b + c
        x2 = x2 * b + c
        x3 = x3 * b + c
        x4 = x4 * b + c
        x5 = x5 * b + c
        x6 = x6 * b + c
        x7 = x7 * b + c
    tl.store(Y + offs, x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7)
