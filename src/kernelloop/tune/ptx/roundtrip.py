"""Re-assemble a recovered PTX with Triton's ptxas and flags, and compare the result with the original cubin.

Compared, each difference listed: the cubin's bytes; the SASS (`cuobjdump -sass`, else `nvdisasm -c`) with
addresses, encodings and label numbers normalised away; the resources (`cuobjdump --dump-resource-usage`:
REG, STACK, SHARED, LOCAL); every `.nv.info` attribute (`cuobjdump -elf`: register count, frame size, parameter
layout, REQNTID/MAXNTID, maximum registers, ...). Without an original cubin, the re-assembled cubin is checked
against what the PTX declares: its parameter layout and its `.reqntid`/`.maxntid`.
"""

from __future__ import annotations

import base64
import functools

from ...core.build.cubin import parse_resource_usage
from . import parse
from .records import Difference, RecoveredKernel, RoundTrip
from .tools import Assembly, assemble, run_tool

_RESOURCES = ("REG", "STACK", "SHARED", "LOCAL")


def sass(cubin: bytes) -> list[str]:
    """The normalised SASS of a cubin (cuobjdump, else nvdisasm)."""
    return list(_sass(bytes(cubin)))


@functools.lru_cache(maxsize=64)
def _sass(cubin: bytes) -> tuple[str, ...]:
    """sass() once per distinct cubin in a process: the disassembler takes most of a second a cubin, and a round trip,
    the edits' checks and the proof each ask for the original's again."""
    try:
        return tuple(parse.normalise_sass(run_tool("cuobjdump", ["-sass"], cubin)))
    except FileNotFoundError:
        return tuple(ln for ln in parse.normalise_sass(run_tool("nvdisasm", ["-c"], cubin))
                     if not ln.startswith("Function"))


def _describe(cubin: bytes) -> dict:
    """Resources and .nv.info of a cubin (milliseconds; the SASS, a second or more, is taken only when needed)."""
    return {"usage": parse_resource_usage(run_tool("cuobjdump", ["--dump-resource-usage"], cubin)),
            "info": parse.nv_info(run_tool("cuobjdump", ["-elf"], cubin))}


def _first_difference(a: list[str], b: list[str]) -> Difference:
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return Difference(kind="sass", what=f"instruction {i} of {len(a)} (re-assembled: {len(b)})",
                      original=a[i] if i < len(a) else "(end)", reassembled=b[i] if i < len(b) else "(end)")


def declared(kernel: RecoveredKernel, info: dict[str, list[str]]) -> list[Difference]:
    """Where a cubin's `.nv.info` disagrees with the PTX's `.entry` (parameter layout, thread bounds)."""
    out: list[Difference] = []
    entry = kernel.entry
    if entry is None:
        return out
    want = parse.ptx_layout(entry, parse.param_base(info, entry.name))
    got = parse.kparams(info, entry.name)
    if want != got:
        out.append(Difference(kind="params", what="parameter layout (ordinal, offset, size)",
                              original=str(want), reassembled=str(got)))
    for key, attr in (("reqntid", "EIATTR_REQNTID"), ("maxntid", "EIATTR_MAX_THREADS")):
        if key in entry.directives:
            dims = (entry.directives[key] + [1, 1])[:3]
            vals = info.get(f".nv.info.{entry.name}/{attr}", [""])[0].split()
            if [int(v, 16) for v in vals] != dims:
                out.append(Difference(kind="declarations", what=f".{key} against {attr}", original=str(dims),
                                      reassembled=" ".join(vals) or "(absent)"))
    return out


def round_trip(kernel: RecoveredKernel, arch: int = 90) -> RoundTrip:
    """Assemble `kernel.ptx` as Triton would and compare with `kernel`'s cubin (where it has one)."""
    asm: Assembly = assemble(kernel.ptx, arch, kernel.metadata)
    if not asm.ok:
        return RoundTrip(ok=False, assembled=False, error=asm.error, command=asm.command)
    new = _describe(asm.cubin)
    diffs = declared(kernel, new["info"])
    new_sass = sass(asm.cubin)
    base = dict(ok=False, assembled=True, command=asm.command, sass_instructions=sum(not ln.startswith("Function") for ln in new_sass),
                registers=asm.registers)
    if not kernel.cubin_b64:
        return RoundTrip(**{**base, "ok": not diffs, "differences": diffs})
    cubin = base64.b64decode(kernel.cubin_b64)
    old = _describe(cubin)
    identical = cubin == asm.cubin
    if not identical:   # equal bytes disassemble equally: the original's SASS is read only when they differ
        diffs.append(Difference(kind="cubin", what="bytes differ", original=f"{len(cubin)} bytes",
                                reassembled=f"{len(asm.cubin)} bytes"))
    old_sass = new_sass if identical else sass(cubin)
    sass_equal = old_sass == new_sass
    if not sass_equal:
        diffs.append(_first_difference(old_sass, new_sass))
    for fn in sorted(set(old["usage"]) | set(new["usage"])):
        for key in _RESOURCES:
            a, b = old["usage"].get(fn, {}).get(key), new["usage"].get(fn, {}).get(key)
            if a != b:
                diffs.append(Difference(kind="resources", what=f"{fn} {key}", original=str(a), reassembled=str(b)))
    for key in sorted(set(old["info"]) | set(new["info"])):
        a, b = old["info"].get(key), new["info"].get(key)
        if a != b:
            diffs.append(Difference(kind="nv_info", what=key, original="; ".join(a or ["(absent)"]),
                                    reassembled="; ".join(b or ["(absent)"])))
    # the bytes alone differing (e.g. another ptxas's version note) does not fail the round trip
    ok = all(d.kind == "cubin" for d in diffs)
    return RoundTrip(**{**base, "ok": ok, "compared_to_cubin": True, "identical_cubin": identical,
                        "sass_equal": sass_equal, "differences": diffs})
