"""Static checks of an edited PTX against the PTX it was edited from: what must hold before the edit may be
assembled into a kernel that Triton's launcher (built for the original) starts.

- the `.entry`'s name and parameter list (order, types, qualifiers, array sizes) are unchanged: the launcher
  packs the arguments for the original signature;
- the performance directives (`.reqntid`, `.maxntid`, `.maxnreg`, `.minnctapersm`, cluster shapes) are unchanged:
  the launch's block shape was chosen for them;
- no new `.global`/`.visible`/`.const`/`.weak` symbol and no new `.extern` (nothing to link, nothing to export);
- static shared memory plus the launch's dynamic shared memory (the original metadata's `shared`) stays within
  the device's 227 KB per block (sm_90's opt-in limit, 232448 bytes);
- ptxas (Triton's, with Triton's flags) assembles it: its errors come back verbatim;
- the registers it assembles to stay within the launch's limit (the original's `.maxnreg`, else 255).
"""

from __future__ import annotations

from ...core.build.cubin import parse_resource_usage
from . import parse
from .records import Violation
from .tools import assemble, run_tool

SHARED_LIMIT_SM90 = 232448   # bytes per block with the opt-in attribute (227 KB)
MAX_REGISTERS = 255
_LINKAGE = ("global", "visible", "const", "weak")


def _entry_violations(original: str, edited: str) -> list[Violation]:
    a, b = parse.entries(original), parse.entries(edited)
    if not b:
        return [Violation(rule="entry_name", message="the edited PTX declares no .entry")]
    if len(a) != len(b) or [e.name for e in a] != [e.name for e in b]:
        return [Violation(rule="entry_name", message=f".entry {[e.name for e in a]} became {[e.name for e in b]}")]
    out = []
    for ea, eb in zip(a, b):
        pa, pb = [p.signature for p in ea.params], [p.signature for p in eb.params]
        if pa != pb:
            out.append(Violation(rule="params", message=f"{ea.name}: parameters {pa} became {pb}"))
        elif [p.name for p in ea.params] != [p.name for p in eb.params]:
            out.append(Violation(rule="params", message=f"{ea.name}: parameter names changed"))
        if ea.directives != eb.directives:
            out.append(Violation(rule="launch_bounds",
                                 message=f"{ea.name}: directives {ea.directives} became {eb.directives}"))
    return out


def _symbol_violations(original: str, edited: str) -> list[Violation]:
    old, new = parse.symbols(original), parse.symbols(edited)
    out = []
    for key in sorted(set(new) - set(old)):
        kind, name = key.split(":", 1)
        if kind == "extern":
            out.append(Violation(rule="new_extern", message=f"new .extern {name}: {new[key][:200]}"))
        elif kind in _LINKAGE:
            out.append(Violation(rule="new_symbol", message=f"new .{kind} {name}: {new[key][:200]}"))
    return out


def check_edit(original: str, edited: str, *, shared_bytes: int = 0, arch: int = 90, metadata: dict | None = None,
               shared_limit: int = SHARED_LIMIT_SM90, assemble_it: bool = True) -> list[Violation]:
    """Every rule `edited` breaks against `original` (empty: it may be assembled and launched as the original).

    `shared_bytes` is the launch's dynamic shared memory (the original's metadata `shared`; taken from
    `metadata` when given)."""
    if metadata and metadata.get("shared") is not None:
        shared_bytes = int(metadata["shared"])
    out = _entry_violations(original, edited) + _symbol_violations(original, edited)
    static = parse.static_shared_bytes(edited)
    if static > parse.static_shared_bytes(original) and static + shared_bytes > shared_limit:
        out.append(Violation(rule="shared_memory", message=f"{static} bytes of static shared memory + the launch's "
                             f"{shared_bytes} > {shared_limit} bytes per block"))
    if not assemble_it:
        return out
    asm = assemble(edited, arch, metadata)
    if not asm.ok:
        return out + [Violation(rule="assembles", message=asm.error)]
    entry = next(iter(parse.entries(original)), None)
    limit = (entry.directives.get("maxnreg") or [MAX_REGISTERS])[0] if entry else MAX_REGISTERS
    if asm.registers is not None and asm.registers > limit:
        out.append(Violation(rule="registers", message=f"{asm.registers} registers per thread > {limit}"))
    usage = parse_resource_usage(run_tool("cuobjdump", ["--dump-resource-usage"], asm.cubin))
    assembled_shared = max((r.get("SHARED", 0) for r in usage.values()), default=0)
    if assembled_shared + shared_bytes > shared_limit and not any(v.rule == "shared_memory" for v in out):
        out.append(Violation(rule="shared_memory", message=f"the assembled kernel's {assembled_shared} bytes of "
                             f"static shared memory + the launch's {shared_bytes} > {shared_limit} bytes per block"))
    return out
