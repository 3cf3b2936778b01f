"""The body of a PTX `.entry` as lines, instructions and basic blocks: what the rule-based edits and the hot windows
read. Conservative by construction: anything this reader does not understand is a `barrier` (nothing is moved
across it, nothing is duplicated through it).

A line is one of: an instruction (`[@[!]%p] opcode operands;`), a label (`$L__BB0_2:`), a scope brace (`{` / `}`
of an inline-assembly block), a directive (`.loc`, `.reg`, `.pragma` ...), or other (blank, comment, a jump
table's continuation). Basic blocks start at a label or after a branch; loops are blocks that end in a branch
back to their own label (Triton's loops are single blocks: `$L__BB0_2: ... @%p6 bra $L__BB0_2;`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import parse

_LABEL = re.compile(r"^\s*(\$?[\w$]+):")
_INSTR = re.compile(r"^\s*(?:@(!?)(%[\w]+)\s+)?([a-z][\w.:]*)\b\s*(.*?)\s*;\s*(?://.*)?$")
_REG = re.compile(r"%[A-Za-z_][\w]*")

# Opcodes (their first dotted word) whose only effect is writing the registers of their first operand: they
# may be reordered with each other and with loads when registers allow. Everything else is a barrier.
PURE = frozenset("""mov add sub mul mad mad24 mul24 fma div rem abs neg min max and or xor not shl shr cvt cvta setp
selp set rcp sqrt rsqrt ex2 lg2 sin cos tanh bfe bfi prmt shf popc clz brev copysign testp fns lop3 sad dp4a dp2a
cnot""".split())
_MEMORY_LOADS = ("ld.global", "ld.param", "ld.const")
_ORDERED = (".volatile", ".acquire", ".relaxed", ".mmio", ".sys")


@dataclass
class Instr:
    """One instruction line."""

    line: int                 # index in the PTX's lines
    text: str
    pred: str | None          # "%p1" (None: unpredicated)
    negated: bool
    opcode: str               # "ld.global.v4.b32"
    operands: str
    defs: frozenset[str] = frozenset()
    uses: frozenset[str] = frozenset()

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def is_branch(self) -> bool:
        return self.base in ("bra", "brx", "ret", "exit", "call", "trap")

    @property
    def is_load(self) -> bool:
        """A plain load from global, param or constant memory (no ordering semantics)."""
        return self.opcode.startswith(_MEMORY_LOADS) and not any(o in self.opcode for o in _ORDERED)

    @property
    def is_global_load(self) -> bool:
        return self.is_load and self.opcode.startswith("ld.global")

    @property
    def is_global_store(self) -> bool:
        return self.opcode.startswith("st.global") and not any(o in self.opcode for o in _ORDERED)

    @property
    def movable(self) -> bool:
        """Pure ALU or a plain load: reordering it changes nothing but the order (registers permitting)."""
        return self.base in PURE or self.is_load

    @property
    def target(self) -> str | None:
        """A branch's label."""
        if self.base != "bra":
            return None
        m = re.match(r"\s*(\$?[\w$]+)", self.operands)
        return m.group(1) if m else None


@dataclass
class Line:
    index: int
    text: str
    kind: str                 # instr | label | scope | directive | other
    instr: Instr | None = None
    label: str | None = None


@dataclass
class Block:
    """A basic block: `start` is its label line (or its first line), `end` its last line (inclusive)."""

    label: str | None
    start: int
    end: int
    instrs: list[Instr] = field(default_factory=list)

    @property
    def is_loop(self) -> bool:
        """A single-block loop: the block ends in a branch back to its own label."""
        last = self.instrs[-1] if self.instrs else None
        return bool(last and self.label and last.target == self.label)


