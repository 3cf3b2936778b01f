"""The Gluon functions every module lowered from a schedule shares, as code: `lower` pastes their source.

`kernelloop.tune.schedule.lower` renders a schedule through templates/schedule_module.py.j2 and puts the source of
`FRAME` (decorators included) where the template says `{{ helpers }}`: the accumulator layout, the tile order, a
half of a b slot, and the fused epilogue.

Why pasted, not imported: a generated module is a template whose candidates run under the static source rules
(kernelloop.core.verify.rules: imports of triton, torch, math, typing and functools only) and the sandbox, and a
candidate is the source that is hashed, reviewed and built; so each module carries these definitions' text. This
file is their one source, and it imports as a module (where Triton has Gluon) so they can be built and checked
as code. The hand-written ops/gemm/gluon_kernel.py is a template under the same rules and keeps copies of
`_mma_layout`, `_tile_coords` and `_b_slice`; tests/schedule/test_schedule_lower.py holds them to the same text.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

FRAME = ("_mma_layout", "_tile_coords", "_b_slice", "_fused")
"""What `lower` pastes, in this order (`_b_slice` only for half-width accumulators)."""


@gluon.constexpr_function
def _mma_layout(BLOCK_M, BLOCK_N, num_warps):
    """The warpgroup-MMA accumulator layout: warps stacked along M (16 rows each), the widest instruction N."""
    warps = [4, 1]
    while warps[0] * warps[1] != num_warps:
        if BLOCK_M > 16 * warps[0]:
            warps[0] *= 2
        else:
            warps[1] *= 2
    n = 256
    while n > max(BLOCK_N // warps[1], 8) or BLOCK_N % n != 0:
        n -= 8
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=warps, instr_shape=[16, n, 16])


@gluon.jit
def _tile_coords(tile, num_m, num_n, GROUP_M: gl.constexpr):
    """(pid_m, pid_n) of a linear tile index, GROUP_M tile-rows at a time (as the tiled template's order)."""
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    rows = gl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m, pid_n


@gluon.jit
def _b_slice(b_bufs, s, start: gl.constexpr, width: gl.constexpr, TRANS_B: gl.constexpr):
    """Columns [start, start + width) of slot s's b tile, as the MMA's [BLOCK_K, width] operand."""
    if TRANS_B:
        return b_bufs.index(s).slice(start, width, dim=0).permute((1, 0))
    else:
        return b_bufs.index(s).slice(start, width, dim=1)


@gluon.jit
def _fused(acc, Bias, col, N, WIDTH: gl.constexpr, layout: gl.constexpr, HAS_BIAS: gl.constexpr,
           ACT: gl.constexpr):
    """The fused epilogue on an fp32 accumulator: + bias[col:col + WIDTH] (loaded in the accumulator's column
    layout, broadcast over rows), then the activation (ACT: 1 exact erf GELU, 2 SiLU, 3 ReLU)."""
    if HAS_BIAS:
        offs_n = col + gl.arange(0, WIDTH, layout=gl.SliceLayout(0, layout))
        bias = gl.load(Bias + offs_n, mask=offs_n < N, other=0.0).to(gl.float32)
        acc = acc + gl.expand_dims(bias, 0)
    if ACT == 1:
        acc = 0.5 * acc * (1.0 + gl.erf(acc * 0.7071067811865476))
    elif ACT == 2:
        acc = acc / (1.0 + gl.exp(-acc))
    elif ACT == 3:
        acc = gl.maximum(acc, 0.0)
    return acc
