"""Hot windows: where in a kernel's PTX the time goes, read from its SASS.

The join between the two levels is the kernel's source line: Triton assembles with `-lineinfo`, so each PTX
instruction follows a `.loc FILE LINE COL` directive and each SASS instruction carries the same (file, line) in
`nvdisasm --print-line-info`. A window is a basic block of the entry's body (a single-block loop, or a block
inside a loop region that branches back to an earlier label, is a loop window). Its SASS instructions are those
of the source lines it holds, each line's count apportioned by the share of that line's PTX instructions the
window has.

Without a profile the weight is a static estimate: a SASS instruction inside a SASS loop (a backward branch)
counts LOOP_TRIPS times, one outside once. With Nsight Compute's source counters (`tune/profile/source_page.py`: samples
per SASS address, joined to the cubin by `profile_samples`) the weight is the samples of the window's source lines,
apportioned the same way.
"""

from __future__ import annotations

import base64
import functools
import re
from collections import defaultdict

from .blocks import Line, blocks, classify
from .records import HotWindow, ProfileSamples, RecoveredKernel
from .tools import assemble, run_tool

LOOP_TRIPS = 16   # the static estimate's iterations per loop (only the ranking of windows depends on it)

_FILE_PTX = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"')
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)")
_SASS_FILE = re.compile(r'//## File "([^"]+)", line (\d+)')
_SASS_INSTR = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?);")
_SASS_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_SASS_BRA = re.compile(r"\bBRA\b.*?(\.L_x_\d+)")

SourceLine = tuple[str, int]


def sass_lines(cubin: bytes) -> list[tuple[int, SourceLine | None, bool, str]]:
    """(address, (file, line), inside a SASS loop, the instruction) of every SASS instruction of the cubin."""
    return list(_sass_lines(cubin))


@functools.lru_cache(maxsize=16)
def _sass_lines(cubin: bytes) -> tuple[tuple[int, SourceLine | None, bool, str], ...]:
    """`sass_lines`, disassembled once per cubin (windows, the profile's join and the LLM's prompt all read it)."""
    text = run_tool("nvdisasm", ["--print-line-info", "-c"], cubin)
    rows: list[tuple[int, SourceLine | None, str]] = []
    label_at: dict[str, int] = {}
    branches: list[tuple[int, str]] = []
    cur: SourceLine | None = None
    for ln in text.splitlines():
        if m := _SASS_FILE.search(ln):
            cur = (m.group(1), int(m.group(2)))
            continue
        if m := _SASS_LABEL.match(ln):
            label_at[m.group(1)] = len(rows)
            continue
        if m := _SASS_INSTR.match(ln):
            if b := _SASS_BRA.search(m.group(2)):
                branches.append((len(rows), b.group(1)))
            rows.append((int(m.group(1), 16), cur, " ".join(m.group(2).split())))
    in_loop = [False] * len(rows)
    for at, label in branches:
        target = label_at.get(label)
        if target is not None and target <= at:
            for i in range(target, at + 1):
                in_loop[i] = True
    return tuple((addr, src, in_loop[i], text) for i, (addr, src, text) in enumerate(rows))


def ptx_source_lines(ptx_lines: list[str], lines: list[Line]) -> dict[int, SourceLine]:
    """PTX line index of each instruction -> its (file, line), from the last `.loc` before it."""
    files = {m.group(1): m.group(2) for ln in ptx_lines if (m := _FILE_PTX.match(ln))}
    out, cur = {}, None
    for ln in lines:
        if ln.kind == "directive" and (m := _LOC.match(ln.text)):
            cur = (files.get(m.group(1), m.group(1)), int(m.group(2)))
        elif ln.kind == "instr" and cur is not None:
            out[ln.index] = cur
    return out


def _cubin_of(kernel: RecoveredKernel) -> bytes:
    if kernel.cubin_b64:
        return base64.b64decode(kernel.cubin_b64)
    asm = assemble(kernel.ptx, 90, kernel.metadata)
    if not asm.ok:
        raise ValueError(f"ptxas refused the PTX: {asm.error}")
    return asm.cubin


class ProfileMismatch(ValueError):
    """A source page that cannot weigh this kernel's windows (the message says why)."""


def profile_samples(kernel: RecoveredKernel, page: list, metric: str | None = None,
                    cubin: bytes | None = None) -> ProfileSamples:
    """The kernel's values per SASS offset from a source page (`profile.source_page.parse_source_csv`): its results
    (by kernel name) whose every instruction has the cubin's opcode at the same offset, summed. `metric`: the column
    (default: warp-state samples, else instructions executed). Raises ProfileMismatch when no result is of this
    kernel's SASS, or none has per-instruction values."""
    from ..profile.source_page import named, opcode, pick_metric
    mine = named(page, kernel.name)
    if not mine:
        raise ProfileMismatch(f"the profile has no kernel named {kernel.name!r} (it has "
                              f"{sorted({k.name for k in page})[:8]})")
    ops = {addr: opcode(text) for addr, _, _, text in sass_lines(cubin if cubin is not None else _cubin_of(kernel))}
    same, notes = [], []
    for i, result in enumerate(mine):
        bad = next((ins for ins in result.instructions if ops.get(ins.offset) != ins.opcode), None)
        if bad is None and result.instructions:
            same.append(result)
        else:
            what = (f"its instruction at offset {bad.offset:#x} is {bad.sass!r}, the cubin's is "
                    f"{ops.get(bad.offset, 'nothing')!r}" if bad is not None else "it lists no instruction")
            notes.append(f"result {i + 1} of {kernel.name} left out: {what} (profiled from other SASS)")
    if not same:
        raise ProfileMismatch("the profile is of other SASS than this kernel's: " + "; ".join(notes))
    chosen = pick_metric(same, metric)
    if chosen is None:
        raise ProfileMismatch(f"the profile of {kernel.name} has no per-instruction "
                              + (f"column {metric!r}" if metric else "samples or executed counts (profile with "
                                 "the SourceCounters section)"))
    samples: dict[int, float] = defaultdict(float)
    for result in same:
        for offset, value in result.values(chosen).items():
            samples[offset] += value
    return ProfileSamples(kernel=kernel.name, metric=chosen, samples=dict(samples), results=len(same), notes=notes)


