"""The loop closing in production: a package's dispatch counts read back as workloads for `kernelloop optimize`.

`Package.write_counts(path)` records, per op, every (dtype, shape) the dispatcher saw with its call count and whether
an entry covered it. `workloads_from_counts` turns one op's shapes into Workloads weighted by calls, so the next run
(and package) covers what the model really ran.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...base.records import DType, OpSpec, Workload


class CountsError(ValueError):
    """A counts file that does not say what a workload needs."""


def workloads_from_counts(path: str | Path, spec: OpSpec, *, uncovered_only: bool = False) -> list[Workload]:
    """The shapes the dispatcher saw for `spec`'s op, weighted by calls (all of them, or those no entry covered)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        shapes = data["ops"][spec.name]["shapes"]
    except FileNotFoundError:
        raise CountsError(f"{path}: file not found") from None
    except UnicodeDecodeError as e:
        raise CountsError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise CountsError(f"{path}: cannot read: {e.strerror or e}") from None
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise CountsError(f"{path}: not a kernelloop counts file with op {spec.name!r} ({e!r})") from None
    if not isinstance(shapes, list):
        raise CountsError(f"{path}: ops.{spec.name}.shapes: expected a list, got {type(shapes).__name__}")
    out: dict[str, Workload] = {}
    for i, s in enumerate(shapes):
        where = f"{path}: ops.{spec.name}.shapes.{i}"
        if not isinstance(s, dict) or not isinstance(s.get("axes"), dict):
            raise CountsError(f"{where}: expected an object with 'axes', 'dtype' and 'calls'")
        if uncovered_only and s.get("covered"):
            continue
        bad = [k for k, v in s["axes"].items() if not isinstance(v, int) or isinstance(v, bool)]
        if bad:
            raise CountsError(f"{where}: axes {bad} are not integers")
        try:
            w = Workload(op=spec.name, axes=s["axes"], dtype=DType(s["dtype"]), weight=float(s["calls"]))
        except (KeyError, ValueError, TypeError) as e:
            raise CountsError(f"{where}: {e!r}"[:2000]) from None
        if set(w.axes) != set(spec.axes) or w.dtype not in spec.dtypes:
            raise CountsError(f"{path}: ops.{spec.name}.shapes.{i}: axes or dtype do not fit the spec")
        if w.id in out:
            w = w.model_copy(update={"weight": out[w.id].weight + w.weight})
        out[w.id] = w
    if not out:
        raise CountsError(f"{path}: no {'uncovered ' if uncovered_only else ''}shapes of {spec.name}")
    return list(out.values())
