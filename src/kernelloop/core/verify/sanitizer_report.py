"""compute-sanitizer's text reports, parsed into typed records, and their verdict.

Each tool prints its findings as blocks of lines behind the prefix `=========` (see NVIDIA's Compute Sanitizer
user manual, "Understanding Memcheck Errors", "Racecheck Report Modes", "Synccheck", "Initcheck"): a headline
("Invalid __global__ read of size 4 bytes", "Error: Race reported between Write access at ...", "Barrier error
detected. Divergent thread(s) in block", "Uninitialized __global__ memory read of size 4 bytes", "Program hit
cudaErrorLaunchFailure ...") followed by indented detail lines ("at kernel+0x1b0 in file.py:23", "by thread (31,0,0)
in block (4,0,0)", "Address 0x7f.. is out of bounds", racecheck's "and Read access at ... [12 hazards]") and, at the
end, "ERROR SUMMARY: N errors" (racecheck also "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)").
Both the current layout (`kernel+0xoff in file:line`) and the older cuda-memcheck one (`0xpc in file:line:kernel`)
are read.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from ...base.records import Record, Status, Verdict

Tool = Literal["memcheck", "racecheck", "synccheck", "initcheck"]
TOOLS: tuple[str, ...] = ("memcheck", "racecheck", "synccheck", "initcheck")

PREFIX = re.compile(r"^=========(?: |$)")
_ACCESS = re.compile(r"^(Invalid|Misaligned) (__global__|__shared__|__local__|__generic__|__global__ atomic)\s*"
                     r"(read|write|atomic|access)?\w* of size (\d+)(?: bytes?)?", re.I)
_RACE = re.compile(r"^(Error|ERROR|Warning|WARN|Warn|Information|INFO): (?:Potential )?(?:Race|RAW|WAR|WAW)\b.*?"
                   r"reported between (\w+) access at (.+?)(?:\s+\[(\d+) hazards?\])?$")
_BARRIER = re.compile(r"^(Barrier error detected\..*|Invalid arguments detected\..*|.*barrier.* error.*)$", re.I)
_UNINIT = re.compile(r"^Uninitialized (__global__|__shared__|__local__)? ?memory read of size (\d+)(?: bytes?)?", re.I)
_API = re.compile(r"^Program hit (\w+) \(error (\d+)\) due to \"(.*)\" on CUDA API call to (\w+)")
_HW = re.compile(r"^(Warp|Lane|Device|Thread) .*(Illegal|Misaligned|Out-of-range|Invalid|Hardware|Malformed).*", re.I)
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_AT_NEW = re.compile(r"^at (?P<fn>[^\s]+?)(?:\+0x[0-9a-fA-F]+)?(?: in (?P<loc>.+))?$")
_AT_OLD = re.compile(r"^at (?:0x[0-9a-fA-F]+) in (?P<file>.+?):(?P<line>\d+):(?P<fn>.+)$")
_AND = re.compile(r"^and (\w+) access at (.+?)(?:\s+\[(\d+) hazards?\])?$")
_THREAD = re.compile(r"by thread \((\d+),\s*(\d+),\s*(\d+)\) in block \((\d+),\s*(\d+),\s*(\d+)\)")
_ADDRESS = re.compile(r"Address (0x[0-9a-fA-F]+)")
_INFO = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY", "Target application returned",
         "Saved host backtrace", "Host Frame", "Device Frame", "This is a", "Note:", "Internal Sanitizer",
         "CUDA-MEMCHECK", "Error: process didn't terminate successfully")


class SanitizerFinding(Record):
    """One error (or warning) block of a tool's report."""

    tool: str = Field(description="memcheck, racecheck, synccheck or initcheck.")
    kind: str = Field(description="out_of_bounds, misaligned, race, barrier, uninitialized_read, api_error, "
                                  "hardware_exception or other.")
    severity: Literal["error", "warning"] = Field("error", description="racecheck's warnings are kept, not fatal.")
    headline: str = Field(description="The block's first line, without the prefix.")
    memory: str = Field("", description="Address space where given: __global__, __shared__, __local__.")
    access: str = Field("", description="read, write, atomic; for races the first access kind.")
    size: int | None = Field(None, description="Access size in bytes where given.")
    kernel: str = Field("", description="The kernel (function) the first `at` line names.")
    location: str = Field("", description="file:line where given (Triton emits line info).")
    other_access: str = Field("", description="racecheck: the conflicting access ('Read access at ...').")
    hazards: int | None = Field(None, description="racecheck: hazards behind this report line.")
    address: str = Field("", description="The faulting address where given.")
    thread: tuple[int, int, int] | None = Field(None, description="The reporting thread where given.")
    block: tuple[int, int, int] | None = Field(None, description="Its block where given.")
    excerpt: str = Field(description="The block's raw lines.")

    def describe(self) -> str:
        where = " ".join(x for x in (f"in {self.kernel}" if self.kernel else "",
                                     f"at {self.location}" if self.location else "",
                                     f"thread {self.thread} block {self.block}" if self.thread else "") if x)
        return f"{self.headline}{' ' + where if where else ''}"


