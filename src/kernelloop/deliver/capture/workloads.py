"""Mapped cards -> kernelloop workload files (`ops/<op>/workloads.toml` format), one per op."""

from __future__ import annotations

import os
from pathlib import Path

from ...core.spec import load_op, load_workloads
from .mapping import default_ops_root
from .records import CaptureReport, OperatorCard

MIN_WEIGHT = 1e-3  # a measured card whose kernels took no time still gets a (tiny) positive weight


def card_weight(report: CaptureReport, card: OperatorCard) -> float:
    """Device time in microseconds when the report was profiled, else the card's call count."""
    if report.profiled and card.device_time_us is not None:
        return max(card.device_time_us, MIN_WEIGHT)
    return float(card.calls)


def _render(op: str, report: CaptureReport, rows: list[tuple[dict, str, float, list[str]]], unit: str) -> str:
    lines = [f"# Captured from {report.model_class} on {report.device} (torch {report.torch_version}) by "
             f"`kernelloop capture`;", f"# weight = {unit}, identical workloads merged.", f'op = "{op}"', ""]
    for axes, dtype, weight, paths in rows:
        shown = ", ".join(paths[:3]) + (f", ... ({len(paths)} paths)" if len(paths) > 3 else "")
        lines += [f"# {shown}", "[[workload]]",
                  "axes = { " + ", ".join(f"{k} = {v}" for k, v in axes.items()) + " }",
                  f'dtype = "{dtype}"', f"weight = {weight!r}", ""]
    return "\n".join(lines)


def write_workloads(report: CaptureReport, out_dir: str | Path, ops_root: str | Path | None = None) -> dict[str, Path]:
    """Write `out_dir/<op>.toml` for every op the report's mapped cards use: one `[[workload]]` per distinct
    (axes, dtype), axes in the spec's order, weights summed over the cards that share it (card_weight). Each file
    is loaded back with `kernelloop.core.spec.load_workloads` against `ops_root/<op>` before any is put in place (a
    temporary file renamed), so either every file is written and valid or none is (SpecError, ValueError)."""
    root = Path(ops_root) if ops_root is not None else default_ops_root()
    out_dir = Path(out_dir)
    per_op: dict[str, dict[tuple, list]] = {}
    for card in report.mapped:
        assert card.axes is not None and card.dtype is not None
        entry = per_op.setdefault(card.op, {}).setdefault(
            (tuple(sorted(card.axes.items())), card.dtype.value), [0.0, []])
        entry[0] += card_weight(report, card)
        entry[1] += [p for p in card.paths if p not in entry[1]]
    if not per_op:
        return {}
    out_dir.mkdir(parents=True, exist_ok=True)
    unit = "device time (us)" if report.profiled else "calls"
    staged: list[tuple[Path, Path]] = []
    try:
        for op, entries in per_op.items():
            spec = load_op(root / op).spec
            rows = [({k: dict(axes)[k] for k in spec.axes}, dtype, weight, paths)
                    for (axes, dtype), (weight, paths) in entries.items()]
            tmp = out_dir / f".{op}.toml.tmp"
            tmp.write_text(_render(op, report, rows, unit))
            staged.append((tmp, out_dir / f"{op}.toml"))
            load_workloads(tmp, spec)
    except Exception:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    written = {}
    for tmp, final in staged:
        os.replace(tmp, final)
        written[final.stem] = final
    return written
