"""Read Nsight Compute's CSV details page (`ncu --csv --page details`, or `ncu --import x.ncu-rep --csv`).

What the format looks like in practice (see tests/fixtures/ncu/, recorded on an H200 with ncu 2025.3.1):
- the output may begin with tool messages (`==PROF== Connected to process ...`, `==WARNING== ...`) before the
  header row `"ID","Process ID",...,"Metric Name","Metric Unit","Metric Value",...`, and may end with more;
- one row per (launch, section, metric); numbers carry thousands separators ("3,196,789,321.79");
- guided-analysis rule rows have an empty metric name, the section *identifier* instead of its display name,
  and the rule name, type, text and estimated speed-up in extra trailing columns, which metric rows omit.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from ...base.compressed import read_text
from ...base.records import KernelProfile, RuleHit
from .metrics import lookup, normalize

_NUMBER = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][+-]?\d+)?")
_TRIPLE = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")

REQUIRED_COLUMNS = ("ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value")


class NcuParseError(ValueError):
    """The text is not an Nsight Compute CSV details page."""


def parse_number(text: str) -> float | str:
    """A float when `text` is a number (thousands separators allowed), else the stripped text."""
    t = text.strip()
    if t and any(c.isdigit() for c in t) and _NUMBER.fullmatch(t):
        return float(t.replace(",", ""))
    return t


def _triple(text: str) -> list[int]:
    m = _TRIPLE.fullmatch(text.strip())
    return [int(g) for g in m.groups()] if m else []


def split_preamble(text: str) -> tuple[list[str], str]:
    """(tool message lines, CSV body starting at the header row). Raises NcuParseError without a header."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith('"ID"') or line.startswith("ID,"):
            body = [ln for ln in lines[i:] if not ln.startswith("==")]
            notes = [ln for ln in lines[:i] if ln.strip()] + [ln for ln in lines[i:] if ln.startswith("==")]
            return notes, "\n".join(body)
    raise NcuParseError("no CSV header row starting with \"ID\" (is this `ncu --csv --page details` output?)")


def parse_details_csv(text: str, *, keep_unmapped: bool = True) -> list[KernelProfile]:
    """Every profiled launch in the text, in report order, as a KernelProfile with canonical metrics.

    Values are normalised to canonical units (ns, byte, byte/s, hz). Metrics without a canonical key are kept
    in `extra` as 'Section / Name [unit]' unless `keep_unmapped` is False.
    """
    _, body = split_preamble(text)
    rows = list(csv.reader(io.StringIO(body)))
    header = rows[0]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise NcuParseError(f"CSV header lacks column(s) {missing}; only the details page is supported")
    col = {name: i for i, name in enumerate(header)}

    def get(row: list[str], name: str) -> str:
        i = col.get(name)
        return row[i] if i is not None and i < len(row) else ""

    launches: dict[str, dict] = {}
    for row in rows[1:]:
        if not row or not any(cell.strip() for cell in row):
            continue
        lid = get(row, "ID")
        entry = launches.get(lid)
        if entry is None:
            entry = launches[lid] = {
                "kernel": get(row, "Kernel Name"), "launch_id": int(parse_number(lid) or 0) if lid else 0,
                "block": _triple(get(row, "Block Size")), "grid": _triple(get(row, "Grid Size")),
                "device": get(row, "Device"), "cc": get(row, "CC"), "metrics": {}, "extra": {}, "rules": []}
        section, name = get(row, "Section Name"), get(row, "Metric Name")
        if not name:
            rule = get(row, "Rule Name")
            if rule:
                speed = parse_number(get(row, "Estimated Speedup"))
                entry["rules"].append(RuleHit(
                    section=section, name=rule, type=get(row, "Rule Type"), message=get(row, "Rule Description"),
                    speedup_type=get(row, "Estimated Speedup Type"),
                    speedup_pct=speed if isinstance(speed, float) else None))
            continue
        unit = get(row, "Metric Unit")
        value = parse_number(get(row, "Metric Value"))
        if isinstance(value, float):
            value, unit = normalize(value, unit)
        mdef = lookup(section, name)
        if mdef is not None:
            entry["metrics"].setdefault(mdef.key, value)
        elif keep_unmapped:
            entry["extra"].setdefault(f"{section} / {name}" + (f" [{unit}]" if unit else ""), value)
    return [KernelProfile(source="csv", **e) for e in launches.values()]


def read_csv_text(path: str | Path) -> str:
    """The text of a CSV export, compressed (a name ending in .xz or .gz) or not."""
    return read_text(path, errors="replace")


def read_details_csv(path: str | Path, **kw) -> list[KernelProfile]:
    """`parse_details_csv` of a file (compressed when its name ends in .xz or .gz)."""
    return parse_details_csv(read_csv_text(path), **kw)


def select_kernel(profiles: list[KernelProfile], pattern: str | None = None, index: int = 0) -> KernelProfile:
    """The `index`-th launch whose kernel name matches regex `pattern` (search, not full match).

    Raises LookupError naming the kernels that were present when nothing matches.
    """
    chosen = [p for p in profiles if pattern is None or re.search(pattern, p.kernel)]
    if not chosen:
        names = sorted({p.kernel[:80] for p in profiles})
        raise LookupError(f"no profiled kernel matches {pattern!r}; the report has {names}")
    try:
        return chosen[index]
    except IndexError:
        raise LookupError(f"{len(chosen)} launch(es) match {pattern!r}; index {index} is out of range") from None


__all__ = ["NcuParseError", "parse_details_csv", "parse_number", "read_details_csv", "select_kernel",
           "split_preamble"]