def _strip(line: str) -> str | None:
    """The text behind the tool's prefix, or None for a line of the application's own output."""
    return PREFIX.sub("", line, count=1) if PREFIX.match(line) else None


def _headline(tool: str, text: str) -> dict | None:
    """The fields a block's first line gives, or None when the line starts no finding."""
    if m := _ACCESS.match(text):
        kind = "misaligned" if m.group(1).lower() == "misaligned" else "out_of_bounds"
        access = (m.group(3) or ("atomic" if "atomic" in m.group(2) else "")).lower()
        return {"kind": kind, "memory": m.group(2).split()[0], "access": access, "size": int(m.group(4))}
    if m := _RACE.match(text):
        sev = "warning" if m.group(1).lower().startswith(("warn", "info")) else "error"
        fn, loc = _site(m.group(3))
        return {"kind": "race", "severity": sev, "access": m.group(2).lower(), "kernel": fn, "location": loc,
                "hazards": int(m.group(4)) if m.group(4) else None, "memory": "__shared__"}
    if m := _UNINIT.match(text):
        return {"kind": "uninitialized_read", "memory": m.group(1) or "__global__", "access": "read",
                "size": int(m.group(2))}
    if m := _API.match(text):
        return {"kind": "api_error"}
    if _BARRIER.match(text):
        return {"kind": "barrier"}
    if _HW.match(text):
        return {"kind": "hardware_exception"}
    if text.startswith(_INFO) or not text.strip():
        return None
    return {"kind": "other"} if re.search(r"\berror\b|\binvalid\b|\bhazard\b", text, re.I) else None


def _site(text: str) -> tuple[str, str]:
    """(function, file:line) of an access site: `fn+0x1c0 in file:line` or `0xpc in file:line:fn`."""
    text = text.strip()
    if m := _AT_OLD.match("at " + text):
        return m.group("fn").strip(), f"{m.group('file')}:{m.group('line')}"
    if m := _AT_NEW.match("at " + text):
        fn, loc = m.group("fn"), (m.group("loc") or "").strip()
        return ("" if fn.startswith("0x") else fn), loc
    return "", ""