def _operands(text: str) -> list[str]:
    """Top-level comma-separated operands (a `{...}` vector or a `[...]` address is one operand)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_instr(index: int, text: str) -> Instr | None:
    m = _INSTR.match(text)
    if m is None:
        return None
    negated, pred, opcode, ops = m.group(1) == "!", m.group(2), m.group(3), m.group(4)
    operands = _operands(ops)
    defs: set[str] = set()
    uses: set[str] = set()
    writes_first = not (opcode.startswith(("st.", "st ", "red", "bar", "barrier", "prefetch", "cp.", "bra", "ret",
                                           "exit", "fence", "membar", "mbarrier", "wgmma", "tensormap", "stmatrix",
                                           "setmaxnreg", "griddepcontrol", "trap")) or opcode == "st")
    for i, op in enumerate(operands):
        regs = set(_REG.findall(op))
        if i == 0 and writes_first and not op.startswith("["):
            defs |= {r for r in regs if "|" not in op} | {r for r in re.split(r"\s*\|\s*", op) if r.startswith("%")}
        else:
            uses |= regs
    if pred:
        uses.add(pred)
    return Instr(line=index, text=text, pred=pred, negated=negated, opcode=opcode, operands=ops,
                 defs=frozenset(defs), uses=frozenset(uses))


def body_range(ptx_lines: list[str], name: str | None = None) -> tuple[int, int]:
    """(first, last) line indices strictly inside the body braces of the `.entry` (the first, or `name`)."""
    start = None
    for i, ln in enumerate(ptx_lines):
        if ".entry" in ln and (name is None or re.search(rf"\.entry\s+{re.escape(name)}\b", ln)):
            start = i
            break
    if start is None:
        raise ValueError("the PTX declares no .entry" + (f" {name}" if name else ""))
    i = start
    while i < len(ptx_lines) and parse.strip_comments(ptx_lines[i]).strip() != "{":
        i += 1
    depth = 0
    for j in range(i, len(ptx_lines)):
        s = parse.strip_comments(ptx_lines[j])
        depth += s.count("{") - s.count("}")
        if depth == 0:
            return i + 1, j - 1
    raise ValueError("unbalanced braces in the .entry body")


def classify(ptx_lines: list[str], name: str | None = None) -> list[Line]:
    """Every line of the entry's body, classified."""
    lo, hi = body_range(ptx_lines, name)
    out = []
    for i in range(lo, hi + 1):
        text = ptx_lines[i]
        s = parse.strip_comments(text).strip()
        if not s:
            out.append(Line(i, text, "other"))
        elif s in ("{", "}"):
            out.append(Line(i, text, "scope"))
        elif (m := _LABEL.match(s)) and not s.startswith("."):
            out.append(Line(i, text, "label", label=m.group(1)))
        elif s.startswith("."):
            out.append(Line(i, text, "directive"))
        elif (ins := parse_instr(i, s)) is not None:
            out.append(Line(i, text, "instr", instr=ins))
        else:
            out.append(Line(i, text, "other"))
    return out


def branch_targets(lines: list[Line]) -> set[str]:
    """Labels some branch names (a jump table's labels count too: every label on an `other` line)."""
    out = {ln.instr.target for ln in lines if ln.kind == "instr" and ln.instr.target}
    for ln in lines:
        if ln.kind == "other" or (ln.kind == "instr" and ln.instr.base == "brx"):
            out |= set(re.findall(r"\$L__\w+", ln.text))
    return out


def blocks(lines: list[Line]) -> list[Block]:
    """Basic blocks in order: a label some branch names opens one (a debug label such as `$L__tmp3` does not),
    a branch closes one."""
    out: list[Block] = []
    cur: Block | None = None
    targets = branch_targets(lines)
    for ln in lines:
        if ln.kind == "label" and ln.label in targets:
            if cur is not None:
                out.append(cur)
            cur = Block(label=ln.label, start=ln.index, end=ln.index)
            continue
        if cur is None:
            cur = Block(label=None, start=ln.index, end=ln.index)
        cur.end = ln.index
        if ln.kind == "instr":
            cur.instrs.append(ln.instr)
            if ln.instr.is_branch:
                out.append(cur)
                cur = None
    if cur is not None:
        out.append(cur)
    return out


def opaque(ln: Line) -> bool:
    """A line this reader cannot see through: a scope brace, or text that is neither instruction, label,
    directive, blank nor comment."""
    return ln.kind == "scope" or (ln.kind == "other" and bool(parse.strip_comments(ln.text).strip()))


def line_kinds(lines: list[Line], lo: int, hi: int) -> list[Line]:
    """The classified lines with index in [lo, hi]."""
    return [ln for ln in lines if lo <= ln.index <= hi]


def labels(lines: list[Line]) -> set[str]:
    return {ln.label for ln in lines if ln.kind == "label"}


def loc_lines(lines: list[Line], lo: int, hi: int) -> list[int]:
    """The source lines (`.loc FILE LINE COL`) of lines [lo, hi], in order, each once."""
    out: list[int] = []
    for ln in lines:
        if lo <= ln.index <= hi and ln.kind == "directive":
            m = re.match(r"\s*\.loc\s+\d+\s+(\d+)", ln.text)
            if m and int(m.group(1)) not in out:
                out.append(int(m.group(1)))
    return out
