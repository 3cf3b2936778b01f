"""Nsight Compute's source page: counters per SASS instruction (`ncu --import R.ncu-rep --csv --page source
--print-source sass`), for the PTX level's hot windows (`kernelloop.tune.ptx.windows.profile_samples`).

The layout, as Nsight Compute's CLI documents the page and as the scripts that read it rely on: for each profiled
result, a row `"Kernel Name","<name>"`; then a header row whose first cells are `"Address","Source"`, followed by
the metric columns the report holds; then one row per SASS instruction: its address in hex (where the function
was loaded, plus the instruction's offset), its text, and its values. With the SourceCounters section collected
the columns include "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)", "Instructions
Executed", "Thread Instructions Executed" and per-reason sample counts; without it the page has little or nothing
per instruction. Tool messages (`==PROF==`, `==WARNING==`) may come before or after. Names other versions use are
accepted too ("# Address"; "Sampling Data (All)", "# Samples"; raw metric names such as `inst_executed`).
Numbers may carry thousands separators; an empty or non-numeric cell is no value.

An instruction's offset is its address minus the lowest address of its result (the function's first instruction),
the same offsets `nvdisasm` prints for the kernel's cubin.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from pydantic import Field

from ...base.compressed import read_text
from ...base.records.base import Record
from .ncu_csv import NcuParseError, parse_number

ADDRESS_COLUMNS = ("Address", "# Address")
SAMPLE_METRICS = ("Warp Stall Sampling (All Samples)", "Warp Stall Sampling (All)", "Sampling Data (All)",
                  "# Samples", "smsp__pcsamp_sample_count")
"""Columns of warp-state samples per instruction (where warps spent their time), in order of preference."""
EXECUTED_METRICS = ("Instructions Executed", "inst_executed")
"""Columns of warp-level instructions executed per instruction (how often it ran), used when nothing was sampled."""

_OPCODE = re.compile(r"^(?:@!?[A-Za-z0-9_.]+\s+)?([A-Z][A-Z0-9_]*)")


def opcode(sass: str) -> str:
    """The mnemonic of a SASS instruction's text (nvdisasm's or Nsight Compute's) without predicate or modifiers:
    LDG of `@!P0 LDG.E R1, desc[UR4][R2.64]`."""
    m = _OPCODE.match(sass.strip())
    return m.group(1) if m else ""


class SourceInstruction(Record):
    """One SASS instruction of the source page and its values."""

    offset: int = Field(description="Bytes from the function's first instruction (nvdisasm's /*offset*/)")
    address: int = Field(description="The address Nsight Compute printed")
    sass: str = Field(description="The instruction's text, as Nsight Compute printed it")
    metrics: dict[str, float] = Field(default_factory=dict, description="Column -> value (numeric cells only)")

    @property
    def opcode(self) -> str:
        return opcode(self.sass)


class SourceKernel(Record):
    """One profiled result of the source page: the kernel's name and its SASS with values."""

    name: str
    columns: list[str] = Field(default_factory=list, description="The metric columns of its header")
    instructions: list[SourceInstruction] = Field(default_factory=list)

    def total(self, metric: str) -> float:
        return sum(i.metrics.get(metric, 0.0) for i in self.instructions)

    def values(self, metric: str) -> dict[int, float]:
        """Offset -> the metric's value, for the instructions that have one."""
        return {i.offset: i.metrics[metric] for i in self.instructions if metric in i.metrics}


def parse_source_csv(text: str) -> list[SourceKernel]:
    """Every result of a source page export, in order. Raises NcuParseError when the text has no SASS table."""
    rows = list(csv.reader(io.StringIO("\n".join(ln for ln in text.splitlines() if not ln.startswith("==")))))
    out: list[SourceKernel] = []
    name, header, current = "", None, None

    def close():
        if current is not None:
            base = min((i["address"] for i in current), default=0)
            out.append(SourceKernel(name=name, columns=header[2:],
                                    instructions=[SourceInstruction(offset=i["address"] - base, **i)
                                                  for i in current]))

    for row in rows:
        if not row or not any(c.strip() for c in row):
            continue
        first = row[0].strip()
        if first == "Kernel Name":
            close()
            name, header, current = (row[1].strip() if len(row) > 1 else ""), None, None
            continue
        if first in ADDRESS_COLUMNS:
            if len(row) < 2 or row[1].strip() != "Source":
                raise NcuParseError(f"source page header {row[:3]} lacks the Source column after {first}")
            close()
            header, current = [c.strip() for c in row], []
            continue
        if current is None:
            continue   # the report's other lines before a table
        try:
            address = int(first, 16) if first.lower().startswith("0x") else int(first)
        except ValueError:
            continue   # a summary or source-file line inside the table: no instruction
        metrics = {}
        for col, cell in zip(header[2:], row[2:]):
            value = parse_number(cell)
            if isinstance(value, float):
                metrics[col] = value
        current.append({"address": address, "sass": row[1].strip() if len(row) > 1 else "", "metrics": metrics})
    close()
    if not out:
        raise NcuParseError("no SASS table (a header row starting \"Address\",\"Source\"): is this `ncu --import "
                            "R.ncu-rep --csv --page source --print-source sass` output?")
    return out


def read_source_csv(path: str | Path) -> list[SourceKernel]:
    """`parse_source_csv` of a file (a compressed one too: .xz or .gz)."""
    return parse_source_csv(read_text(path, errors="replace"))


def named(page: list[SourceKernel], kernel: str) -> list[SourceKernel]:
    """The results of kernel `kernel` (its plain name, or the name followed by a demangled argument list)."""
    return [k for k in page if k.name == kernel or k.name.startswith(kernel + "(")]


def pick_metric(kernels: list[SourceKernel], metric: str | None = None) -> str | None:
    """`metric` if some result has it, else the first sample column with samples, else the first executed-count
    column with counts; None when the page has neither (no SourceCounters section)."""
    candidates = (metric,) if metric else SAMPLE_METRICS + EXECUTED_METRICS
    for m in candidates:
        if any(m in k.columns for k in kernels) and (metric or sum(k.total(m) for k in kernels) > 0):
            return m
    return None


__all__ = ["ADDRESS_COLUMNS", "EXECUTED_METRICS", "SAMPLE_METRICS", "SourceInstruction", "SourceKernel", "named",
           "opcode", "parse_source_csv", "pick_metric", "read_source_csv"]