def parse_report(tool: str, text: str) -> tuple[int | None, list[SanitizerFinding]]:
    """(the error count of the tool's summary, or None when it printed none; the findings in report order)."""
    findings: list[SanitizerFinding] = []
    current: dict | None = None
    lines: list[str] = []
    count = race_errors = None

    def close():
        if current is not None:
            findings.append(SanitizerFinding(tool=tool, excerpt="\n".join(lines), **current))

    for raw in text.splitlines():
        body = _strip(raw)
        if body is None:
            continue
        if m := _SUMMARY.search(body):
            count = int(m.group(1))
        if m := _RACE_SUMMARY.search(body):
            race_errors = int(m.group(2))
        indented = body.startswith((" ", "\t"))
        text = body.strip()
        head = None if indented else _headline(tool, text)
        if head is not None:
            close()
            current, lines = {"headline": text, **head}, [raw]
            continue
        if current is None:
            continue
        if not text:   # a bare prefix line ends the block
            close()
            current, lines = None, []
            continue
        lines.append(raw)
        if text.startswith("at ") and not current.get("kernel"):
            current["kernel"], loc = _site(text[3:])
            current["location"] = current.get("location") or loc
        elif m := _AND.match(text):
            current["other_access"] = f"{m.group(1)} access at {m.group(2)}"
            if m.group(3):
                current["hazards"] = (current.get("hazards") or 0) + int(m.group(3))
        if m := _THREAD.search(text):
            current["thread"] = tuple(int(x) for x in m.groups()[:3])
            current["block"] = tuple(int(x) for x in m.groups()[3:])
        if (m := _ADDRESS.search(text)) and not current.get("address"):
            current["address"] = m.group(1)
    close()
    if tool == "racecheck" and race_errors is not None:
        count = race_errors   # racecheck's own summary tells errors from (non-fatal) warnings
    return count, findings


class ToolRun(Record):
    """One tool's run over the candidate's launch."""

    tool: str
    status: Literal["clean", "findings", "error", "not_run"] = Field(
        description="clean: exit 0, ERROR SUMMARY 0 and the launch completed; findings: errors reported; error: "
                    "the run failed otherwise (timeout, crash without a report, no summary); not_run: never started.")
    command: list[str] = Field(default_factory=list)
    exit_code: int | None = None
    error_count: int | None = Field(None, description="From ERROR SUMMARY (None: none printed).")
    findings: list[SanitizerFinding] = Field(default_factory=list)
    seconds: float = 0.0
    reason: str = Field("", description="Why it is not clean, in words.")
    output: str = Field("", description="The tool's text (truncated to its head and tail).")


class SanitizerReport(Record):
    """Every tool's run for one candidate on one small workload."""

    candidate: str = Field(description="The candidate's id (or a label).")
    case: str = Field(description="Workload label and input seed.")
    runs: list[ToolRun]

    @property
    def status(self) -> str:
        """not_run when no tool ran; findings if any tool reported errors; error if any failed; else clean."""
        kinds = {r.status for r in self.runs}
        if not kinds or kinds == {"not_run"}:
            return "not_run"
        for s in ("findings", "error", "not_run"):
            if s in kinds:
                return s
        return "clean"

    @property
    def clean(self) -> bool:
        """The only status that says the tools looked and found nothing. not_run and error are no pass."""
        return self.status == "clean"

    def first_finding(self) -> SanitizerFinding | None:
        for r in self.runs:
            for f in r.findings:
                if f.severity == "error":
                    return f
        return None

    def text(self, limit: int = 20000) -> str:
        parts = []
        for r in self.runs:
            head = (f"== {r.tool}: {r.status}" + (f", {r.error_count} errors" if r.error_count is not None else "")
                    + (f" ({r.reason})" if r.reason else ""))
            parts.append(head + "\n$ " + " ".join(r.command) + "\n" + r.output)
        out = "\n\n".join(parts)
        return out if len(out) <= limit else out[:limit // 2] + "\n...\n" + out[-limit // 2:]

    def verdict(self) -> Verdict | None:
        """REJECTED, naming the tool and its first finding, with the report in `log`, when a tool reported errors;
        None otherwise -- also for not_run and error, which are not passes (see `clean`)."""
        if self.status != "findings":
            return None
        run = next(r for r in self.runs if r.status == "findings")
        first = self.first_finding()
        what = first.describe() if first is not None else f"{run.error_count} errors (ERROR SUMMARY)"
        tool = first.tool if first is not None else run.tool
        n = sum(r.error_count or len(r.findings) for r in self.runs if r.status == "findings")
        return Verdict(status=Status.REJECTED, message=f"compute-sanitizer {tool}: {what} ({n} error(s) in all)",
                       case=self.case, log=self.text())


__all__ = ["SanitizerFinding", "SanitizerReport", "TOOLS", "Tool", "ToolRun", "parse_report"]