def hot_windows(kernel: RecoveredKernel, samples: ProfileSamples | dict[int, float] | None = None,
                top: int | None = None, cubin: bytes | None = None) -> list[HotWindow]:
    """The entry's windows, hottest first (`top`: at most that many). `samples`: Nsight Compute's values per SASS
    offset (`profile_samples`, or a plain mapping); without them the static estimate."""
    metric = ""
    if isinstance(samples, ProfileSamples):
        metric, samples = samples.metric, samples.samples
    ptx_lines = kernel.ptx.split("\n")
    lines = classify(ptx_lines, kernel.name or None)
    src_of = ptx_source_lines(ptx_lines, lines)
    sass = sass_lines(cubin if cubin is not None else _cubin_of(kernel))
    bbs = blocks(lines)
    loop_labels: dict[str, int] = {}   # a loop region: from a label to the last branch back to it
    starts = {b.label: b.start for b in bbs if b.label}
    for b in bbs:
        for ins in b.instrs:
            if ins.target in starts and starts[ins.target] <= ins.line:
                loop_labels[ins.target] = max(loop_labels.get(ins.target, 0), ins.line)
    flags = [b.is_loop or any(starts[lab] <= b.start <= end for lab, end in loop_labels.items()) for b in bbs]
    # SASS instructions (and their cost) per source line, kept apart for SASS inside and outside loops, so a
    # line's loop cost goes to the PTX loop windows holding it and its straight-line cost to the others
    count: dict[tuple[SourceLine, bool], float] = defaultdict(float)
    cost: dict[tuple[SourceLine, bool], float] = defaultdict(float)
    for addr, src, loop, _ in sass:
        if src is not None:
            count[src, loop] += 1
            cost[src, loop] += samples.get(addr, 0.0) if samples is not None else (LOOP_TRIPS if loop else 1)
    held: dict[tuple[SourceLine, bool], int] = defaultdict(int)
    mine_of = []
    for b, flag in zip(bbs, flags):
        mine: dict[SourceLine, int] = defaultdict(int)
        for ins in b.instrs:
            if ins.line in src_of:
                mine[src_of[ins.line]] += 1
                held[src_of[ins.line], flag] += 1
        mine_of.append(mine)
    out = []
    for b, flag, mine in zip(bbs, flags, mine_of):
        n_sass = raw = 0.0
        for s, n in mine.items():
            for pool in (flag, not flag):   # the other pool too when no window of its kind holds the line
                if pool == flag or held[s, pool] == 0:
                    n_sass += count[s, pool] * n / held[s, flag]
                    raw += cost[s, pool] * n / held[s, flag]
        out.append(dict(label=b.label or "", start=b.start, end=b.end, loop=flag, ptx_instructions=len(b.instrs),
                        sass_instructions=round(n_sass, 2), raw=raw, source_lines=sorted({s[1] for s in mine})))
    total = sum(w["raw"] for w in out) or 1.0
    windows = [HotWindow(kernel=kernel.name, weight=round(w.pop("raw") / total, 4),
                         source="profile" if samples is not None else "sass", profile_metric=metric, **w)
               for w in out]
    windows.sort(key=lambda w: (-w.weight, w.start))
    return windows[:top] if top else windows


def window_of(windows: list[HotWindow], line: int) -> HotWindow | None:
    """The window holding PTX line `line`."""
    return next((w for w in windows if w.start <= line <= w.end), None)


def window_sass(kernel: RecoveredKernel, window: HotWindow, limit: int = 200, cubin: bytes | None = None,
                profile: ProfileSamples | None = None) -> list[str]:
    """The SASS instructions of the window's source lines (`/*addr*/ [loop] INSTR`, then `# N samples` where a
    profile gives the instruction a value), at most `limit`."""
    lines = set(window.source_lines)
    values = profile.samples if profile is not None else {}
    out = [f"/*{addr:04x}*/ {'L ' if loop else '  '}{text}"
           + (f"   # {values[addr]:g} {profile.metric}" if values.get(addr) else "")
           for addr, src, loop, text in sass_lines(cubin if cubin is not None else _cubin_of(kernel))
           if src is not None and src[1] in lines]
    return out[:limit] + ([f"... {len(out) - limit} more"] if len(out) > limit else [])
