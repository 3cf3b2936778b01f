"""Small synthetic spaces with known structure for the strategy tests (imported by them)."""

import itertools
import math



def grid_space() -> list[dict]:
    """72 configurations minus an invalid corner: numeric, a flag and a categorical parameter."""
    out = []
    for bx, by, flag, kind in itertools.product([16, 32, 64, 128, 256, 512], [1, 2, 4], [0, 1], ["row", "col"]):
        if bx * by > 1024:
            continue
        out.append({"bx": bx, "by": by, "flag": flag, "kind": kind})
    return out


def grid_value(c: dict) -> float:
    """A bowl with its optimum at bx=128, by=2, flag=1, kind='col'."""
    return (1.0 + abs(math.log2(c["bx"] / 128)) + abs(math.log2(c["by"] / 2)) * 0.7
            + (0.5 if c["flag"] == 0 else 0.0) + (0.3 if c["kind"] == "row" else 0.0))


def mixed_space() -> list[dict]:
    """Two templates with different parameters, as the controller builds them."""
    a = [{"template": "rows", "BLOCK": b, "WARPS": w} for b in (64, 128, 256) for w in (1, 2, 4)]
    b = [{"template": "tiles", "TILE": t} for t in (8, 16, 32)]
    return a + b

