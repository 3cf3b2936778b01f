"""Build resources from the compiled kernel: registers, spills, shared and local memory, access widths.

Triton's compiled kernel exposes `n_regs`, `n_spills`, `metadata.shared` and the binary `asm['cubin']`.
The SASS of the cubin (`cuobjdump --dump-sass`) says what the counters cannot: whether global loads are
128-bit wide (`LDG.E.128`: one instruction moves 16 bytes per thread; a row whose pitch is not a multiple
of 16 bytes, or a pointer Triton cannot prove aligned, falls back to `LDG.E.U16` per element), and whether
the kernel touches local memory (`LDL`/`STL`: spills or local arrays, hundreds of cycles each).

SASS syntax as cuobjdump prints it (one instruction per line, encodings in trailing comments):

        Function : _layernorm_fwd
        /*0240*/               @P4 LDG.E.128 R4, desc[UR14][R6.64] ;            /* 0x0000000e06044981 */
        /*0250*/                   STL [R1+0x8], R5 ;                            /* 0x0000080501007387 */

i.e. `/*address*/ [@[!]Pn] OPCODE[.MOD...] operands ;`. The opcode's modifiers carry the access width
(`.64`, `.128`, `.U8`, `.S16`, ...; none = 32-bit) among other flags (`.E`, `.EF`, `.LU`, `.CONSTANT`, ...).

cuobjdump ships with Triton's wheel (`triton/backends/nvidia/bin/`), so this works on machines without a GPU
for cubins compiled ahead of time.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ...core.build.cubin import disassemble, find_tool, parse_resource_usage, resource_usage  # noqa: F401 - part of this module's API
from ...base.records import BuildResources

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INSTR = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Za-z0-9_]+)*)\s*([^;]*);")

# Width (bits) named by a memory instruction's modifier; no width modifier = 32 bits.
_WIDTHS = {"8": 8, "U8": 8, "S8": 8, "16": 16, "U16": 16, "S16": 16, "32": 32, "64": 64, "128": 128}

GLOBAL_LOADS = frozenset({"LDG"})
GLOBAL_STORES = frozenset({"STG"})
LOCAL_LOADS = frozenset({"LDL"})
LOCAL_STORES = frozenset({"STL"})
SHARED_LOADS = frozenset({"LDS", "LDSM"})
SHARED_STORES = frozenset({"STS"})
TENSOR_OPS = frozenset({"HMMA", "HGMMA", "IMMA", "IGMMA", "BMMA", "DMMA", "QGMMA", "UTCHMMA", "UTCQMMA"})
ASYNC_COPIES = frozenset({"LDGSTS", "UBLKCP", "UTMALDG", "UTMASTG"})


@dataclass(frozen=True)
class Instruction:
    """One SASS instruction."""

    address: int
    opcode: str
    modifiers: tuple[str, ...]
    predicate: str
    operands: str

    @property
    def width(self) -> int:
        """Access width in bits for memory instructions (32 when no width modifier)."""
        for m in self.modifiers:
            if m in _WIDTHS:
                return _WIDTHS[m]
        return 32


@dataclass
class SassStats:
    """Counts over one SASS function."""

    name: str
    instructions: int = 0
    opcodes: Counter = field(default_factory=Counter)
    global_loads: Counter = field(default_factory=Counter)    # width -> count
    global_stores: Counter = field(default_factory=Counter)
    local_loads: int = 0
    local_stores: int = 0
    shared_loads: int = 0
    shared_stores: int = 0
    tensor: int = 0
    async_copies: int = 0

    def add(self, ins: Instruction) -> None:
        if ins.opcode == "NOP":
            return
        self.instructions += 1
        self.opcodes[ins.opcode] += 1
        op = ins.opcode
        if op in GLOBAL_LOADS:
            self.global_loads[ins.width] += 1
        elif op in GLOBAL_STORES:
            self.global_stores[ins.width] += 1
        elif op in LOCAL_LOADS:
            self.local_loads += 1
        elif op in LOCAL_STORES:
            self.local_stores += 1
        elif op in SHARED_LOADS:
            self.shared_loads += 1
        elif op in SHARED_STORES:
            self.shared_stores += 1
        elif op in ASYNC_COPIES:
            self.async_copies += 1
        if op in TENSOR_OPS:
            self.tensor += 1


def parse_instruction(line: str) -> Instruction | None:
    """One SASS line as an Instruction, or None for headers, encodings and blank lines."""
    m = _INSTR.match(line)
    if not m:
        return None
    addr, pred, opcode, mods, operands = m.groups()
    return Instruction(address=int(addr, 16), opcode=opcode, modifiers=tuple(x for x in mods.split(".") if x),
                       predicate=(pred or "").strip(), operands=operands.strip())


def parse_sass(text: str) -> dict[str, SassStats]:
    """SASS text (one or more functions) -> statistics per function name, in order of appearance."""
    out: dict[str, SassStats] = {}
    current: SassStats | None = None
    for line in text.splitlines():
        fm = _FUNCTION.match(line)
        if fm:
            current = out.setdefault(fm.group(1), SassStats(fm.group(1)))
            continue
        ins = parse_instruction(line)
        if ins is None:
            continue
        if current is None:  # instructions before any header: an anonymous function
            current = out.setdefault("", SassStats(""))
        current.add(ins)
    return out


def resources_from_sass(stats: SassStats, *, registers: int | None = None, spills: int | None = None,
                        shared_bytes: int | None = None, stack_bytes: int | None = None,
                        source: str = "sass") -> BuildResources:
    """A BuildResources record from SASS counts plus the counters the build reported."""
    return BuildResources(
        kernel=stats.name, registers=registers, spills=spills, shared_bytes=shared_bytes, stack_bytes=stack_bytes,
        local_loads=stats.local_loads, local_stores=stats.local_stores, global_loads=dict(stats.global_loads),
        global_stores=dict(stats.global_stores), shared_loads=stats.shared_loads, shared_stores=stats.shared_stores,
        tensor_instructions=stats.tensor, instructions=stats.instructions, source=source)


def resources_from_cubin(cubin: bytes, name: str | None = None, *, registers: int | None = None,
                         spills: int | None = None, shared_bytes: int | None = None) -> BuildResources:
    """Resources of kernel `name` (default: the cubin's first function) from its SASS and resource table.

    Explicit `registers`/`spills`/`shared_bytes` (Triton's counters) take precedence over cuobjdump's table.
    """
    functions = parse_sass(disassemble(cubin))
    if not functions:
        raise ValueError("the cubin holds no SASS function")
    stats = functions[name] if name is not None else next(iter(functions.values()))
    usage = resource_usage(cubin).get(stats.name, {})
    return resources_from_sass(
        stats, registers=registers if registers is not None else usage.get("REG"), spills=spills,
        shared_bytes=shared_bytes if shared_bytes is not None else usage.get("SHARED"),
        stack_bytes=usage.get("STACK"), source="cuobjdump sass + resource usage")


def resources_from_triton(kernel) -> BuildResources:
    """Resources of a Triton CompiledKernel: its counters plus the SASS of `asm['cubin']`.

    Without a cubin (interpreter) only the counters are filled.
    """
    meta = getattr(kernel, "metadata", None)
    name = getattr(meta, "name", None)
    regs, spills = getattr(kernel, "n_regs", None), getattr(kernel, "n_spills", None)
    shared = getattr(meta, "shared", None)
    cubin = (getattr(kernel, "asm", None) or {}).get("cubin")
    if not cubin:
        return BuildResources(kernel=name or "", registers=regs, spills=spills, shared_bytes=shared,
                              source="triton metadata")
    res = resources_from_cubin(cubin if isinstance(cubin, bytes) else bytes(cubin), name,
                               registers=regs, spills=spills, shared_bytes=shared)
    return res.model_copy(update={"source": "triton metadata + " + res.source})


__all__ = ["Instruction", "SassStats", "disassemble", "find_tool", "parse_instruction", "parse_resource_usage",
           "parse_sass", "resource_usage", "resources_from_cubin", "resources_from_sass", "resources_from_triton"]
