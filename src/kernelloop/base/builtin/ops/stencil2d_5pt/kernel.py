"""One Jacobi step of the 2-D 5-point stencil with fixed boundary, on BLOCK_H x BLOCK_W tiles of a row-major H x W
grid.

Each program loads its tile's centre values and, for the interior cells of the tile, the four neighbours (each a
shifted load of the same tile: neighbours that lie in the next tile come from L1/L2, so DRAM sees x about once).
Interior cells (0 < i < H - 1 and 0 < j < W - 1) store 0.25 * (up + down + left + right), summed in float32;
boundary cells store their own value unchanged. Every load and store is masked to the grid, so sizes that are no
multiple of the tile (and grids of one, two or three rows or columns) are handled.
"""

import triton
import triton.language as tl


@triton.jit
def _stencil_tile(X, Y, H, W, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    cols = tl.program_id(1) * BLOCK_W + tl.arange(0, BLOCK_W)[None, :]
    inside = (rows < H) & (cols < W)
    interior = inside & (rows > 0) & (rows < H - 1) & (cols > 0) & (cols < W - 1)
    at = rows * W + cols
    centre = tl.load(X + at, mask=inside, other=0.0)
    up = tl.load(X + at - W, mask=interior, other=0.0).to(tl.float32)
    down = tl.load(X + at + W, mask=interior, other=0.0).to(tl.float32)
    left = tl.load(X + at - 1, mask=interior, other=0.0).to(tl.float32)
    right = tl.load(X + at + 1, mask=interior, other=0.0).to(tl.float32)
    mean = (0.25 * ((up + down) + (left + right))).to(Y.dtype.element_ty)
    tl.store(Y + at, tl.where(interior, mean, centre.to(Y.dtype.element_ty)), mask=inside)


def launch(x, y, *, BLOCK_H, BLOCK_W, num_warps):
    H, W = x.shape
    grid = (triton.cdiv(H, BLOCK_H), triton.cdiv(W, BLOCK_W))
    _stencil_tile[grid](x, y, H, W, BLOCK_H=BLOCK_H, BLOCK_W=BLOCK_W, num_warps=num_warps)
