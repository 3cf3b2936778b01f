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



def resource_space() -> list[dict]:
    """768 configurations, 39 % of them over a "resource limit" (see `over_limit`), with the fastest ones just
    under it: what a space looks like before pruning knows the limit."""
    return [{"a": 2 ** i, "b": 2 ** j, "c": c, "kind": k}
            for i in range(8) for j in range(8) for c in (1, 2, 3, 4) for k in ("x", "y", "z")]


def over_limit(c: dict) -> bool:
    """The known infeasible region: log2(a) + log2(b) + c >= 11 (like tile size x stages over shared memory)."""
    return math.log2(c["a"]) + math.log2(c["b"]) + c["c"] >= 11


def resource_value(c: dict) -> float | None:
    """None (failed) over the limit; below it, bigger tiles and more stages are faster."""
    if over_limit(c):
        return None
    return 100.0 / (c["a"] * c["b"]) ** 0.5 / c["c"] ** 0.3 * {"x": 1.0, "y": 1.1, "z": 1.25}[c["kind"]]
